"""The memory a model and one training step will hold, measured on PyTorch's ``meta`` device (shapes only, nothing
allocated) and held against the one memory bound (``ident3d.store.memory.check_fits``) before the real model is
built: sizes a user sets through ``--hp`` or ``--encoder-arg`` (Slot Attention's ``n_slots`` and ``slot_dim``, a
decoder's width) are refused in one line instead of growing past the machine's memory or raising an allocation
traceback (issue 42 §3).

The estimate: 16 bytes per parameter (the weights, their gradients and Adam's two moments) plus, where the
objective runs on meta tensors, 8 bytes per value every leaf module outputs in one step's forward pass on a batch of
views (the value kept for the backward pass and its gradient). An objective whose forward needs real values
(``.item()``, data-dependent shapes) is bounded by its parameters alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ident3d.store.memory import check_fits
from ident3d.training import rng_state

BYTES_PER_PARAMETER = 16  # float32 weights, gradients and Adam's exp_avg and exp_avg_sq
BYTES_PER_ACTIVATION = 8  # a float32 output kept for backward, and its gradient


def parameter_count(build: Callable[[], tuple[nn.Module, Any]]) -> tuple[nn.Module | None, int | None]:
    """The module ``build()`` makes (first of what it returns) on the meta device and its parameter count; (None,
    None) when it cannot be built there (its constructor needs real values, or its arguments are wrong): then the
    real build checks it."""
    try:
        with torch.device("meta"):
            module = build()[0]
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return None, None
    return module, sum(p.numel() for p in module.parameters())


PROBE_BATCH, PROBE_VIEWS = 16, 2  # the forward pass measured; its count is scaled to the step's batch and views


def step_activations(objective: nn.Module, views: int, batch: int, image_size: int) -> int:
    """Values every leaf module (one without children, so no value counts twice) of ``objective`` outputs in one
    forward pass on ``views`` views of (batch, 3, image_size, image_size): measured on meta tensors at no more than
    ``PROBE_BATCH`` x ``PROBE_VIEWS`` images and scaled linearly to the step's (a batch's activations grow with its
    images; a loss's B x B similarities, the one quadratic term, are small beside them); 0 when the forward pass
    cannot run on meta tensors."""
    total = 0

    def count(_module: nn.Module, _inputs: Any, output: Any) -> None:
        nonlocal total
        for out in output if isinstance(output, (tuple, list)) else [output]:
            if isinstance(out, torch.Tensor):
                total += out.numel()

    b, v = min(batch, PROBE_BATCH), min(views, PROBE_VIEWS)
    hooks = [m.register_forward_hook(count) for m in objective.modules() if next(m.children(), None) is None]
    try:
        with torch.device("meta"):  # what the forward pass draws is drawn on meta too
            objective([torch.empty(b, 3, image_size, image_size) for _ in range(v)], 0, 1)
    except Exception:  # noqa: BLE001 - any failure on meta tensors: no activation estimate, parameters only
        return 0
    finally:
        for hook in hooks:
            hook.remove()
    return total * batch * views // (b * v)


def check_model_memory(name: str, build: Callable[[], tuple[nn.Module, Any]], batch: int, image_size: int, views: int,
                       available: int | None = None) -> None:
    """Refuse a model whose parameters and one step's activations at ``batch`` exceed ``available`` memory (None:
    this machine's), naming the objective and what to lower; nothing is allocated, and no random stream moves (the
    real model built next gets the weights it got before this check existed)."""
    streams = rng_state.capture()
    try:
        objective, params = parameter_count(build)
        if objective is None or params is None:
            return
        acts = step_activations(objective, views, batch, image_size) if image_size else 0
    finally:
        rng_state.restore(streams)
    need = params * BYTES_PER_PARAMETER + acts * BYTES_PER_ACTIVATION
    what = f"objective {name} ({params:,} parameters" + (f", {acts:,} values a step at --batch-size {batch}"
                                                          if acts else "") + ") needs"
    check_fits(need, what, "lower the sizes given with --hp or --encoder-arg, or --batch-size", available)
