"""The objective interface: an nn.Module that owns whatever the method adds to the encoder
(projector, predictor, momentum encoder, queue, decoder, ...) and turns views into a loss.

Discriminative methods override ``loss(embeddings)``; methods with their own state or extra
networks override ``forward``. The trainer only calls ``forward``, ``after_step`` and
``parameters``, so generative models (decoders), flows and trainable augmentation channels plug in
the same way.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn


class Objective(nn.Module):
    """Base class of all objectives."""

    registry_name: ClassVar[str]
    n_views: ClassVar[int] = 2  # views per anchor the view maker must produce
    any_views: ClassVar[bool] = False  # the loss is defined for any J >= 2 views (--n-views J, a source's set size)
    view_maker: ClassVar[str | None] = None  # the one view maker this objective works with, if it needs its own
    data_args: ClassVar[tuple[str, ...]] = ()  # hyperparameters its ``store_args`` fills in from the data
    phases: tuple[str, ...] = ()  # alternating updates: the trainer takes one optimiser step per named phase

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """Encode every view and return {"loss": scalar, ...logged scalars}."""
        return self.loss([self.encoder(v) for v in views])

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Loss from the views' embeddings (each (B, D)); override in discriminative objectives."""
        raise NotImplementedError

    def param_groups(self) -> list[dict[str, Any]]:
        """The optimiser's parameter groups; a group's optional "lr_scale" multiplies the learning rate."""
        return [{"params": list(self.parameters())}]

    @torch.no_grad()
    def after_step(self, step: int, total_steps: int) -> None:
        """Called after each optimiser step (EMA updates, queues, schedules)."""

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        """What evaluation encodes: the encoder's output by default."""
        return self.encoder(x)

    def modality_representation(self, x: torch.Tensor, modality: int) -> torch.Tensor:
        """What evaluation encodes for modality ``modality`` of a multimodal source: one encoder for all by default."""
        return self.representation(x)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The inner layer evaluation also scores: the encoder's features by default."""
        return self.encoder.features(x)

    def representations(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every layer evaluation scores, by name ("inner", "output", and any the objective adds)."""
        return {"inner": self.features(x), "output": self.representation(x)}
