"""The learning-rate schedules by name: a pure function of the step (a resumed run continues it), below the trainer
and the config checks that both name them."""

from __future__ import annotations

import math

from ident3d.training.config import SCHEDULES  # noqa: F401 - the names, owned by TrainConfig's declaration

STEP_DROP_AT = 50 / 80  # "step": lr x 0.1 for the last 30 of 80 epochs, paper 003's GIN schedule


def lr_factor(step: int, steps: int, warmup: int = 0, schedule: str = "constant") -> float:
    """The multiplier of the base lr at 0-based ``step``: linear warm-up over ``warmup`` steps, then constant,
    a cosine from 1 down to 0 at the last step, or "step" (x 0.1 from 5/8 of the steps on, paper 003). A pure
    function of the step, so a resumed run continues it."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    if schedule == "step":
        return 0.1 if step >= STEP_DROP_AT * steps else 1.0
    span = max(steps - warmup, 1)
    return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / span))
