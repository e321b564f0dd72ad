"""How CRL-TAC's channel P(T|X) starts and how its logits become probabilities (levers of paper 002's open
choices, issue: CRL-TAC goes the wrong way with training): the last layer's initialisation, a temperature, and the
*control* start on the digit (a fixed prior on the crops that hold ink; a control, never a reproduction: the paper
starts from no knowledge of where the digit is)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ident3d.training.channel import CropGrid

CHANNEL_STARTS = ("uniform", "random", "control_digit")


def init_last_layer(channel: nn.Module, start: str, std: float) -> None:
    """Set the channel network's last layer for ``start``: "uniform" keeps it zero (every image starts at the
    uniform channel, SimCLR's); "random" draws its weights and bias from N(0, std^2) with torch's global
    generator (a small, image-dependent departure from uniform); "control_digit" keeps it zero (the start on the
    digit comes from ``ink_prior``)."""
    if start not in CHANNEL_STARTS:
        raise ValueError(f"unknown channel start {start!r}; choose one of {', '.join(CHANNEL_STARTS)}")
    if start == "random":
        last = channel.net[-1]
        with torch.no_grad():
            last.weight.normal_(0.0, std)
            last.bias.normal_(0.0, std)


def ink_crops(x: torch.Tensor, grid: CropGrid) -> torch.Tensor:
    """(B, T) 1.0 where a crop of images x (B, C, H, W; normalised or not) holds a pixel that differs from the
    image's top-left (background) pixel in some channel: on a blank canvas, the crops that intersect the digit
    (``ident3d.training.channel.nonblank_crops`` for channel-first float images)."""
    mask = (x != x[:, :, :1, :1]).any(dim=1, keepdim=True).float()  # (B, 1, H, W)
    hit = F.max_pool2d(mask, kernel_size=grid.size, stride=grid.stride)
    return (hit[:, 0, :grid.side, :grid.side].reshape(x.shape[0], -1) > 0).float()


def shaped_log_probs(logits: torch.Tensor, prior: torch.Tensor | None = None,
                     temperature: float = 1.0) -> torch.Tensor:
    """log P(T|X) (B, T) = log_softmax((logits + prior) / temperature); ``prior`` (B, T) is added to the logits
    (the control start: ``control_nats`` on every crop with ink)."""
    z = logits.float()
    if prior is not None:
        z = z + prior
    if temperature != 1.0:
        z = z / temperature
    return F.log_softmax(z, dim=1)
