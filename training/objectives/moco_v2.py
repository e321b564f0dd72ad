"""MoCo v2: contrast queries with a momentum encoder's keys and a queue of past keys as negatives."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ident3d.training.distributed import gather_no_grad
from ident3d.training.hparams import Count, Positive, Unit
from ident3d.training.objective_parts.momentum import MomentumObjective
from ident3d.training.registry import OBJECTIVES


def moco_loss(q: torch.Tensor, k: torch.Tensor, queue: torch.Tensor, tau: float) -> torch.Tensor:
    """Cross-entropy of [q.k_pos, q.queue^T] / tau with the positive at index 0 (q, k, queue l2-normalised)."""
    pos = (q * k).sum(dim=1, keepdim=True)
    neg = q @ queue.to(q.dtype).T
    logits = torch.cat([pos, neg], dim=1) / tau
    return F.cross_entropy(logits, torch.zeros(q.shape[0], dtype=torch.long, device=q.device))


@OBJECTIVES.register("moco_v2")
class MoCoV2(MomentumObjective):
    """MoCo v2: momentum key encoder (EMA 0.99 -> 0.999, cosine) and a queue of negative keys, symmetrised.

    Hyperparameters:
        tau: temperature (default 0.2).
        queue_size: number of negative keys kept (default 4096); initialised random on the unit sphere.
        momentum_start / momentum_end: EMA momentum of the key encoder at step 0 / at the last step,
            cosine schedule in between (defaults 0.99 / 0.999).
    Both views' keys (2B per step) are enqueued in ``after_step``, after the EMA update. No shuffled
    BatchNorm.

    Under DDP the keys are gathered from all ranks before they are enqueued (all view-1 keys of the global
    batch in rank order, then all view-2 keys), so every rank's queue is identical and equal to the queue a
    single process with the global batch would hold. The loss of each rank is the mean over its local
    queries against its local keys and that shared queue: the per-sample terms do not involve other samples
    of the batch, so DDP's averaging of the gradients (and the mean of the ranks' losses) gives exactly the
    single-process loss and gradient. BatchNorm in the encoders needs SyncBatchNorm for the same (the trainer
    converts on CUDA).
    """

    ema_name = "key_encoder"

    def __init__(
        self,
        encoder: nn.Module,
        *,
        tau: Positive = 0.2,
        queue_size: Count = 4096,
        momentum_start: Unit = 0.99,
        momentum_end: Unit = 0.999,
    ):
        super().__init__(encoder)
        self.tau = float(tau)
        self.init_momentum(encoder, momentum_start, momentum_end)
        param = next(encoder.parameters(), None)
        like = {} if param is None else {"device": param.device, "dtype": param.dtype}
        queue = torch.randn(int(queue_size), int(encoder.out_dim), **like)
        self.register_buffer("queue", F.normalize(queue, dim=1))
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        self._pending_keys: torch.Tensor | None = None

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """Symmetric MoCo loss (mean of view1->key2 and view2->key1); keeps the keys for ``after_step``."""
        if len(views) != 2:
            raise ValueError(f"moco_v2 expects 2 views, got {len(views)}")
        q1, q2 = (F.normalize(self.encoder(v), dim=1) for v in views)
        with torch.no_grad():
            k1, k2 = (F.normalize(self.key_encoder(v), dim=1) for v in views)
        loss = 0.5 * (moco_loss(q1, k2, self.queue, self.tau) + moco_loss(q2, k1, self.queue, self.tau))
        if self.training:  # the global batch's keys, [all k1 ; all k2], identical on every rank
            width = k1.shape[1]
            g1, g2 = gather_no_grad(torch.cat([k1, k2], dim=1).detach()).split(width, dim=1)
            self._pending_keys = torch.cat([g1, g2])
        pos_sim = 0.5 * ((q1 * k2).sum(1).mean() + (q2 * k1).sum(1).mean())
        return {"loss": loss, "pos_sim": pos_sim.detach()}

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Write keys into the ring buffer at ``queue_ptr`` (wrapping around), oldest keys overwritten."""
        size = self.queue.shape[0]
        keys = keys[-size:].to(self.queue.dtype)
        idx = (self.queue_ptr + torch.arange(keys.shape[0], device=self.queue.device)) % size
        self.queue[idx] = keys
        self.queue_ptr.copy_((self.queue_ptr + keys.shape[0]) % size)

    @torch.no_grad()
    def after_step(self, step: int, total_steps: int) -> None:
        """EMA-update the key encoder on the cosine schedule, then enqueue the last step's keys."""
        super().after_step(step, total_steps)
        if self._pending_keys is not None:
            self.enqueue(self._pending_keys)
            self._pending_keys = None
