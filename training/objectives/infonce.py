"""SimCLR's NT-Xent (InfoNCE with cosine similarity over 2B views), as used for Causal3DIdent (paper 000)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ident3d.training.hparams import Positive
from ident3d.training.losses.functional import global_two_views
from ident3d.training.objective_parts.base import Objective
from ident3d.training.registry import OBJECTIVES


def nt_xent(za: torch.Tensor, zb: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    """NT-Xent over the 2B views (each anchor: its partner is the positive, the 2B-2 others negatives).

    Returns (loss averaged over the 2B anchors, mean cosine similarity of the positive pairs).
    """
    b = za.shape[0]
    z = F.normalize(torch.cat([za, zb]), dim=1)
    logits = (z @ z.T / tau).fill_diagonal_(float("-inf"))  # in place: no (2B, 2B) mask, nor a second copy
    targets = torch.cat([torch.arange(b, 2 * b), torch.arange(0, b)]).to(z.device)
    pos_sim = (z[:b] * z[b:]).sum(dim=1).mean()
    return F.cross_entropy(logits, targets), pos_sim


@OBJECTIVES.register("infonce")
class InfoNCE(Objective):
    """SimCLR NT-Xent: cosine similarity / tau, the 2B-2 other views are negatives (paper 000 setup).

    Hyperparameters:
        tau: temperature dividing the cosine similarities (default 1.0, paper 000's Causal3DIdent value;
            0.1-0.5 is common for natural images).
    Under DDP the negatives are the whole global batch: the embeddings of all ranks are gathered first.
    """

    def __init__(self, encoder: nn.Module, *, tau: Positive = 1.0):
        super().__init__(encoder)
        self.tau = float(tau)

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """NT-Xent of the two views' (globally gathered) embeddings; logs the positive pairs' cosine similarity."""
        za, zb = global_two_views(embeddings)
        loss, pos_sim = nt_xent(za, zb, self.tau)
        return {"loss": loss, "pos_sim": pos_sim.detach()}
