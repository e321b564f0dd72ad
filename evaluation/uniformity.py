"""Uniformity of l2-normalised features (Wang & Isola) and reconstruction error."""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import pdist


def uniformity(z: np.ndarray, t: float = 2.0, max_points: int = 5000, seed: int = 0) -> float:
    """log mean over distinct pairs of exp(-t ||f_i - f_j||^2) on l2-normalised f; lower is more uniform."""
    z = np.asarray(z, float)
    if len(z) > max_points:
        z = z[np.random.default_rng(seed).choice(len(z), max_points, replace=False)]
    f = z / np.linalg.norm(z, axis=1, keepdims=True)
    d2 = pdist(f, "sqeuclidean")
    m = (-t * d2).max()
    return float(m + np.log(np.mean(np.exp(-t * d2 - m))))


def reconstruction_mse(x: np.ndarray, x_hat: np.ndarray) -> float:
    """Mean squared error per element between inputs and reconstructions (generative models)."""
    return float(np.mean((np.asarray(x, float) - np.asarray(x_hat, float)) ** 2))
