"""The cl-ica InfoNCE family (paper 001): similarity -||f1 - f2||_p^p / tau, negatives from the batch.

Two definitions of the negatives, both over the GLOBAL batch under DDP (embeddings are gathered across
ranks with ``functional.global_two_views`` before the loss, so every rank computes the loss a single
process with the whole batch would):

* ``negatives="batch"``: cross-entropy over the B x B matrix of similarities between the two views.
* ``negatives="rolled"``: paper 001's own loss, whose negatives are the batch of first views rolled by one,
  compared with every anchor (a B x B matrix as well).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ident3d.training.hparams import Positive, Unit
from ident3d.training.losses.functional import global_two_views, lp_pow, lp_pow_matrix, row_logsumexp
from ident3d.training.objective_parts.base import Objective
from ident3d.training.registry import OBJECTIVES

CONDITIONAL_P = {"normal": 2, "laplace": 1}


def off_diagonal_mean(m: torch.Tensor) -> torch.Tensor:
    """Mean of the off-diagonal entries of a square (B, B) matrix (B >= 2)."""
    b = m.shape[0]
    return (m.sum() - torch.diagonal(m).sum()) / (b * (b - 1))


def lp_infonce_batch(
    f1: torch.Tensor, f2: torch.Tensor, p: float, tau: float, symmetric: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cross-entropy over the (B, B) logits l_ij = -||f1_i - f2_j||_p^p / tau with the diagonal as positives.

        L_12 = (1/B) sum_i [ -l_ii + log sum_j exp(l_ij) ]      (row i: anchor f1_i, candidates f2_1..f2_B)
        L_21 = (1/B) sum_j [ -l_jj + log sum_i exp(l_ij) ]      (column j: anchor f2_j, candidates f1_1..f1_B)
        loss = (L_12 + L_21) / 2 if ``symmetric`` else L_12

    Returns (loss, mean positive distance ||f1_i - f2_i||_p^p, mean distance of the off-diagonal pairs).
    """
    dist = lp_pow_matrix(f1, f2, p)
    # exact positive distances on the diagonal (the p = 2 expansion loses precision for close pairs)
    pos = lp_pow(f1, f2, p)
    dist = torch.diagonal_scatter(dist, pos)
    logits = -dist / tau
    targets = torch.arange(f1.shape[0], device=f1.device)
    loss = F.cross_entropy(logits, targets)
    if symmetric:
        loss = 0.5 * (loss + F.cross_entropy(logits.T, targets))
    return loss, pos.mean(), off_diagonal_mean(dist)


def lp_infonce_rolled(
    f1: torch.Tensor, f2: torch.Tensor, p: float, tau: float, alpha: float = 0.5, simclr_compat: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Paper 001's loss: the first views rolled by one are the negatives of every anchor (a B x B matrix).

    With f3 = roll(f1, 1) along the batch (f3_k = f1_{k-1}), pos_i = ||f1_i - f2_i||_p^p and
    neg_ik = ||f1_i - f3_k||_p^p for ALL k (so row i holds f1_i's distance to itself, 0, at k = i + 1):

        simclr_compat:      loss = mean_i 2 [ a pos_i / tau + (1 - a) logsumexp([-neg_i1..-neg_iB, -pos_i] / tau) ]
        not simclr_compat:  loss = mean_i 2 [ a pos_i / tau + (1 - a) logmeanexp_k(-neg_ik / tau) ]

    with a = ``alpha`` (0.5 in the paper, whose experiments all use the SimCLR-compatible form: then each
    anchor's term is the cross-entropy of its positive among the B + 1 candidates). The logmeanexp form has
    no positive in the normaliser and averages over the B negatives.

    Returns (loss, mean pos_i, mean distance between different anchors ||f1_i - f1_j||_p^p, i != j).
    """
    b = f1.shape[0]
    f3 = torch.roll(f1, shifts=1, dims=0)
    pos = lp_pow(f1, f2, p)
    neg = lp_pow_matrix(f1, f3, p)
    if simclr_compat:
        second = row_logsumexp(torch.cat([-neg, -pos.unsqueeze(1)], dim=1) / tau)
    else:
        second = row_logsumexp(-neg / tau) - math.log(b)
    loss = (2.0 * (alpha * pos / tau + (1.0 - alpha) * second)).mean()
    with torch.no_grad():  # undo the roll: column k of neg is anchor k - 1, so roll back to put self on the diagonal
        between = off_diagonal_mean(torch.roll(neg, shifts=-1, dims=1))
    return loss, pos.mean(), between


@OBJECTIVES.register("lp_infonce")
class LpInfoNCE(Objective):
    """cl-ica InfoNCE with similarity -||f1 - f2||_p^p / tau (paper 001); batch or rolled negatives.

    Hyperparameters:
        p: exponent of the distance ||.||_p^p, 1, 2 or 3 (default: set by ``conditional``).
        conditional: assumed positive-pair conditional, "normal" (p = 2, default) or "laplace" (p = 1).
        tau: temperature (default 1.0).
        negatives: "batch" (default; cross-entropy over the B x B matrix -||f1_i - f2_j||_p^p / tau with the
            diagonal as positives, see ``lp_infonce_batch``) or "rolled" (paper 001's loss: every anchor f1_i
            against all of roll(f1, 1), see ``lp_infonce_rolled``).
        symmetric: for "batch", average the f1 -> f2 and f2 -> f1 directions (default True).
        alpha: weight a of the positive term in the "rolled" form (default 0.5).
        simclr_compat: for "rolled", put the positive inside the logsumexp (default True, the paper's setting
            for all its experiments); False uses logmeanexp over the B negatives only.
    The loss is over the global batch: under DDP the embeddings of all ranks are gathered first.
    Output constraints (box / sphere) belong to the encoder.
    """

    def __init__(
        self,
        encoder: nn.Module,
        *,
        p: Positive | None = None,
        conditional: Literal["normal", "laplace"] = "normal",
        tau: Positive = 1.0,
        negatives: Literal["batch", "rolled"] = "batch",
        symmetric: bool = True,
        alpha: Unit = 0.5,
        simclr_compat: bool = True,
    ):
        if p is None:
            p = CONDITIONAL_P[conditional]
        super().__init__(encoder)
        self.p, self.tau, self.negatives = float(p), float(tau), negatives
        self.symmetric, self.alpha, self.simclr_compat = bool(symmetric), float(alpha), bool(simclr_compat)

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Lp InfoNCE of the two views' (globally gathered) embeddings; logs mean positive / negative distances."""
        f1, f2 = global_two_views(embeddings)
        if self.negatives == "rolled":
            loss, pos, neg = lp_infonce_rolled(f1, f2, self.p, self.tau, self.alpha, self.simclr_compat)
        else:
            loss, pos, neg = lp_infonce_batch(f1, f2, self.p, self.tau, self.symmetric)
        return {"loss": loss, "pos_dist": pos.detach(), "neg_dist": neg.detach()}
