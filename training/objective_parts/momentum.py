"""Objectives with a momentum (EMA) copy of the encoder: BYOL's target and MoCo's key encoder share the copy, its
cosine momentum schedule and the update after each optimiser step."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from ident3d.training.losses.functional import cosine_momentum, ema_update_, frozen_copy
from ident3d.training.objective_parts.base import Objective


class MomentumObjective(Objective):
    """Base class: ``self.<ema_name>`` is a frozen copy of the encoder, EMA-updated after every optimiser step with
    a momentum that follows a cosine schedule from ``momentum_start`` (step 0) to ``momentum_end`` (last step)."""

    ema_name: ClassVar[str]  # the copy's attribute (its checkpoint keys): "target_encoder", "key_encoder"

    def init_momentum(self, encoder: nn.Module, momentum_start: float, momentum_end: float) -> None:
        """Make the frozen copy and keep the schedule's end points (call from ``__init__``)."""
        self.momentum_start, self.momentum_end = float(momentum_start), float(momentum_end)
        setattr(self, self.ema_name, frozen_copy(encoder))

    @torch.no_grad()
    def momentum(self, step: int, total_steps: int) -> float:
        """The copy's EMA momentum after optimiser step ``step`` of ``total_steps``."""
        return cosine_momentum(step, total_steps, self.momentum_start, self.momentum_end)

    @torch.no_grad()
    def after_step(self, step: int, total_steps: int) -> None:
        """EMA-update the copy towards the online encoder on the cosine schedule."""
        ema_update_(getattr(self, self.ema_name), self.encoder, self.momentum(step, total_steps))
