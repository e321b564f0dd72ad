"""SAP, the separated attribute predictability score (Kumar et al., "Variational inference of disentangled latent
concepts from unlabeled observations", ICLR 2018), for continuous factors: S_ij = R^2 of a linear regression of
factor j on the single code i; per factor, the gap between the two largest S_ij over codes; averaged over factors.

In sample (no test split) S_ij is the squared Pearson correlation, which is exactly the R^2 of least squares with
an intercept (disentanglement_lib's continuous SAP). With a test split the line is fit on the fit split and R^2
is taken on the test split, floored at 0 (a code that predicts worse than the test mean predicts nothing).
A constant code scores 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.evaluation.metric_inputs import as_matrix, fit_test, pair


@dataclass(frozen=True)
class SAPResult:
    """SAP, its per-factor gaps and the (codes x factors) R^2 score matrix."""

    score: float
    per_factor: np.ndarray  # (K,)
    scores: np.ndarray  # (L, K)


def sap_scores(z_fit, c_fit, z_test=None, c_test=None) -> np.ndarray:
    """(L, K) R^2 of predicting each factor from each single code by a line (fit split; test split if given)."""
    if (z_test is None) != (c_test is None):
        raise UserError("give both factors and codes of the test split, or neither")
    if z_test is None:
        z, c = pair(z_fit, c_fit, min_samples=3)
        zc, cc = z - z.mean(0), c - c.mean(0)
        cov = cc.T @ zc
        var_c, var_z = (cc**2).sum(0), (zc**2).sum(0)
        ok = (var_c[:, None] > 1e-12 * len(c)) & (var_z[None, :] > 0)
        return np.where(ok, cov**2 / np.where(ok, np.outer(var_c, var_z), 1.0), 0.0)
    z_fit, c_fit, z_test, c_test = fit_test(z_fit, c_fit, z_test, c_test, min_fit=3, min_test=2)
    cc = c_fit - c_fit.mean(0)
    var_c = (cc**2).sum(0)
    live = var_c > 1e-12 * len(c_fit)
    slope = (cc.T @ (z_fit - z_fit.mean(0))) / np.where(live, var_c, 1.0)[:, None]  # (L, K)
    slope[~live] = 0.0
    intercept = z_fit.mean(0)[None, :] - slope * c_fit.mean(0)[:, None]
    ss_tot = ((z_test - z_test.mean(0)) ** 2).sum(0)
    out = np.zeros((c_fit.shape[1], z_fit.shape[1]))
    for k in range(z_fit.shape[1]):
        pred = intercept[:, k] + c_test * slope[:, k]  # (N_test, L)
        ss_res = ((z_test[:, [k]] - pred) ** 2).sum(0)
        out[:, k] = 1.0 - ss_res / ss_tot[k] if ss_tot[k] > 0 else 0.0
    out[~live] = 0.0
    return np.maximum(out, 0.0)


def sap_from_scores(scores) -> tuple[float, np.ndarray]:
    """(SAP, per-factor gap) of a score matrix (L codes x K factors): top-1 minus top-2 over codes, mean."""
    s = as_matrix(scores, "SAP score matrix")
    if s.shape[0] < 2:
        raise UserError(f"SAP needs at least 2 code dimensions, got {s.shape[0]}")
    top = -np.sort(-s, axis=0)
    gaps = top[0] - top[1]
    return float(gaps.mean()), gaps


def sap(z_fit, c_fit, z_test=None, c_test=None) -> SAPResult:
    """SAP of codes ``c`` (N, L) for continuous factors ``z`` (N, K); in sample unless a test split is given."""
    scores = sap_scores(z_fit, c_fit, z_test, c_test)
    score, gaps = sap_from_scores(scores)
    return SAPResult(score, gaps, scores)
