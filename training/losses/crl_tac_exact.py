"""Paper 002's objective (2) for CRL-TAC's channel phase evaluated over ALL |T| crops of every image of the batch
(the channel's expectations taken in closed form, not estimated from m sampled crops): a lever of the paper's open
choices (issue: CRL-TAC goes the wrong way with training), at the cost of encoding B |T| crops per channel step
(9,248 at B = 32 on the 289-crop grid) and a (B |T|)^2 similarity matrix, computed in row blocks that are
recomputed for the backward pass."""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

ROWS_PER_BLOCK = 2048  # anchors whose row of the (B |T|)^2 similarity matrix is held at once


def _log_denominator(rows: torch.Tensor, flat: torch.Tensor, p_flat: torch.Tensor, beta: float) -> torch.Tensor:
    """log sum_b p_b exp(beta <rows_a, flat_b>) for each anchor row a, shifted by the row's largest similarity so
    the exponentials stay in (0, 1]."""
    s = beta * rows @ flat.T
    top = s.max(dim=1, keepdim=True).values
    return torch.log((torch.exp(s - top) @ p_flat).clamp_min(torch.finfo(s.dtype).tiny)) + top[:, 0]


def all_crops_loss(z: torch.Tensor, log_p: torch.Tensor, beta: float, jensen: bool = False) -> torch.Tensor:
    """Minus objective (2) over every crop: z (B, T, D) unit-norm outputs of all T crops of B images (constant),
    log_p (B, T) log P(T|X) (the only input the gradient reaches). For anchor crop t of image i,
    pos_it = log sum_t' P_i(t') exp(beta <z_it, z_it'>) (``jensen``: sum_t' P_i(t') beta <z_it, z_it'>), the
    positive term's expectation over T' ~ P(T|x_i), t' = t included, and
    neg_it = log sum_j sum_t'' P_j(t'') exp(beta <z_it, z_jt''>), eq. (19)'s expectation over X' (the batch, x_i
    included) and T'' ~ P(T|X') times B; loss = sum_i sum_t P_i(t) (neg_it - pos_it) / B. With every crop encoded
    alike it is log B whatever P. Computed in float32 (mixed precision off)."""
    b, t, d = z.shape
    with torch.autocast(z.device.type, enabled=False):
        z = z.float()
        p = log_p.float().exp()
        within = beta * torch.bmm(z, z.transpose(1, 2))  # (B, T, T) similarities of crops of the same image
        if jensen:
            pos = (within * p.unsqueeze(1)).sum(dim=2)
        else:
            pos = torch.logsumexp(within + log_p.float().unsqueeze(1), dim=2)
        flat, p_flat = z.reshape(b * t, d), p.reshape(b * t)
        neg = torch.cat([checkpoint(_log_denominator, flat[i:i + ROWS_PER_BLOCK], flat, p_flat, beta,
                                    use_reentrant=False) for i in range(0, b * t, ROWS_PER_BLOCK)]).view(b, t)
        return (p * (neg - pos)).sum() / b
