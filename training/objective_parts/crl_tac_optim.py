"""CRL-TAC's channel on its own optimiser (a lever of paper 002's open choices: the paper names no optimiser or
rate for P(T|X)). The trainer builds one Adam over ``Objective.param_groups()`` at the shared learning rate; a
channel with its own optimiser is left out of those groups and stepped here, by the objective's ``after_step``,
which the trainer calls once per step after every phase (the channel phase is the last). Its state (Adam's
moments) is the module's extra state, so it is in the checkpoint's model and a resumed run continues exactly.

The rate is constant: the trainer's schedule (warm-up, cosine) is not applied to it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

CHANNEL_OPTIMIZERS = ("adam", "sgd")


class OwnOptimiser(nn.Module):
    """Adam (torch's defaults but the rate) or plain SGD (p <- p - lr * grad: no momentum, no weight decay) over
    ``params``; ``step`` moves them by the gradients the last backward left (none: nothing moves) and clears them."""

    def __init__(self, params: Iterable[nn.Parameter], kind: str, lr: float):
        super().__init__()
        if kind not in CHANNEL_OPTIMIZERS:
            raise ValueError(f"unknown channel optimiser {kind!r}; choose one of {', '.join(CHANNEL_OPTIMIZERS)}")
        self.kind, self.lr = kind, float(lr)
        self.params = list(params)  # a plain list: the parameters stay registered only where they live
        make = torch.optim.Adam if kind == "adam" else torch.optim.SGD
        self.optimizer = make(self.params, lr=self.lr)

    @torch.no_grad()
    def step(self) -> None:
        """One step on the gradients present, then clear them (so no other optimiser or phase sees them)."""
        if any(p.grad is not None for p in self.params):
            self.optimizer.step()
        for p in self.params:
            p.grad = None

    def get_extra_state(self) -> Any:
        return self.optimizer.state_dict()

    def set_extra_state(self, state: Any) -> None:
        self.optimizer.load_state_dict(state)
