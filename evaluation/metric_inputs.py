"""Checks shared by the disentanglement metrics: true factors ``z`` (N, K) and learned codes ``c`` (N, L) as
finite 2-D float arrays with matching N, so a bad argument is one ``UserError`` line, not a numpy traceback."""

from __future__ import annotations

import numpy as np

from ident3d.causal.errors import UserError


def as_matrix(x, name: str, strict: bool = False) -> np.ndarray:
    """``x`` as a finite (N, D) float array; a 1-D array is one column, or (``strict``: where a matrix of samples x
    dimensions is meant, e.g. factors or codes) refused, since (N,) may as well be one sample of N dimensions."""
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a numeric array") from None
    if a.ndim == 1 and strict:
        raise UserError(f"{name} must be a 2-D array (samples x dimensions), got a 1-D array of {a.size} values; "
                        "pass x[:, None] for one dimension")
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise UserError(f"{name} must be a 2-D array (samples x dimensions), got shape {a.shape}")
    if a.shape[1] == 0:
        raise UserError(f"{name} has no columns")
    if not np.isfinite(a).all():
        raise UserError(f"{name} contains NaN or infinite values")
    return a


def pair(z, c, min_samples: int, split: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Factors and codes of one split: same number of samples, at least ``min_samples``."""
    z, c = as_matrix(z, f"factors{split}"), as_matrix(c, f"codes{split}")
    if len(z) != len(c):
        raise UserError(f"factors{split} has {len(z)} samples but codes{split} has {len(c)}")
    if len(z) < min_samples:
        raise UserError(f"need at least {min_samples} samples{split or ''}, got {len(z)}")
    return z, c


def fit_test(z_fit, c_fit, z_test, c_test, min_fit: int, min_test: int) -> tuple[np.ndarray, ...]:
    """A fit and a test split of (factors, codes) with the same columns on both sides."""
    z_fit, c_fit = pair(z_fit, c_fit, min_fit, " (fit split)")
    z_test, c_test = pair(z_test, c_test, min_test, " (test split)")
    if z_fit.shape[1] != z_test.shape[1]:
        raise UserError(f"the fit split has {z_fit.shape[1]} factors but the test split has {z_test.shape[1]}")
    if c_fit.shape[1] != c_test.shape[1]:
        raise UserError(f"the fit split has {c_fit.shape[1]} code dimensions but the test split has {c_test.shape[1]}")
    return z_fit, c_fit, z_test, c_test


def standardise(fit: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre and scale both splits by the fit split's mean and std (a constant column is only centred)."""
    mean, std = fit.mean(0), fit.std(0)
    std = np.where(std > 1e-12, std, 1.0)
    return (fit - mean) / std, (test - mean) / std


def constant_columns(x: np.ndarray) -> np.ndarray:
    """Indices of the columns of ``x`` (N, D) that hold one value (up to 1e-12 of the column's magnitude), or that
    have fewer than 2 samples: their variance is 0, so an R^2 or a correlation with them is undefined (0 / 0)."""
    if len(x) < 2:
        return np.arange(x.shape[1])
    spread = x.max(0) - x.min(0)
    return np.flatnonzero(spread <= 1e-12 * np.maximum(1.0, np.abs(x).max(0)))


def defined_mean(values) -> float:
    """Mean of the finite entries of ``values`` (undefined scores are NaN and left out); NaN when none is finite."""
    a = np.asarray(values, dtype=float).ravel()
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else float("nan")


def r2_columns(y: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """R^2 of each column of ``pred`` against the same column of ``y`` (SS_tot about y's own mean)."""
    ss_res = ((y - pred) ** 2).sum(0)
    ss_tot = ((y - y.mean(0)) ** 2).sum(0)
    return 1.0 - ss_res / np.where(ss_tot > 0, ss_tot, np.nan)
