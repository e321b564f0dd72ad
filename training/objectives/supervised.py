"""The supervised ceiling: the same encoder, data and budget as the self-supervised rows, trained on the labels.

Regressing the store's latents (standardised with the store's own mean and std, so every latent weighs the same)
and classifying its class says what the data, the encoder and the number of steps allow: a column where a
self-supervised row is far below a high ceiling is the method's (a defect or a real effect), a column where the
ceiling itself is low is bounded by scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ident3d.training.hparams import NonNegative, Range
from ident3d.training.objective_parts.base import Objective
from ident3d.training.registry import OBJECTIVES

Whole = Annotated[int, Range(ge=0)]


def latent_targets(latents: np.ndarray) -> dict[str, list[float]]:
    """Mean and std per latent column (std floored at 1e-6: a constant latent is not divided by zero)."""
    x = np.asarray(latents, dtype=np.float64)
    return {"latent_mean": x.mean(0).round(6).tolist(), "latent_std": np.maximum(x.std(0), 1e-6).round(6).tolist()}


def supervised_loss(out: torch.Tensor, latents: torch.Tensor, classes: torch.Tensor, mean: torch.Tensor,
                    std: torch.Tensor, n_classes: int, class_weight: float) -> dict[str, torch.Tensor]:
    """MSE of the first D outputs against the standardised latents, plus ``class_weight`` x cross-entropy of the
    next ``n_classes`` outputs against the classes (when there are classes)."""
    d = mean.numel()
    mse = (out[:, :d] - (latents - mean) / std).pow(2).mean()
    res = {"mse": mse.detach()}
    loss = mse
    if n_classes:
        logits = out[:, d:d + n_classes]
        ce = F.cross_entropy(logits, classes.long())
        loss = loss + class_weight * ce
        res.update(ce=ce.detach(), accuracy=(logits.argmax(1) == classes.long()).float().mean())
    return {"loss": loss, **res}


@OBJECTIVES.register("supervised")
class Supervised(Objective):
    """Supervised ceiling: a linear head on the encoder regresses the standardised latents and predicts the class.

    Hyperparameters:
        class_weight: weight of the class cross-entropy (default 1; ignored for stores without classes).
        n_classes, latent_mean, latent_std: filled in from the store when a run is built (``store_args``).
    Use with ``--views labels`` (images with their latents and classes, no augmentation).
    """

    n_views = 3
    view_maker = "labels"
    data_args = ("latent_mean", "latent_std", "n_classes")

    def __init__(self, encoder: nn.Module, *, class_weight: NonNegative = 1.0, n_classes: Whole = 0,
                 latent_mean: Sequence[float] | None = None, latent_std: Sequence[float] | None = None):
        super().__init__(encoder)
        mean = torch.tensor(list(latent_mean or [0.0]), dtype=torch.float32)
        std = torch.tensor(list(latent_std or [1.0] * mean.numel()), dtype=torch.float32)
        if std.shape != mean.shape or not bool((std > 0).all()):
            raise ValueError("latent_mean and latent_std must be lists of the same length, latent_std > 0")
        self.register_buffer("latent_mean", mean)
        self.register_buffer("latent_std", std)
        self.class_weight, self.n_classes = float(class_weight), int(n_classes)
        self.head = nn.Linear(encoder.out_dim, mean.numel() + self.n_classes)

    @staticmethod
    def store_args(latents: np.ndarray, n_classes: int) -> dict[str, Any]:
        """The hyperparameters a run takes from its data: the latents' statistics and the number of classes."""
        return {**latent_targets(latents), "n_classes": int(n_classes)}

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """Loss of [images, latents (B, D), classes (B,)] (``ident3d.training.views.labels``); logs MSE, CE,
        accuracy."""
        x, latents, classes = views
        out = self.head(self.encoder(x)).float()
        return supervised_loss(out, latents.float(), classes, self.latent_mean, self.latent_std, self.n_classes,
                               self.class_weight)
