"""A data source of transitions (x_t, x_{t+1}, I_{t+1}) from sequence arrays, independent of any store format.

Observations (S, T, ...) and intervention targets (S, T, K) (target k at step t: variable k was intervened on when
step t was drawn, so I_{t+1} belongs to the transition t -> t+1) become S * (T - 1) transitions; the factor latents
(S, T, N) ride along for evaluation only. A batch is a pure function of (seed, step): the same call gives the same
transitions in any process, whatever was drawn before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TransitionBatch:
    """One batch: observations at t and t+1 (B, ...), the targets of step t+1 (B, K) and the latents at t and t+1
    (B, N)."""

    x_t: np.ndarray
    x_t1: np.ndarray
    targets: np.ndarray
    latents_t1: np.ndarray
    latents_t: np.ndarray


@dataclass(frozen=True)
class Transitions:
    """Sequences of observations, targets and latents; a transition is the pair of steps (s, t) -> (s, t + 1)."""

    observations: np.ndarray  # (S, T, ...)
    targets: np.ndarray  # (S, T, K) bool or float, step t's targets
    latents: np.ndarray  # (S, T, N)

    def __post_init__(self) -> None:
        """Check the three arrays describe the same S sequences of T >= 2 steps."""
        s, t = self.observations.shape[:2]
        if t < 2:
            raise ValueError(f"transitions need sequences of at least 2 steps, got {t}")
        for name, arr in (("targets", self.targets), ("latents", self.latents)):
            if arr.ndim != 3 or arr.shape[:2] != (s, t):
                raise ValueError(f"{name} must be (S, T, K) with (S, T) = {(s, t)}, got {arr.shape}")

    def __len__(self) -> int:
        """Number of transitions, S * (T - 1)."""
        s, t = self.observations.shape[:2]
        return s * (t - 1)

    @property
    def n_targets(self) -> int:
        """K, the length of the intervention target vector."""
        return int(self.targets.shape[-1])

    def take(self, index: np.ndarray) -> TransitionBatch:
        """The transitions with flat indices ``index`` (sequence-major: s * (T - 1) + t)."""
        per = self.observations.shape[1] - 1
        s, t = np.divmod(np.asarray(index, dtype=np.int64), per)
        return TransitionBatch(self.observations[s, t].astype(np.float32),
                               self.observations[s, t + 1].astype(np.float32),
                               self.targets[s, t + 1].astype(np.float32), self.latents[s, t + 1].astype(np.float32),
                               self.latents[s, t].astype(np.float32))

    def batch(self, seed: int, step: int, batch_size: int) -> TransitionBatch:
        """Batch ``step`` of a run seeded ``seed``: ``batch_size`` transitions drawn with replacement, a pure
        function of (seed, step) so resumed or re-ordered runs see the same data."""
        rng = np.random.default_rng([seed, step])
        return self.take(rng.integers(0, len(self), size=batch_size))

    def frames(self) -> tuple[np.ndarray, np.ndarray]:
        """Every frame once, (S * T, ...) observations and (S * T, N) latents: what evaluation encodes."""
        s, t = self.observations.shape[:2]
        obs = self.observations.reshape(s * t, *self.observations.shape[2:]).astype(np.float32)
        return obs, self.latents.reshape(s * t, -1).astype(np.float32)

    def sequences(self, index: np.ndarray) -> Transitions:
        """The sequences ``index`` alone (for splitting by sequence, so no transition straddles two splits)."""
        return Transitions(self.observations[index], self.targets[index], self.latents[index])

    def shuffled_targets(self, seed: int) -> Transitions:
        """A control: the same data with target vectors permuted across all (sequence, step) pairs, which keeps
        their marginal but breaks their link to what changed in the observations."""
        s, t, k = self.targets.shape
        flat = self.targets.reshape(s * t, k)
        perm = np.random.default_rng(seed).permutation(s * t)
        return Transitions(self.observations, flat[perm].reshape(s, t, k), self.latents)
