"""MIG, the mutual information gap (Chen et al., "Isolating sources of disentanglement in VAEs", NeurIPS 2018),
for continuous codes: per factor, the gap between the two largest mutual informations with single codes, over
the factor's entropy, averaged over factors.

Discretisation (stated, as disentanglement_lib does it): each code is cut into ``n_bins`` (default 20) equal-width
bins between its own minimum and maximum (numpy's histogram edges); a factor is cut the same way when it has more
than ``n_bins`` distinct values, otherwise its distinct values are its classes (``discretize_factors`` forces
either). Mutual information and entropy are the plug-in (empirical frequency) estimates in nats, which cancel in
the ratio; the plug-in MI of independent variables is biased upwards by about (bins_a - 1)(bins_b - 1) / (2N).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ident3d.causal.errors import UserError
from ident3d.evaluation.metric_inputs import as_matrix, pair


@dataclass(frozen=True)
class MIGResult:
    """MIG, its per-factor gaps and the mutual information and entropies they come from."""

    score: float
    per_factor: np.ndarray  # (K,) normalised gap
    mutual_info: np.ndarray  # (L, K) nats
    entropy: np.ndarray  # (K,) nats
    n_bins: int


def discretize(x, n_bins: int = 20) -> np.ndarray:
    """Bin indices 0..n_bins-1 of each column of ``x`` (N, D): equal-width bins over the column's range."""
    x = as_matrix(x, "array to discretise")
    if n_bins < 2:
        raise UserError(f"n_bins must be at least 2, got {n_bins}")
    out = np.empty(x.shape, dtype=np.int64)
    for j in range(x.shape[1]):
        edges = np.histogram_bin_edges(x[:, j], bins=n_bins)
        out[:, j] = np.clip(np.searchsorted(edges, x[:, j], side="right") - 1, 0, n_bins - 1)
    return out


def _labels(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column relabelled 0..m_j-1 and the number of labels m_j per column."""
    cols = [np.unique(x[:, j], return_inverse=True) for j in range(x.shape[1])]
    return np.stack([inv.ravel() for _, inv in cols], axis=1), np.array([len(u) for u, _ in cols])


def _one_hot(labels: np.ndarray, sizes: np.ndarray) -> sparse.csr_matrix:
    """(N, sum sizes) indicator matrix: column offset_j + label of sample n in column j."""
    n, d = labels.shape
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    cols = (labels + offsets).ravel()
    return sparse.csr_matrix((np.ones(n * d), (np.repeat(np.arange(n), d), cols)), shape=(n, int(sizes.sum())))


def mutual_info_matrix(a, b) -> np.ndarray:
    """Plug-in mutual information (nats) between every column of discrete ``a`` (N, Da) and of ``b`` (N, Db).

    All joint frequency tables come from one sparse product of the two indicator matrices.
    """
    a, b = as_matrix(a, "discrete array a"), as_matrix(b, "discrete array b")
    if len(a) != len(b):
        raise UserError(f"the two discrete arrays have {len(a)} and {len(b)} samples")
    (la, sa), (lb, sb) = _labels(a), _labels(b)
    n = len(a)
    ha, hb = _one_hot(la, sa), _one_hot(lb, sb)
    joint = (ha.T @ hb).toarray() / n  # (sum sa, sum sb): block (i, j) is the joint table of a_i and b_j
    pa, pb = np.asarray(ha.sum(0)).ravel() / n, np.asarray(hb.sum(0)).ravel() / n
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(joint > 0, joint * np.log(joint / np.outer(pa, pb)), 0.0)
    ia, ib = np.repeat(np.arange(a.shape[1]), sa), np.repeat(np.arange(b.shape[1]), sb)
    mi = np.zeros((a.shape[1], b.shape[1]))
    np.add.at(mi, (ia[:, None], ib[None, :]), terms)
    return np.maximum(mi, 0.0)


def entropy(a) -> np.ndarray:
    """Plug-in entropy (nats) of each column of a discrete array."""
    labels, _ = _labels(as_matrix(a, "discrete array"))
    out = np.empty(labels.shape[1])
    for j in range(labels.shape[1]):
        p = np.bincount(labels[:, j]) / len(labels)
        out[j] = -(p * np.log(p)).sum()
    return out


def mig_from_discrete(z_disc, c_disc) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(MIG, per-factor normalised gap, MI (L, K), H (K,)) from already discrete factors (N, K) and codes (N, L)."""
    z_disc, c_disc = pair(z_disc, c_disc, min_samples=2)
    if c_disc.shape[1] < 2:
        raise UserError(f"MIG needs at least 2 code dimensions, got {c_disc.shape[1]}")
    h = entropy(z_disc)
    if (h <= 0).any():
        raise UserError(f"factor {int(np.flatnonzero(h <= 0)[0])} is constant: MIG divides by its entropy")
    mi = mutual_info_matrix(c_disc, z_disc)
    top = -np.sort(-mi, axis=0)
    gaps = (top[0] - top[1]) / h
    return float(gaps.mean()), gaps, mi, h


def mig(z, c, n_bins: int = 20, discretize_factors: bool | None = None) -> MIGResult:
    """MIG of codes ``c`` (N, L) for factors ``z`` (N, K), on one set of samples (nothing is fitted).

    Codes are always discretised (``n_bins`` equal-width bins); factors when ``discretize_factors`` is True, or
    when None and the factor has more than ``n_bins`` distinct values. Needs at least 2 * n_bins samples.
    """
    z, c = pair(z, c, min_samples=2 * n_bins)
    c_disc = discretize(c, n_bins)
    z_disc = z.copy()
    for j in range(z.shape[1]):
        many = len(np.unique(z[:, j])) > n_bins
        if discretize_factors or (discretize_factors is None and many):
            z_disc[:, j] = discretize(z[:, j], n_bins)[:, 0]
    score, gaps, mi, h = mig_from_discrete(z_disc, c_disc)
    return MIGResult(score, gaps, mi, h, n_bins)
