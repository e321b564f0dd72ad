"""AlignMaxEnt (paper 000): align positive pairs while maximising the entropy of the representation."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ident3d.training.hparams import Count, NonNegative, Positive
from ident3d.training.losses.functional import global_two_views, kl_entropy, uniformity
from ident3d.training.objective_parts.base import Objective
from ident3d.training.registry import OBJECTIVES


def align_maxent_kl(
    za: torch.Tensor, zb: torch.Tensor, lam: float = 1.0, k: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """E||g(x) - g(x~)||^2 - lam * H(g(x)) with g = sigmoid onto (0,1)^D and H the k-NN (KL) estimate.

    H is estimated per view (pooling both views would make each point's neighbour its own positive) and
    averaged. Returns (loss, alignment, entropy).
    """
    ga, gb = torch.sigmoid(za), torch.sigmoid(zb)
    align = (ga - gb).pow(2).sum(dim=1).mean()
    entropy = 0.5 * (kl_entropy(ga, k) + kl_entropy(gb, k))
    return align - lam * entropy, align, entropy


def align_uniform(
    za: torch.Tensor, zb: torch.Tensor, lam: float = 1.0, t: float = 2.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Wang-Isola surrogate on l2-normalised features: alignment + lam * uniformity (= alignment - lam * "entropy").

    The logged entropy is minus the uniformity, averaged over the two views. Returns (loss, alignment, entropy).
    """
    na, nb = F.normalize(za, dim=1), F.normalize(zb, dim=1)
    align = (na - nb).pow(2).sum(dim=1).mean()
    entropy = -0.5 * (uniformity(na, t) + uniformity(nb, t))
    return align - lam * entropy, align, entropy


@OBJECTIVES.register("align_maxent")
class AlignMaxEnt(Objective):
    """AlignMaxEnt (paper 000): mean squared positive-pair distance minus an entropy estimate of the codes.

    Hyperparameters:
        lam: weight lambda of the entropy term (default 1.0).
        entropy: "kl" (default; Kozachenko-Leonenko k-NN estimate of the entropy of sigmoid(z) on (0,1)^D,
            alignment also measured on sigmoid(z)) or "uniformity" (Wang-Isola surrogate
            log mean exp(-t ||z_i - z_j||^2) on l2-normalised z, alignment on the normalised z).
        k: neighbour order of the k-NN estimator (default 1; capped at B-1).
        t: uniformity scale (default 2.0).
    Under DDP both entropy estimates (neighbours, pairwise terms) are over the global batch (embeddings
    gathered across ranks first).
    """

    def __init__(self, encoder: nn.Module, *, lam: NonNegative = 1.0, entropy: Literal["kl", "uniformity"] = "kl",
                 k: Count = 1, t: Positive = 2.0):
        super().__init__(encoder)
        self.lam, self.entropy, self.k, self.t = float(lam), entropy, int(k), float(t)

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Alignment minus lam * entropy; logs both terms separately."""
        za, zb = global_two_views(embeddings)
        if self.entropy == "kl":
            loss, align, ent = align_maxent_kl(za, zb, self.lam, self.k)
        else:
            loss, align, ent = align_uniform(za, zb, self.lam, self.t)
        return {"loss": loss, "alignment": align.detach(), "entropy": ent.detach()}
