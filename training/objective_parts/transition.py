"""The base of objectives that learn from interventional transitions (x_t, x_{t+1}, I_{t+1}) of a sequence store:
they take the ``next_frame_targets`` views and hand them to a temporal learner (``ident3d.training.temporal``), so the
CITRIS-style and iVAE-style models train, resume and evaluate through ``ident3d train`` like any objective."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from ident3d.training.objective_parts.base import Objective


class TransitionObjective(Objective):
    """Views [x_t, x_{t+1}, targets of the step (B, n_vars)] -> the learner's loss; evaluation scores the learner's
    representation (the posterior mean). Subclasses say which learner with ``learner``."""

    n_views: ClassVar[int] = 3
    view_maker: ClassVar[str | None] = "next_frame_targets"

    def __init__(self, encoder: nn.Module, *, n_vars: int, **hparams: Any):
        super().__init__(encoder)
        self.n_vars = int(n_vars)
        self.learner = self.build(encoder, self.n_vars, hparams)

    def build(self, encoder: nn.Module, n_vars: int, hparams: dict[str, Any]) -> nn.Module:
        """The temporal learner around ``encoder`` (its loss takes x_t, x_{t+1} and the targets)."""
        raise NotImplementedError

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        x_t, x_t1, targets = views
        return self.learner.loss(x_t, x_t1, targets)

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        return self.learner.representation(x)

    def param_groups(self) -> list[dict[str, Any]]:
        groups = getattr(self.learner, "param_groups", None)
        return groups() if groups is not None else super().param_groups()
