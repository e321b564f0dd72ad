"""CRL-TAC's augmentation channel (paper 002): a discrete grid of square crops, cutting them out of a batch,
and the network that gives P(T|X) over the grid from the whole image."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ident3d.causal.errors import UserError

PAPER_IMAGE, PAPER_CROP, PAPER_STRIDE = 84, 20, 4  # paper 002: 20x20 crops at stride 4 on an 84x84 canvas


@dataclass(frozen=True)
class CropGrid:
    """Square crops of ``size`` px whose top-left corners step by ``stride`` over an ``image_size`` px image."""

    image_size: int
    size: int
    stride: int

    @property
    def side(self) -> int:
        """Crop positions along one axis (17 for the paper's grid)."""
        return (self.image_size - self.size) // self.stride + 1

    @property
    def n(self) -> int:
        """Number of crops |T| (289 for the paper's grid)."""
        return self.side ** 2

    def corners(self) -> torch.Tensor:
        """(n, 2) top-left (row, column) of each crop, row-major like the channel's outputs."""
        r = torch.arange(self.side) * self.stride
        return torch.stack(torch.meshgrid(r, r, indexing="ij"), dim=-1).reshape(-1, 2)


def crop_grid(image_size: int, size: int | None = None, stride: int | None = None) -> CropGrid:
    """The paper's grid scaled to ``image_size`` unless ``size``/``stride`` are given (84 px: 20 px at stride 4)."""
    size = size or max(1, round(image_size * PAPER_CROP / PAPER_IMAGE))
    stride = stride or max(1, round(image_size * PAPER_STRIDE / PAPER_IMAGE))
    if not 1 <= size <= image_size:
        raise UserError(f"crl_tac: crop size must be between 1 and the image size {image_size}, got {size}")
    if stride < 1:
        raise UserError(f"crl_tac: crop stride must be >= 1, got {stride}")
    return CropGrid(image_size, size, stride)


def cut(x: torch.Tensor, index: torch.Tensor, grid: CropGrid) -> torch.Tensor:
    """Crops ``index`` (B, m) of images x (B, C, H, W) as (B * m, C, size, size), image-major."""
    patches = x.unfold(2, grid.size, grid.stride).unfold(3, grid.size, grid.stride)  # (B, C, side, side, s, s)
    rows = torch.arange(x.shape[0], device=x.device).unsqueeze(1).expand_as(index)
    out = patches[rows, :, index // grid.side, index % grid.side]  # (B, m, C, s, s)
    return out.reshape(-1, x.shape[1], grid.size, grid.size)


def sample_crops(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Crop indices (B, m) drawn from each row of ``probs`` (B, T) by inverse CDF at uniforms ``u`` (B, m): the
    draws come from the trainer's seeded generator, so a run is reproducible on any device."""
    cdf = probs.float().cumsum(dim=1)
    idx = torch.searchsorted(cdf, (u * cdf[:, -1:]).contiguous(), right=True)
    return idx.clamp_(max=probs.shape[1] - 1)


def nonblank_crops(images: torch.Tensor, grid: CropGrid) -> torch.Tensor:
    """(B, T) True where a crop holds a pixel that differs from the image's top-left (background) pixel, for
    uint8 or float images (B, H, W, C): on a blank canvas, the crops that intersect the digit."""
    background = images[:, :1, :1, :]
    mask = (images != background).any(dim=-1).unsqueeze(1).float()  # (B, 1, H, W)
    hit = F.max_pool2d(mask, kernel_size=grid.size, stride=grid.stride)
    return hit[:, 0, :grid.side, :grid.side].reshape(images.shape[0], -1) > 0


class ChannelNet(nn.Module):
    """P(T|X) from the whole image. ``layout="fast"``: Conv 32 - ReLU - Conv 32 - ReLU - average pool - FC 128 -
    ReLU - FC |T| with stride-2 convolutions and an adaptive pool to 10 x 10 (cheap at any size). ``"paper"``: paper
    002's Fig. 5 as drawn, stride-1 convolutions, a 2 x 2 average pool, FC 128 - FC |T| (an FC of 32 (S/2)^2 inputs
    at image size S). Either way the last layer starts at zero, so training starts from the uniform channel:
    SimCLR's."""

    def __init__(self, n_crops: int, in_channels: int = 3, width: int = 32, hidden: int = 128, pooled: int = 10,
                 layout: str = "fast", image_size: int = 0):
        super().__init__()
        if layout == "paper":
            if image_size < 2:
                raise ValueError("the paper's channel layout needs the image size")
            self.net = nn.Sequential(
                nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, width, 3, padding=1),
                nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(width * (image_size // 2) ** 2, hidden),
                nn.Linear(hidden, n_crops))
        elif layout == "fast":
            self.net = nn.Sequential(
                nn.Conv2d(in_channels, width, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(width, width, 3, stride=2, padding=1), nn.ReLU(),
                nn.AdaptiveAvgPool2d(pooled), nn.Flatten(),
                nn.Linear(width * pooled * pooled, hidden), nn.ReLU(), nn.Linear(hidden, n_crops))
        else:
            raise ValueError(f"unknown channel layout {layout!r}; choose fast or paper")
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Log-probabilities (B, T) of the crops."""
        return F.log_softmax(self.net(x).float(), dim=1)
