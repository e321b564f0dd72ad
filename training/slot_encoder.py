"""The CNN of the object-centric objectives (``slot_attention``, ``additive_ae``), registered as encoder ``slot_cnn``,
and the soft position embedding it shares with the spatial broadcast decoder (Locatello et al. 2020).

The CNN keeps the spatial grid: ``tokens(x)`` is one feature vector per position (B, h*w, width), which Slot
Attention attends over; ``features(x)`` (the inner layer evaluation scores) is their mean over the positions.
"""

from __future__ import annotations

import torch
from torch import nn

from ident3d.training.encoder_base import Encoder
from ident3d.training.hparams import Count, Counts
from ident3d.training.registry import ENCODERS


def position_grid(height: int, width: int) -> torch.Tensor:
    """(height, width, 4) coordinates [y, x, 1 - y, 1 - x], each in [0, 1]: the input of a soft position embedding."""
    ys, xs = torch.meshgrid(torch.linspace(0.0, 1.0, height), torch.linspace(0.0, 1.0, width), indexing="ij")
    return torch.stack([ys, xs, 1.0 - ys, 1.0 - xs], dim=-1)


class SoftPositionEmbed(nn.Module):
    """Adds a learned linear map of the position grid to a (B, C, h, w) feature map."""

    def __init__(self, channels: int, height: int, width: int):
        super().__init__()
        self.proj = nn.Linear(4, channels)
        self.register_buffer("grid", position_grid(height, width), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x + the embedding of each position (channels first)."""
        return x + self.proj(self.grid).permute(2, 0, 1).unsqueeze(0)


def conv_side(size: int, strides: tuple[int, ...]) -> int:
    """Side of the feature map after 5x5 convs with padding 2 and these strides (each: ceil(side / stride))."""
    for s in strides:
        size = -(-size // s)
    return size


@ENCODERS.register("slot_cnn")
class SlotCNN(Encoder):
    """Slot Attention's CNN: 5x5 convs (width 32, ReLU) + soft position embedding, per-position LayerNorm + MLP."""

    def __init__(self, out_dim: int, constraint: str = "none", width: Count = 32, strides: Counts = (1, 1, 1, 1),
                 image_size: int = 64):
        super().__init__(out_dim, constraint)
        self.image_size, self.channels, self.width, self.strides = image_size, 3, width, tuple(strides)
        self.feature_dim = width
        layers: list[nn.Module] = []
        for i, stride in enumerate(self.strides):
            layers += [nn.Conv2d(3 if i == 0 else width, width, 5, stride=stride, padding=2), nn.ReLU()]
        self.conv = nn.Sequential(*layers)
        side = conv_side(max(1, image_size), self.strides)
        self.grid_size = (side, side)
        self.position = SoftPositionEmbed(width, side, side)
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
        self.fc = nn.Linear(width, out_dim)

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        """(B, h*w, width): one feature vector per position of the conv map (position-embedded, normed, MLP)."""
        h = self.position(self.conv(x)).flatten(2).transpose(1, 2)
        return self.mlp(self.norm(h))

    def token_grid(self, x: torch.Tensor) -> torch.Tensor:
        """``tokens`` as a map (B, width, h, w)."""
        return self.tokens(x).transpose(1, 2).reshape(x.shape[0], self.width, *self.grid_size)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, width): the tokens' mean over the positions."""
        return self.tokens(x).mean(dim=1)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """Linear(width, out_dim): the output other objectives would use (the slot objectives read ``tokens``)."""
        return self.fc(h)
