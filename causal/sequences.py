"""Rolled-out latent sequences of a dynamic SCM: values and intervention targets per (sequence, step, node)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Rollout:
    """``latents`` (S x T x N float32, categorical nodes as their category index), ``targets`` (S x T x N bool:
    the node was intervened on at that step; step 0 never is), node ``names`` and the global sequence ids
    ``index`` (sequence i depends only on (seed, i), so ids say which draws these are)."""

    latents: np.ndarray
    targets: np.ndarray
    names: list[str]
    index: np.ndarray

    def __len__(self) -> int:
        return len(self.index)

    def column(self, name: str) -> np.ndarray:
        """One node's values, sequences x steps."""
        return self.latents[:, :, self.names.index(name)]

    def intervened(self, name: str) -> np.ndarray:
        """Whether one node was intervened on, sequences x steps."""
        return self.targets[:, :, self.names.index(name)]
