"""Synthetic observations for the temporal learners: rollout latents of a dynamic SCM, standardised and mixed into
``obs_dim`` dimensions by a fixed random invertible MLP (not rendered images).

Mixing: an injective linear lift N -> D (orthonormal columns), then ``n_layers`` of (random orthogonal D x D map,
leaky ReLU with slope 0.2), each invertible, so the map is injective on R^N. Angles enter as their [-1, 1] values
(the wrap-around at +-1 is a jump in x as in the latent) and the shape class as its index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ident3d.causal.dynamic import DynamicSCM
from ident3d.training.temporal.transitions import Transitions
from ident3d.training.temporal.variables import causal_variables, node_variable, variable_targets

SLOPE = 0.2


def _orthogonal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """A (rows, cols) matrix with orthonormal columns (rows >= cols), from the QR of a Gaussian matrix."""
    q, r = np.linalg.qr(rng.normal(size=(rows, cols)))
    return q * np.sign(np.diag(r))


def mixing_weights(in_dim: int, out_dim: int, n_layers: int, seed: int) -> list[np.ndarray]:
    """The mixing MLP's matrices: the lift (out_dim, in_dim) then ``n_layers`` orthogonal (out_dim, out_dim)."""
    if out_dim < in_dim:
        raise ValueError(f"an injective mix needs out_dim >= in_dim, got {out_dim} < {in_dim}")
    rng = np.random.default_rng(seed)
    return [_orthogonal(rng, out_dim, in_dim)] + [_orthogonal(rng, out_dim, out_dim) for _ in range(n_layers)]


def mix(latents: np.ndarray, weights: list[np.ndarray]) -> np.ndarray:
    """Apply the mixing MLP to (..., N) latents: lift, then (orthogonal map, leaky ReLU) per layer."""
    h = latents @ weights[0].T
    for w in weights[1:]:
        h = h @ w.T
        h = np.where(h > 0, h, SLOPE * h)
    return h


@dataclass(frozen=True)
class SyntheticSequences:
    """Train and test transitions of one synthetic setting, and the variable index of each factor (node)."""

    train: Transitions
    test: Transitions
    node_variable: np.ndarray  # (N,)
    variable_names: list[str]


def synthetic_sequences(model: DynamicSCM, n_train: int, n_test: int, length: int, obs_dim: int = 20,
                        n_layers: int = 3, seed: int = 0, mix_seed: int = 1234) -> SyntheticSequences:
    """Roll out ``n_train + n_test`` sequences (seed ``seed``), mix their standardised latents (fixed mix
    ``mix_seed``), standardise the observations with the train split's statistics and split by sequence."""
    roll = model.rollout(n_train + n_test, length, seed=seed)
    lat = roll.latents.astype(np.float64)
    flat = lat[:n_train].reshape(-1, lat.shape[-1])
    z = (lat - flat.mean(0)) / flat.std(0)
    x = mix(z, mixing_weights(lat.shape[-1], obs_dim, n_layers, mix_seed))
    xf = x[:n_train].reshape(-1, obs_dim)
    x = ((x - xf.mean(0)) / xf.std(0)).astype(np.float32)
    variables = causal_variables(model)
    targets = variable_targets(roll.targets, variables)
    data = Transitions(x, targets, roll.latents)
    return SyntheticSequences(data.sequences(np.arange(n_train)), data.sequences(np.arange(n_train, n_train + n_test)),
                              node_variable(variables, lat.shape[-1]), list(variables))
