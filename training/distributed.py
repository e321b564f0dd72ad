"""Global-batch helpers for DDP: gather embeddings across ranks with gradients, so every rank computes the
loss of the whole (global) batch, exactly as one process with the whole batch would.

Why this gives the single-process gradient: every rank computes the same global loss L from the gathered
embeddings. The backward of the autograd all_gather sums the gradients that all ranks send back to each
slice, so rank r receives world * dL/dz_r for its local embeddings z_r (the same L on every rank, summed
``world`` times). DDP then averages the parameter gradients over the ``world`` ranks:
(1/world) * sum_r world * dL/dz_r * dz_r/dtheta = dL/dtheta, the single-process gradient.

Outside ``torch.distributed`` (or with one process) every function here is the identity.
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist


def world_size() -> int:
    """Number of processes in the default group, 1 when torch.distributed is not initialised."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    """This process's rank in the default group, 0 when torch.distributed is not initialised."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def gather(z: torch.Tensor) -> torch.Tensor:
    """Concatenate ``z`` (B_local, ...) of all ranks in rank order along dim 0, keeping gradients.

    Every rank must pass a tensor of the same shape. The identity when not distributed.
    """
    if world_size() == 1:
        return z
    from torch.distributed.nn.functional import all_gather

    # torch 2.x flags this autograd all_gather as deprecated in favour of the functional collectives, whose
    # backward needs reduce_scatter (not in gloo); this one works on gloo and NCCL alike, so silence the notice.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*all_gather is deprecated", category=FutureWarning)
        parts = all_gather(z.contiguous())
    return torch.cat(parts, dim=0)


def gather_views(*views: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``gather`` several (B_local, D_i) tensors with ONE collective (concatenated along dim 1, then split).

    One collective per step instead of one per view keeps the ranks' backward collectives trivially in
    the same order. The identity when not distributed.
    """
    if world_size() == 1:
        return views
    widths = [v.shape[1] for v in views]
    return tuple(gather(torch.cat(views, dim=1)).split(widths, dim=1))


@torch.no_grad()
def gather_no_grad(z: torch.Tensor) -> torch.Tensor:
    """``gather`` without autograd (e.g. MoCo's keys before they are enqueued)."""
    if world_size() == 1:
        return z
    parts = [torch.empty_like(z) for _ in range(world_size())]
    dist.all_gather(parts, z.contiguous())
    return torch.cat(parts, dim=0)


@torch.no_grad()
def mean_across_ranks(values: torch.Tensor) -> torch.Tensor:
    """Average a tensor over the ranks (for logging); the identity when not distributed."""
    if world_size() == 1:
        return values
    out = values.clone()
    dist.all_reduce(out)
    return out / world_size()
