"""The cl-ica InfoNCE family (paper 001): similarity -||f1 - f2||_p^p / tau, negatives from the batch."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from causal.errors import UserError
from training.objectives.base import Objective
from training.objectives.functional import check_two_views, lp_pow, lp_pow_matrix
from training.registry import OBJECTIVES

CONDITIONAL_P = {"normal": 2, "laplace": 1}


def lp_infonce_batch(f1: torch.Tensor, f2: torch.Tensor, p: float, tau: float, symmetric: bool = True) -> torch.Tensor:
    """Cross-entropy over the (B, B) logits -||f1_i - f2_j||_p^p / tau with the diagonal as positives.

    ``symmetric`` averages the f1 -> f2 (rows) and f2 -> f1 (columns) directions.
    """
    logits = -lp_pow_matrix(f1, f2, p) / tau
    # exact positive distances on the diagonal (the p = 2 expansion loses precision for close pairs)
    logits = torch.diagonal_scatter(logits, -lp_pow(f1, f2, p) / tau)
    targets = torch.arange(f1.shape[0], device=f1.device)
    loss = F.cross_entropy(logits, targets)
    if symmetric:
        loss = 0.5 * (loss + F.cross_entropy(logits.T, targets))
    return loss


def lp_infonce_rolled(f1: torch.Tensor, f2: torch.Tensor, p: float, tau: float, alpha: float = 0.5) -> torch.Tensor:
    """Paper 001's synthetic form 2*[a d(f1,f2)/tau + (1-a) logsumexp(-[d(f1,f3), d(f1,f2)]/tau)], f3 = roll(f2, 1).

    Averaged over the batch; with a = 0.5 it is the 2-way cross-entropy of the positive against one negative.
    """
    f3 = torch.roll(f2, shifts=1, dims=0)
    d12 = lp_pow(f1, f2, p)
    d13 = lp_pow(f1, f3, p)
    lse = torch.logsumexp(torch.stack([-d13 / tau, -d12 / tau]), dim=0)
    return (2.0 * (alpha * d12 / tau + (1.0 - alpha) * lse)).mean()


@OBJECTIVES.register("lp_infonce")
class LpInfoNCE(Objective):
    """cl-ica InfoNCE with similarity -||f1 - f2||_p^p / tau (paper 001); batch or rolled negatives.

    Hyperparameters:
        p: exponent of the distance ||.||_p^p, 1, 2 or 3 (default: set by ``conditional``).
        conditional: assumed positive-pair conditional, "normal" (p = 2, default) or "laplace" (p = 1).
        tau: temperature (default 1.0).
        negatives: "batch" (default; cross-entropy over the B x B distance matrix, diagonal = positives)
            or "rolled" (paper 001's synthetic loss with the batch rolled by one as the negative).
        symmetric: for "batch", average both directions (default True).
        alpha: weight a of the positive term in the "rolled" form (default 0.5).
    Output constraints (box / sphere) belong to the encoder.
    """

    def __init__(
        self,
        encoder: nn.Module,
        *,
        p: float | None = None,
        conditional: str = "normal",
        tau: float = 1.0,
        negatives: str = "batch",
        symmetric: bool = True,
        alpha: float = 0.5,
    ):
        if conditional not in CONDITIONAL_P:
            raise UserError(f"lp_infonce: conditional must be one of {sorted(CONDITIONAL_P)}, got {conditional!r}")
        if p is None:
            p = CONDITIONAL_P[conditional]
        if not (p > 0 and math.isfinite(p)):
            raise UserError(f"lp_infonce: p must be a positive number, got {p}")
        if negatives not in ("batch", "rolled"):
            raise UserError(f"lp_infonce: negatives must be 'batch' or 'rolled', got {negatives!r}")
        if tau <= 0:
            raise UserError(f"lp_infonce: tau must be > 0, got {tau}")
        super().__init__(
            encoder, p=p, conditional=conditional, tau=tau, negatives=negatives, symmetric=symmetric, alpha=alpha
        )
        self.p, self.tau, self.negatives = float(p), float(tau), negatives
        self.symmetric, self.alpha = bool(symmetric), float(alpha)

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Lp InfoNCE of the two views' embeddings; logs mean positive and rolled-negative distances."""
        f1, f2 = check_two_views(embeddings)
        if self.negatives == "rolled":
            loss = lp_infonce_rolled(f1, f2, self.p, self.tau, self.alpha)
        else:
            loss = lp_infonce_batch(f1, f2, self.p, self.tau, self.symmetric)
        with torch.no_grad():
            pos = lp_pow(f1, f2, self.p).mean()
            neg = lp_pow(f1, torch.roll(f2, 1, dims=0), self.p).mean()
        return {"loss": loss, "pos_dist": pos, "neg_dist": neg}
