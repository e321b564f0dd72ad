"""Barlow Twins: make the cross-correlation of two views' standardised embeddings the identity."""

from __future__ import annotations

import torch
from torch import nn

from ident3d.training.hparams import NonNegative
from ident3d.training.losses.functional import global_two_views, off_diagonal, standardise
from ident3d.training.objective_parts.base import Objective
from ident3d.training.registry import OBJECTIVES


def barlow_twins_loss(
    za: torch.Tensor, zb: torch.Tensor, lambd: float = 0.0051, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """sum_i (1 - C_ii)^2 + lambd * sum_{i!=j} C_ij^2 with C = std(za)^T std(zb) / N (biased batch std).

    Returns (loss, on-diagonal term, off-diagonal term before the lambd weight).
    """
    n = za.shape[0]
    c = standardise(za, eps).T @ standardise(zb, eps) / n
    on = (1.0 - torch.diagonal(c)).pow(2).sum()
    off = off_diagonal(c).pow(2).sum()
    return on + lambd * off, on, off


@OBJECTIVES.register("barlow_twins")
class BarlowTwins(Objective):
    """Barlow Twins: invariance (C_ii -> 1) plus redundancy reduction (C_ij -> 0) of the cross-correlation.

    Hyperparameters:
        lambd: weight of the off-diagonal term (default 0.0051).
        eps: added to the per-dimension batch variance before standardising (default 1e-5, as BatchNorm).
    Under DDP the batch statistics and the cross-correlation are over the global batch (embeddings gathered).
    """

    def __init__(self, encoder: nn.Module, *, lambd: NonNegative = 0.0051, eps: NonNegative = 1e-5):
        super().__init__(encoder)
        self.lambd, self.eps = float(lambd), float(eps)

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Barlow Twins loss; logs the on- and off-diagonal terms."""
        za, zb = global_two_views(embeddings)
        loss, on, off = barlow_twins_loss(za, zb, self.lambd, self.eps)
        return {"loss": loss, "on_diag": on.detach(), "off_diag": off.detach()}
