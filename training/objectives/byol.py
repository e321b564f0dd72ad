"""BYOL: predict an EMA target encoder's embedding of the other view; no negatives."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ident3d.training.hparams import Count, Unit
from ident3d.training.objective_parts.momentum import MomentumObjective
from ident3d.training.registry import OBJECTIVES


def byol_loss(p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """mean over the batch of 2 - 2 cos(p_i, z_i); z is treated as a constant (stop-gradient)."""
    return (2.0 - 2.0 * F.cosine_similarity(p, z.detach(), dim=1)).mean()


def make_predictor(dim: int, hidden: int) -> nn.Sequential:
    """BYOL's predictor MLP: Linear(dim, hidden) -> BatchNorm -> ReLU -> Linear(hidden, dim)."""
    return nn.Sequential(nn.Linear(dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True), nn.Linear(hidden, dim))


@OBJECTIVES.register("byol")
class BYOL(MomentumObjective):
    """BYOL: 2 - 2 cos(predictor(online(x1)), stopgrad(target(x2))), symmetrised; target EMA 0.99 -> 1.

    Hyperparameters:
        pred_hidden: hidden width of the predictor MLP (default 4 * encoder.out_dim).
        momentum_start / momentum_end: EMA momentum of the target encoder at step 0 / at the last step,
            cosine schedule in between (defaults 0.99 / 1.0).
    The loss is the sum of both directions (each a batch mean), so it lies in [0, 8].

    Under DDP nothing is gathered: each sample's term involves no other sample, so DDP's gradient averaging
    already gives the global-batch gradient, EXCEPT through the BatchNorm in the predictor (and any in the
    encoder), whose batch statistics are per rank. The trainer converts BatchNorm to SyncBatchNorm under DDP
    on CUDA (exact global statistics); on CPU/gloo torch has no SyncBatchNorm, so there the statistics stay
    per rank (a different, but still valid, loss than a single process with the global batch).
    """

    ema_name = "target_encoder"

    def __init__(
        self,
        encoder: nn.Module,
        *,
        pred_hidden: Count | None = None,
        momentum_start: Unit = 0.99,
        momentum_end: Unit = 1.0,
    ):
        dim = int(encoder.out_dim)
        hidden = 4 * dim if pred_hidden is None else int(pred_hidden)
        super().__init__(encoder)
        self.init_momentum(encoder, momentum_start, momentum_end)
        self.predictor = make_predictor(dim, hidden)
        param = next(encoder.parameters(), None)
        if param is not None:
            self.predictor.to(device=param.device, dtype=param.dtype)

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """Sum over both directions of the prediction loss; logs the mean cosine similarity."""
        if len(views) != 2:
            raise ValueError(f"byol expects 2 views, got {len(views)}")
        x1, x2 = views
        # no cross-sample terms besides BatchNorm (predictor, encoder): nothing to gather under DDP
        p1, p2 = self.predictor(self.encoder(x1)), self.predictor(self.encoder(x2))
        with torch.no_grad():
            t1, t2 = self.target_encoder(x1), self.target_encoder(x2)
        l12, l21 = byol_loss(p1, t2), byol_loss(p2, t1)
        cos = 1.0 - 0.25 * (l12 + l21)
        return {"loss": l12 + l21, "pos_sim": cos.detach()}
