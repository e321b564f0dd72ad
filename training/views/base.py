"""The view-maker interface: turn a batch of anchors into the views an objective compares.

A batch is a dict of tensors already on the training device: ``images`` uint8 (B, H, W, 3),
``latents`` float32 (B, D), optionally ``classes`` (B,), ``index`` (B,) and, for stores with exact
LT pairs, ``views/NAME/images`` etc. A view maker returns ``n_views`` float tensors (B, 3, H, W),
normalised with the store's statistics: a fixed count, or, for makers with ``any_views`` (the DA makers), the
J >= 2 of ``--n-views J`` (``TrainConfig.n_views``). View makers are registered by name in
``training.registry.VIEWS``; ``A+B`` combines recipes (see ``training.views.make_view_maker``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from causal.errors import UserError

DEFAULT_VIEWS = 2  # --n-views default: every view maker's own count (J = 2 for the ones that take any J)


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
    n_views: int = 2  # views per anchor: a fixed count, or the instance's J where ``any_views``
    any_views: ClassVar[bool] = False  # makes any J >= 2 independently drawn views (``--n-views J``)
    requires: ClassVar[tuple[str, ...]] = ()  # store arrays the maker needs, e.g. ("views/hues/images",)
    objective: ClassVar[str | None] = None  # the one objective this maker feeds, if its views are not images

    def __init__(self, normalize: Normalize, n_views: int = DEFAULT_VIEWS, **options: Any):
        if n_views != DEFAULT_VIEWS and not self.any_views:
            raise UserError(f"--n-views {n_views}: view maker {getattr(self, 'registry_name', type(self).__name__)} "
                            f"makes a fixed set of views (use --n-views {DEFAULT_VIEWS}); only DA view makers (crops, "
                            "colour, none, paper004_*, not rotation) make J views")
        if self.any_views:
            self.n_views = n_views
        self.normalize = normalize
        self.options = options
        self.last_params: dict[str, torch.Tensor] = {}  # sampled parameters of the last call, for logging

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        raise NotImplementedError
