"""Contrastive losses of paired encodings of two modalities (image i and caption i of a batch are a pair)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def two_modality_infonce(z1: torch.Tensor, z2: torch.Tensor, tau: float) -> torch.Tensor:
    """Daunhawer et al.'s InfoNCE of (B, D) encodings z1, z2: cross-entropy over all 2B encodings.

    Each of the 2B encodings is an anchor; its logits are the cosine similarities / tau to the 2B - 1 others (the B
    of the other modality and the B - 1 others of its own), its pair's the target; the loss is the mean over the 2B
    anchors. The reference averages its ``infonce_loss(z1, z2)`` and ``infonce_loss(z2, z1)``: each is this mean
    over the same 2B rows in another order, so the average is this one value.
    """
    b = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    logits = (z @ z.T / tau).fill_diagonal_(float("-inf"))
    targets = torch.cat([torch.arange(b, 2 * b), torch.arange(0, b)]).to(z.device)
    return F.cross_entropy(logits, targets)


def clip_loss(z1: torch.Tensor, z2: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """CLIP's symmetric cross-entropy of the (B, B) logits ``scale`` x cos(z1_i, z2_j): pair i is the target of row i
    (z1 -> z2) and of column i (z2 -> z1); the two directions' means are averaged."""
    logits = scale * F.normalize(z1, dim=1) @ F.normalize(z2, dim=1).T
    targets = torch.arange(z1.shape[0], device=z1.device)
    return 0.5 * (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets))


def pair_similarity(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    """The mean cosine similarity of the B pairs (z1_i, z2_i)."""
    return F.cosine_similarity(z1, z2, dim=1).mean()
