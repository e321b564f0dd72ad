"""The view-maker interface: turn a batch of anchors into the views an objective compares.

A batch is a dict of tensors already on the training device: ``images`` uint8 (B, H, W, 3),
``latents`` float32 (B, D), optionally ``classes`` (B,), ``index`` (B,) and, for stores with exact
LT pairs, ``views/NAME/images`` etc. A view maker returns ``n_views`` float tensors (B, 3, H, W),
normalised with the store's statistics. View makers are registered by name in
``training.registry.VIEWS``; ``A+B`` combines recipes (see ``training.views.make_view_maker``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> float (B, 3, H, W) in [0, 1]."""
    return images.permute(0, 3, 1, 2).float().div_(255.0)


class Normalize:
    """Per-channel standardisation with the store's mean and std (computed from its images)."""

    def __init__(self, mean: tuple[float, float, float], std: tuple[float, float, float]):
        self.mean, self.std = mean, std

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        m = torch.tensor(self.mean, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
        s = torch.tensor(self.std, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
        return (x - m) / s


class ViewMaker:
    """Base class: ``__call__(batch, generator) -> list of n_views normalised float image batches``."""

    registry_name: ClassVar[str]
    n_views: ClassVar[int] = 2
    requires: ClassVar[tuple[str, ...]] = ()  # store arrays the maker needs, e.g. ("views/hues/images",)
    objective: ClassVar[str | None] = None  # the one objective this maker feeds, if its views are not images

    def __init__(self, normalize: Normalize, **options: Any):
        self.normalize = normalize
        self.options = options
        self.last_params: dict[str, torch.Tensor] = {}  # sampled parameters of the last call, for logging

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        raise NotImplementedError
