"""The encoder base class, below every module that registers encoders (``encoders``, ``flows``, ``gen_encoders``):
``forward(x) = constrain(head(features(x)))`` with an output constraint. An encoder also declares what other parts
build on it: the width of its features (``feature_dim``), its input (``image_size``, ``channels``) and the decoder
that mirrors it (``mirror_decoder``)."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from ident3d.causal.errors import UserError
from ident3d.training.decoders import ConvDecoder, no_decoder_error

CONSTRAINTS = ("none", "sphere", "box")


class Encoder(nn.Module):
    """Base: ``forward(x) = constrain(head(features(x)))``."""

    registry_name: ClassVar[str]
    input_kind: ClassVar[str] = "image"  # "image" (B, 3, H, W) or "vector" (B, D)
    feature_dim: int  # width of features(x), e.g. the VAEs' log-variance head's input; each encoder's __init__ sets it
    image_size: int = 0  # side of the input images in px, recorded by image encoders; 0: none recorded (vectors)
    channels: int = 3  # image channels the encoder reads: 3 (RGB) or 1 (grey, the channel mean)

    def __init__(self, out_dim: int, constraint: str = "none"):
        super().__init__()
        if constraint not in CONSTRAINTS:
            raise UserError(f"unknown output constraint {constraint!r}; choose one of {', '.join(CONSTRAINTS)}")
        if out_dim <= 0:
            raise UserError(f"encoder out_dim must be positive, got {out_dim}")
        self.out_dim, self.constraint = out_dim, constraint

    def features(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def head(self, h: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.head(self.features(x))
        if self.constraint == "sphere":
            return F.normalize(z, dim=1)
        if self.constraint == "box":
            return torch.sigmoid(z)
        return z

    def mirror_decoder(self, z_dim: int, width: int = 256) -> nn.Module:
        """The decoder from ``z_dim`` latents back to this encoder's input, for the generative objectives: by default
        paper 004's conv decoder (first width ``width``) for ``image_size`` and ``channels``; an encoder that records
        no image size has none (one-line UserError). Encoders with another mirror override this."""
        return ConvDecoder(z_dim, self.mirrored_image_size(), self.channels, width=width)

    def mirrored_image_size(self) -> int:
        """``image_size``, or the one-line UserError when the encoder records none."""
        if not self.image_size:
            raise no_decoder_error(self)
        return self.image_size
