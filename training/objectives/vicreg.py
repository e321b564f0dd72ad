"""VICReg: variance-invariance-covariance regularisation of two views' embeddings."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ident3d.training.hparams import NonNegative, Positive
from ident3d.training.losses.functional import global_two_views, off_diagonal
from ident3d.training.objective_parts.base import Objective
from ident3d.training.registry import OBJECTIVES


def vicreg_variance(z: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """mean_d relu(1 - sqrt(Var_batch(z_d) + eps)) with the unbiased batch variance."""
    std = torch.sqrt(z.var(dim=0) + eps)
    return F.relu(1.0 - std).mean()


def vicreg_covariance(z: torch.Tensor) -> torch.Tensor:
    """Sum of squared off-diagonal entries of the (unbiased) batch covariance, divided by D."""
    n, d = z.shape
    zc = z - z.mean(dim=0, keepdim=True)
    cov = zc.T @ zc / (n - 1)
    return off_diagonal(cov).pow(2).sum() / d


def vicreg_terms(za: torch.Tensor, zb: torch.Tensor, eps: float = 1e-4) -> tuple[torch.Tensor, ...]:
    """(invariance MSE, variance (v(za) + v(zb)) / 2, covariance c(za) + c(zb))."""
    inv = F.mse_loss(za, zb)
    var = 0.5 * (vicreg_variance(za, eps) + vicreg_variance(zb, eps))
    cov = vicreg_covariance(za) + vicreg_covariance(zb)
    return inv, var, cov


@OBJECTIVES.register("vicreg")
class VICReg(Objective):
    """VICReg: sim * MSE + std * variance hinge + cov * off-diagonal covariance of both branches.

    Hyperparameters:
        sim_coeff: weight of the invariance (MSE) term (default 25.0).
        std_coeff: weight of the variance hinge, averaged over the two branches (default 25.0).
        cov_coeff: weight of the covariance term, summed over the two branches (default 1.0).
        eps: added to the variance inside the square root (default 1e-4).
    Under DDP all three terms are over the global batch (embeddings gathered across ranks first).
    """

    def __init__(
        self,
        encoder: nn.Module,
        *,
        sim_coeff: NonNegative = 25.0,
        std_coeff: NonNegative = 25.0,
        cov_coeff: NonNegative = 1.0,
        eps: Positive = 1e-4,
    ):
        super().__init__(encoder)
        self.sim_coeff, self.std_coeff, self.cov_coeff = float(sim_coeff), float(std_coeff), float(cov_coeff)
        self.eps = float(eps)

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Weighted VICReg loss; logs the three unweighted terms."""
        za, zb = global_two_views(embeddings)
        inv, var, cov = vicreg_terms(za, zb, self.eps)
        loss = self.sim_coeff * inv + self.std_coeff * var + self.cov_coeff * cov
        return {"loss": loss, "invariance": inv.detach(), "variance": var.detach(), "covariance": cov.detach()}
