"""The encoder base class, below every module that registers encoders (``encoders``, ``flows``, ``gen_encoders``):
``forward(x) = constrain(head(features(x)))`` with an output constraint."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from causal.errors import UserError

CONSTRAINTS = ("none", "sphere", "box")


class Encoder(nn.Module):
    """Base: ``forward(x) = constrain(head(features(x)))``."""

    registry_name: ClassVar[str]
    input_kind: ClassVar[str] = "image"  # "image" (B, 3, H, W) or "vector" (B, D)

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
