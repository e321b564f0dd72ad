"""Paper 003's read-out of a flow's latent space: the spectrum of per-dimension standard deviations (a
volume-preserving encoder concentrates the data's variation in a few dims) and how well the top dims
match the true informative latents (|Pearson| correlation, Hungarian matching)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment


def std_spectrum(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per-dim std of h (N, D) sorted descending, the dims in that order)."""
    std = np.asarray(h, float).std(axis=0)
    order = np.argsort(-std, kind="stable")
    return std[order], order


def abs_correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|Pearson| correlation matrix (Da, Db) between the columns of a (N, Da) and b (N, Db)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    a = (a - a.mean(0)) / (a.std(0) + 1e-12)
    b = (b - b.mean(0)) / (b.std(0) + 1e-12)
    return np.abs(a.T @ b) / len(a)


def top_dim_correlations(h: np.ndarray, latents: np.ndarray, k: int = 2,
                         informative: Sequence[int] | None = None) -> dict[str, Any]:
    """|corr| between the k highest-std dims of h and every latent, with a one-to-one match of the
    informative latents (default: the first k) to those dims; JSON-ready.

    Returns {"dims": the top-k dims, "corr": (k, L) |corr| rows per top dim, "match": {latent index: top dim},
    "matched": the matched |corr| per informative latent, "mean": their mean}.
    """
    informative = list(range(k)) if informative is None else list(informative)
    if not 1 <= k <= np.shape(h)[1] or not informative:
        raise ValueError(f"need 1 <= k <= {np.shape(h)[1]} and at least one informative latent")
    _, order = std_spectrum(h)
    dims = order[:k]
    corr = abs_correlation(np.asarray(h)[:, dims], latents)
    rows, cols = linear_sum_assignment(-corr[:, informative].T)
    matched = [float(corr[c, informative[r]]) for r, c in zip(rows, cols, strict=True)]
    return {"dims": dims.tolist(), "corr": corr.tolist(),
            "match": {informative[r]: int(dims[c]) for r, c in zip(rows, cols, strict=True)},
            "matched": matched, "mean": float(np.mean(matched))}
