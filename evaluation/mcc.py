"""Mean correlation coefficient: |correlation| between true and inferred dimensions, matched one
to one with the Hungarian algorithm, averaged over the matched pairs. Out of sample: the matching
is chosen on the fit split and scored on the test split."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.stats import rankdata


def _abs_corr(a: np.ndarray, b: np.ndarray, method: str) -> np.ndarray:
    """|corr| matrix between the columns of a (N, Da) and b (N, Db)."""
    if method == "spearman":
        a, b = np.apply_along_axis(rankdata, 0, a), np.apply_along_axis(rankdata, 0, b)
    elif method != "pearson":
        raise ValueError(f"method must be pearson or spearman, got {method!r}")
    a = (a - a.mean(0)) / (a.std(0) + 1e-12)
    b = (b - b.mean(0)) / (b.std(0) + 1e-12)
    return np.abs(a.T @ b) / len(a)


def mcc(z_true: np.ndarray, z_pred: np.ndarray, method: str = "pearson",
        z_true_test: np.ndarray | None = None, z_pred_test: np.ndarray | None = None) -> float:
    """MCC in sample, or out of sample when test arrays are given (matching from the first pair)."""
    c = _abs_corr(np.asarray(z_true, float), np.asarray(z_pred, float), method)
    rows, cols = linear_sum_assignment(-c)
    if z_true_test is None:
        return float(c[rows, cols].mean())
    ct = _abs_corr(np.asarray(z_true_test, float), np.asarray(z_pred_test, float), method)
    return float(ct[rows, cols].mean())
