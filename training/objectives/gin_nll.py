"""Paper 003's self-supervised GIN loss: every anchor's set of K views is encoded into one factorial
Gaussian whose mean and std are the set's own empirical moments in the latent space.

    loss = mean over anchors i and views k of  sum_d [ (h_ikd - mu_id)^2 / (2 sigma_id^2) + log sigma_id
                                                        + log(2 pi) / 2 ]  -  log|det J(x_ik)|

with mu_id, sigma_id the mean and (maximum-likelihood, ddof 0) std of h_i1d..h_iKd. The encoder must be
invertible and report its log-determinant (``log_det``); for GIN it is exactly 0, so the loss is the NLL.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ident3d.causal.errors import UserError
from ident3d.training.hparams import Positive
from ident3d.training.objective_parts.base import Objective
from ident3d.training.registry import OBJECTIVES

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def set_gaussian_nll(h: torch.Tensor, eps: float = 1e-8) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-view NLL (K, B) summed over dims, log sigma (B, D)) of h (K, B, D) under each set's own Gaussian."""
    mu = h.mean(dim=0, keepdim=True)
    var = (h - mu).pow(2).mean(dim=0, keepdim=True)
    log_sigma = 0.5 * torch.log(var + eps)
    nll = ((h - mu).pow(2) / (2 * (var + eps)) + log_sigma + HALF_LOG_2PI).sum(dim=2)
    return nll, log_sigma.squeeze(0)


@OBJECTIVES.register("gin_nll")
class GINNLL(Objective):
    """Paper 003: Gaussian NLL of each augmented set under its own empirical mean/std (GIN encoder, log-det 0).

    Hyperparameters:
        eps: added to every set variance before the log and the division (default 1e-8).
    Takes any number K >= 2 of views per anchor (the default set size is 10, as in the paper).
    """

    n_views = 10
    any_views = True  # a synthetic source's set size decides K

    def __init__(self, encoder: nn.Module, *, eps: Positive = 1e-8):
        if not callable(getattr(encoder, "log_det", None)):
            raise UserError("objective gin_nll needs an invertible encoder with a log-determinant; use --encoder gin")
        super().__init__(encoder)
        self.eps = float(eps)

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """Encode all K views in one pass, then the set NLL minus the mean log-determinant."""
        if len(views) < 2:
            raise UserError(f"gin_nll needs at least 2 views per anchor, got {len(views)}")
        x = torch.cat(views)
        h = self.encoder(x).reshape(len(views), views[0].shape[0], -1)
        nll, log_sigma = set_gaussian_nll(h, self.eps)
        log_det = self.encoder.log_det(x)
        loss = nll.mean() - log_det.mean()
        with torch.no_grad():
            spread = h.flatten(0, 1).std(dim=0)
        return {"loss": loss, "set_log_std": log_sigma.mean().detach(), "top_std": spread.max(),
                "log_det": log_det.mean().detach()}
