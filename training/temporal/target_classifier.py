"""CITRIS's target classifier: the auxiliary loss that pushes each latent group psi_k to carry the information that
variable k was intervened on, and no other variable's, which is what makes the learned assignment disentangle
(Lippe et al., ICML 2022, Sec. 4.2 and App. C; the facts below are read from phlippe/CITRIS, models/shared).

A network c reads [z^t, z^{t+1} * m_s, m_s] for one set s of latent dimensions (mask m_s) and predicts every
variable's target I^{t+1}_k (logits, K). The sets are the K variable groups and psi_0 under one hard Gumbel-softmax
draw of the assignment, plus the set of all dimensions: S = K + 2. Two losses:
- the classifier's own, on detached latents: S * mean over (sample, set, variable) of BCE(c(input), I_k);
- the latents', through a frozen exponential-moving-average copy c' of the classifier (momentum 0.9) so that only
  the latents and the assignment move: S * mean of w * BCE(c'(input), label), where for a variable's own group
  (k = s) and for the all-dimensions set the label is the true I_k with weight w = K, and otherwise the label is
  the probability the data gives I_k given what set s is allowed to know (p(I_k = 1 | I_s) for a variable group,
  p(I_k = 1) for psi_0) with w = 1: a group should predict its own target and nothing more.
The target statistics are exact running counts over the training batches seen (theirs: a running average of batch
means, the same numbers). Gradients reach the assignment through the straight-through Gumbel sample."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

EMA_MOMENTUM = 0.9


def set_masks(assignment: torch.Tensor) -> torch.Tensor:
    """(B, S = G + 1, M) masks of the sets of dimensions: one per group of a (B, M, G) one-hot assignment (G = K + 1
    groups, psi_0 last), then all dimensions."""
    groups = assignment.transpose(1, 2)
    return torch.cat([groups, torch.ones_like(groups[:, :1])], dim=1)


def classifier_inputs(z_t: torch.Tensor, z_t1: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """(B, S, 3M) inputs [z^t, z^{t+1} * m_s, m_s] of every set s."""
    z_t = z_t[:, None].expand(-1, masks.shape[1], -1)
    return torch.cat([z_t, z_t1[:, None] * masks, masks], dim=-1)


def latent_labels(targets: torch.Tensor, cond: torch.Tensor, marginal: torch.Tensor) -> tuple[torch.Tensor,
                                                                                                 torch.Tensor]:
    """(labels, weights), each (B, K + 2, K), of the latents' loss: true targets (weight K) for a variable's own
    group and for the all-dimensions set; else p(I_k = 1 | I_s = observed) (``cond`` (K, K, 2): [s, k, I_s]) for
    variable groups and p(I_k = 1) (``marginal`` (K,)) for psi_0, weight 1."""
    b, k = targets.shape
    dev = targets.device
    own = torch.cat([torch.eye(k, dtype=torch.bool, device=dev), torch.zeros(1, k, dtype=torch.bool, device=dev),
                     torch.ones(1, k, dtype=torch.bool, device=dev)])
    idx = torch.arange(k, device=dev)
    given = cond[idx[None, :, None], idx[None, None, :], targets.long()[:, :, None]]  # (B, s, k): I_s per sample
    other = torch.cat([given, marginal.expand(b, 2, k)], dim=1)
    labels = torch.where(own[None], targets[:, None, :].expand(b, k + 2, k), other)
    return labels, torch.where(own, float(k), 1.0).expand(b, k + 2, k)


class TargetClassifier(nn.Module):
    """Predicts I^{t+1} from (z^t, a masked z^{t+1}); gives the classifier's loss and the latents' loss."""

    def __init__(self, n_latents: int, n_vars: int, hidden: int = 64):
        super().__init__()
        self.n_vars = n_vars
        self.net = nn.Sequential(nn.Linear(3 * n_latents, hidden), nn.LayerNorm(hidden), nn.SiLU(),
                                 nn.Linear(hidden, n_vars))
        nn.init.zeros_(self.net[-1].weight)
        self.ema = copy.deepcopy(self.net).requires_grad_(False)
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("hits", torch.zeros(n_vars))
        self.register_buffer("joint", torch.zeros(n_vars, n_vars))

    @torch.no_grad()
    def observe(self, targets: torch.Tensor) -> None:
        """Add a batch of targets to the counts, and move the frozen copy towards the classifier."""
        self.count += targets.shape[0]
        self.hits += targets.sum(0)
        self.joint += targets.T @ targets
        for p_ema, p in zip(self.ema.parameters(), self.net.parameters(), strict=True):
            p_ema.mul_(EMA_MOMENTUM).add_(p * (1 - EMA_MOMENTUM))

    def statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(cond (K, K, 2): p(I_k = 1 | I_s = 0 / 1) at [s, k], marginal (K,): p(I_k = 1)) from the counts; 0.5 before
        any count."""
        if self.count == 0:
            return self.joint.new_full((self.n_vars, self.n_vars, 2), 0.5), self.hits.new_full((self.n_vars,), 0.5)
        hits, joint, n = self.hits, self.joint, self.count
        given_one = joint / hits[:, None].clamp_min(1)
        given_zero = (hits[None, :] - joint) / (n - hits)[:, None].clamp_min(1)
        return torch.stack([given_zero, given_one], dim=-1), hits / n

    def forward(self, z_t: torch.Tensor, z_t1: torch.Tensor, targets: torch.Tensor,
                assignment: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(classifier loss, latents' loss) for samples z^t, z^{t+1} (B, M), targets (B, K) and a hard one-hot
        assignment (B, M, K + 1) (straight-through, so the latents' loss reaches the assignment's logits)."""
        if self.training:
            self.observe(targets)
        n_sets = self.n_vars + 2
        masks = set_masks(assignment)
        exp_targets = targets[:, None, :].expand(-1, n_sets, -1)
        model_in = classifier_inputs(z_t.detach(), z_t1.detach(), masks.detach())
        loss_model = n_sets * F.binary_cross_entropy_with_logits(self.net(model_in), exp_targets)
        labels, weights = latent_labels(targets, *self.statistics())
        bce = F.binary_cross_entropy_with_logits(self.ema(classifier_inputs(z_t, z_t1, masks)), labels,
                                                 reduction="none")
        return loss_model, n_sets * (weights * bce).mean()
