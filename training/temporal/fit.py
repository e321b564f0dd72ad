"""Training and encoding for the temporal learners: build one by name, fit it on transition batches that are a pure
function of (seed, step), and encode frames with its representation."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch
from torch import nn

from ident3d.training.encoders import build_encoder
from ident3d.training.temporal.citris_vae import CitrisVAE
from ident3d.training.temporal.ivae import TemporalIVAE
from ident3d.training.temporal.time_contrastive import TimeContrastive
from ident3d.training.temporal.transitions import Transitions


class TemporalLearner(Protocol):
    """What the loop and evaluation need of a learner."""

    def loss(self, x_t: torch.Tensor, x_t1: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]: ...

    def representation(self, x: torch.Tensor) -> torch.Tensor: ...

    def assignment(self) -> np.ndarray | None: ...


LEARNERS: dict[str, Callable[..., nn.Module]] = {
    "time_contrastive": lambda enc, n_vars, **hp: TimeContrastive(enc, **hp),
    "citris_vae": lambda enc, n_vars, **hp: CitrisVAE(enc, n_vars, **hp),
    "ivae": lambda enc, n_vars, **hp: TemporalIVAE(enc, n_vars, **hp),
}


def build_learner(name: str, obs_dim: int, n_vars: int, latent_dim: int, seed: int,
                  hidden: tuple[int, ...] = (128, 128), image_size: int = 0, **hparams: float) -> nn.Module:
    """Learner ``name`` with an MLP encoder (obs_dim -> hidden -> latent_dim), or with ``image_size`` > 0 the
    ``cnn`` image encoder (and, for the VAEs, its mirrored conv decoder); weights seeded by ``seed``."""
    if name not in LEARNERS:
        raise ValueError(f"unknown learner {name!r}; choose one of {', '.join(LEARNERS)}")
    torch.manual_seed(seed)
    if image_size:
        enc = build_encoder("cnn", out_dim=latent_dim, image_size=image_size)
    else:
        enc = build_encoder("mlp", out_dim=latent_dim, image_size=0, in_dim=obs_dim, hidden=list(hidden))
    return LEARNERS[name](enc, n_vars, **hparams)


@dataclass
class FitLog:
    """Per-step losses and the wall time of a fit."""

    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def fit(learner: nn.Module, data: Transitions, steps: int, batch_size: int = 256, lr: float = 1e-3,
        seed: int = 0, device: str = "cpu") -> FitLog:
    """Adam on ``steps`` batches ``data.batch(seed, step)`` on ``device`` (the learner moves there); the posterior
    noise is seeded by ``seed`` too."""
    torch.manual_seed(seed)
    learner.to(device)
    groups = learner.param_groups() if hasattr(learner, "param_groups") else [{"params": list(learner.parameters())}]
    opt = torch.optim.Adam([{**g, "lr": lr * g.get("lr_scale", 1.0)} for g in groups], lr=lr)
    log, start = FitLog(), time.perf_counter()
    learner.train()
    for step in range(steps):
        b = data.batch(seed, step, batch_size)
        out = learner.loss(*(torch.from_numpy(a).to(device) for a in (b.x_t, b.x_t1, b.targets)))
        opt.zero_grad(set_to_none=True)
        out["loss"].backward()
        opt.step()
        log.losses.append(float(out["loss"].detach()))
    log.seconds = time.perf_counter() - start
    return log


@torch.no_grad()
def encode(learner: nn.Module, x: np.ndarray, batch: int = 4096) -> np.ndarray:
    """The learner's representation of frames x (N, D), as a float64 array (N, M), computed where the learner is."""
    learner.eval()
    device = next(learner.parameters()).device
    out = [learner.representation(torch.from_numpy(x[i:i + batch]).to(device)).cpu() for i in range(0, len(x), batch)]
    return torch.cat(out).double().numpy()
