"""Paper 005's multimodal contrastive objective (Daunhawer et al. 2023, numerical simulation): one encoder per
modality, trained with the cl-ica Lp InfoNCE of the paper's code, each modality's negatives a fresh draw of that
modality, symmetrised over the two modalities.

With h1 = g1(x1), h2 = g2(x2) of B pairs and n1 = g1(x1'), n2 = g2(x2') of B fresh pairs, one direction is

    L(a, b, n) = mean_i 2 [ alpha d(a_i, b_i) / tau + (1 - alpha) logmeanexp([-d(a_i, n_1), ..., -d(a_i, n_B),
                                                                            -d(a_i, b_i)] / tau) ]

with d = ||.||_p^p (the mean over the B negatives and the positive: the paper's code's default, not SimCLR's sum),
and the loss is (L(h1, h2, n1) + L(h2, h1, n2)) / 2. The negatives of an anchor of modality k are encodings of
modality k only.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from ident3d.training.distributed import gather_views
from ident3d.training.hparams import Positive, Unit
from ident3d.training.losses.functional import lp_pow, lp_pow_matrix, row_logsumexp
from ident3d.training.objective_parts.base import Objective
from ident3d.training.registry import OBJECTIVES


def one_direction(anchor: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor, p: float, tau: float,
                  alpha: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """L(anchor, positive, negatives) of the module docstring; also the mean positive and negative distances."""
    pos = lp_pow(anchor, positive, p)
    neg = lp_pow_matrix(anchor, negatives, p)
    logits = torch.cat([-neg, -pos.unsqueeze(1)], dim=1) / tau
    second = row_logsumexp(logits) - math.log(logits.shape[1])
    return (2.0 * (alpha * pos / tau + (1.0 - alpha) * second)).mean(), pos.mean(), neg.mean()


def multimodal_lp_infonce(h1: torch.Tensor, h2: torch.Tensor, n1: torch.Tensor, n2: torch.Tensor, p: float = 2.0,
                          tau: float = 1.0, alpha: float = 0.5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(L(h1, h2, n1) + L(h2, h1, n2)) / 2 (module docstring), with the mean positive and negative distances."""
    loss1, pos1, neg1 = one_direction(h1, h2, n1, p, tau, alpha)
    loss2, pos2, neg2 = one_direction(h2, h1, n2, p, tau, alpha)
    return 0.5 * (loss1 + loss2), 0.5 * (pos1 + pos2), 0.5 * (neg1 + neg2)


def fresh_copy(module: nn.Module) -> nn.Module:
    """A copy of ``module``'s architecture with newly initialised parameters (from torch's global generator)."""
    twin = copy.deepcopy(module)
    for m in twin.modules():
        if callable(getattr(m, "reset_parameters", None)):
            m.reset_parameters()
    return twin


@OBJECTIVES.register("multimodal_lp_infonce")
class MultimodalLpInfoNCE(Objective):
    """Paper 005's multimodal Lp InfoNCE: an encoder per modality, fresh negatives per modality, symmetrised.

    Views: [x1, x2, x1', x2'] (a pair of the two modalities and a fresh pair whose sides are the negatives), as the
    synthetic source ``multimodal`` makes them. The second encoder has the first one's architecture and its own
    weights; ``representation`` is modality 1's, ``modality_representation(x, k)`` modality k's.

    Hyperparameters:
        p: exponent of the distance ||.||_p^p (default 2, the paper's).
        tau: temperature (default 1.0).
        alpha: weight of the positive term (default 0.5).
        shared_encoder: one encoder for both modalities (default False; the paper's code's --shared-encoder).
    The loss is over the global batch: under DDP the four embeddings of all ranks are gathered first.
    """

    n_views = 4

    def __init__(self, encoder: nn.Module, *, p: Positive = 2.0, tau: Positive = 1.0, alpha: Unit = 0.5,
                 shared_encoder: bool = False):
        super().__init__(encoder)
        self.p, self.tau, self.alpha = p, tau, alpha
        self.encoder2 = None if shared_encoder else fresh_copy(encoder)

    def encoder_of(self, modality: int) -> nn.Module:
        """The encoder of modality ``modality`` (0: x1, 1: x2)."""
        return self.encoder if modality == 0 or self.encoder2 is None else self.encoder2

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """Encode [x1, x2, x1', x2'] with the encoder of each view's modality, then ``loss``."""
        g1, g2 = self.encoder_of(0), self.encoder_of(1)
        x1, x2, n1, n2 = views
        return self.loss([g1(x1), g2(x2), g1(n1), g2(n2)])

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """``multimodal_lp_infonce`` of [h1, h2, n1, n2] (gathered globally); logs the mean distances."""
        if len(embeddings) != 4:
            raise ValueError(f"multimodal_lp_infonce takes 4 embeddings (x1, x2, x1', x2'), got {len(embeddings)}")
        loss, pos, neg = multimodal_lp_infonce(*gather_views(*embeddings), p=self.p, tau=self.tau, alpha=self.alpha)
        return {"loss": loss, "pos_dist": pos.detach(), "neg_dist": neg.detach()}

    def modality_representation(self, x: torch.Tensor, modality: int) -> torch.Tensor:
        """What evaluation encodes for modality ``modality`` (0: x1, 1: x2): that modality's encoder's output."""
        return self.encoder_of(modality)(x)
