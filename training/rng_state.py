"""The global random streams a training step may draw from, captured into a checkpoint and restored on resume.

What the trainer draws on purpose comes from generators keyed by (seed, step) (batches, views); but models also
draw from torch's global generator (Slot Attention's initial slots, a VAE's reparameterisation noise, dropout), and
user code may use Python's ``random`` or NumPy's global generator. A resumed run continues exactly only when these
streams continue where the checkpoint left them, so every one is part of the checkpoint (issue 42 §0).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def capture() -> dict[str, Any]:
    """The state of every global random stream: torch's CPU generator, each CUDA device's, Python's and NumPy's."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate(),
                             "numpy": np.random.get_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore(state: dict[str, Any] | None) -> None:
    """Put the global random streams back as ``capture`` saw them (None: a checkpoint written before they were
    saved, which resumes with the streams as the run's start left them)."""
    if state is None:
        return
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)
