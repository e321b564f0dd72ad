"""A synthetic source of interventional transitions, so the temporal learners train with ``ident3d synthetic`` on the
trainer like every objective: a dynamic SCM's rollouts mixed into vectors (``ident3d.training.temporal.synthetic``),
split by sequence into training and held-out sequences."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
import torch

from ident3d.causal.errors import UserError
from ident3d.training.hparams import Count, Range
from ident3d.training.synthetic.base import SOURCES, VectorSource


@SOURCES.register("temporal_sequences")
class TemporalSequences(VectorSource):
    """Transitions (x_t, x_{t+1}, targets of step t+1) of ``sequences`` rollouts of ``length`` steps of the dynamic
    SCM ``scm``, mixed into ``obs_dim`` dimensions by a fixed invertible MLP (``layers`` deep, seeded ``mix_seed``).

    Views: [x_t, x_{t+1}, targets per causal variable] for ``citris_vae`` and ``ivae_temporal``, or with
    ``targets: false`` [x_t, x_{t+1}] for time-contrastive learning (``infonce``). ``shuffled_targets`` permutes the
    targets across steps (the control that breaks their link to what changed). Batch b draws transitions of the
    training sequences, a pure function of (seed, b); ``eval_set`` draws n frames (at most all there are, each once):
    seed 1 (evaluation's fit draw) from the training sequences, any other seed from the ``held_out`` sequences."""

    def __init__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu", *,
                 scm: str = "temporal_causal3dident", sequences: Count = 200, held_out: Count = 50,
                 length: Annotated[int, Range(ge=2)] = 20, obs_dim: Count = 20, layers: Count = 3,
                 mix_seed: Annotated[int, Range(ge=0)] = 1234, targets: bool = True, shuffled_targets: bool = False):
        super().__init__(batch_size, seed, device)
        from ident3d.causal.loading import load_dynamic_scm
        from ident3d.training.temporal.synthetic import synthetic_sequences

        model = load_dynamic_scm(scm)
        if obs_dim < len(model.names):
            raise UserError(f"obs_dim {obs_dim} is below the {len(model.names)} factors of {scm}; an injective mix "
                            "needs at least as many dimensions")
        data = synthetic_sequences(model, sequences, held_out, length, obs_dim=obs_dim, n_layers=layers, seed=seed,
                                   mix_seed=mix_seed)
        self.train = data.train.shuffled_targets(seed) if shuffled_targets else data.train
        self.held_out = data.test
        self.node_variable, self.variable_names = data.node_variable, data.variable_names
        self.n_views = 3 if targets else 2
        self.obs_dim = obs_dim
        self.latent_names, self.latent_groups = list(model.names), {}

    def batch(self, b: int) -> dict[str, torch.Tensor]:
        t = self.train.batch(self.seed, b, self.batch_size)
        views = (t.x_t, t.x_t1, t.targets)[:self.n_views]
        out = {f"x{i}": torch.from_numpy(v) for i, v in enumerate(views)}
        return {k: v.to(self.device) for k, v in {**out, "latents": torch.from_numpy(t.latents_t)}.items()}

    def eval_set(self, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        x, z = (self.train if seed == 1 else self.held_out).frames()
        order = np.random.default_rng([self.seed, seed]).permutation(len(x))[:n]  # at most every frame once
        return torch.from_numpy(x[order]).to(self.device), torch.from_numpy(z[order]).to(self.device)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "variables": self.variable_names, "n_views": self.n_views,
                "train_transitions": len(self.train), "held_out_transitions": len(self.held_out)}
