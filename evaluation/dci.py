"""DCI: disentanglement, completeness and informativeness of codes with respect to true factors, from an
importance matrix of per-factor regressors (Eastwood & Williams, "A framework for the quantitative evaluation
of disentangled representations", ICLR 2018).

R (L codes x K factors) holds how much code i matters for predicting factor j. With P_ij = R_ij / sum_k R_ik:
  D_i = 1 - H_K(P_i.)        (entropy in base K over factors),  D = sum_i rho_i D_i,  rho_i = sum_j R_ij / sum R;
  C_j = 1 - H_L(Pt_.j)       (Pt_ij = R_ij / sum_i R_ij, entropy in base L over codes),  C = mean_j C_j;
  I_j = test R^2 of the regressor that predicts factor j (the paper's informativeness is that regressor's test
        error; ``error_test`` is its mean squared error on the standardised factor, 1 - R^2 up to the test mean).
A code with no importance at all is uniform over factors (D_i = 0, and its weight rho_i is 0); a factor that no
code predicts is uniform over codes (C_j = 0); an all-zero R gives D = C = 0.
C is the plain mean over factors, as in the paper; disentanglement_lib instead weights C_j by each factor's share
of R, which equals the mean only when the columns of R have equal sums.
The paper's regressors are Lasso and random forests; disentanglement_lib's are gradient-boosted trees. With Lasso,
codes that carry nothing keep no or a few tiny coefficients, so D and C of an uninformative representation are
arbitrary (all-zero R gives 0): read them together with I; tree importances spread evenly instead (D, C near 0).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Lasso, LassoCV

from ident3d.causal.errors import UserError
from ident3d.evaluation.metric_inputs import as_matrix, fit_test, r2_columns, standardise

IMPORTANCES = ("lasso", "forest", "gbt")


@dataclass(frozen=True)
class DCIResult:
    """DCI scores, the importance matrix they come from and the per-code / per-factor parts."""

    disentanglement: float
    completeness: float
    informativeness: float  # mean over factors of the test R^2
    importance: np.ndarray  # (L, K)
    per_code: np.ndarray  # D_i (L,)
    code_weights: np.ndarray  # rho_i (L,)
    per_factor: np.ndarray  # C_j (K,)
    r2_test: np.ndarray  # (K,)
    error_test: np.ndarray  # (K,) test MSE of the standardised factor
    method: str


def _one_minus_entropy(p: np.ndarray, axis: int) -> np.ndarray:
    """1 - entropy of the rows (axis=1) or columns (axis=0) of a non-negative matrix, normalised along ``axis``,
    in base (its length along ``axis``); an all-zero row/column counts as uniform (score 0)."""
    n = p.shape[axis]
    total = p.sum(axis=axis, keepdims=True)
    q = np.where(total > 0, p / np.where(total > 0, total, 1.0), 1.0 / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(q > 0, q * np.log(q), 0.0)
    return 1.0 + plogp.sum(axis=axis) / np.log(n)


def dci_from_importance(importance) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
    """(D, C, D_i per code, rho_i per code, C_j per factor) of an importance matrix (L codes x K factors, >= 0)."""
    r = as_matrix(importance, "importance matrix")
    if r.shape[0] < 2 or r.shape[1] < 2:
        raise UserError(f"DCI needs at least 2 codes and 2 factors, got an importance matrix of shape {r.shape}")
    if (r < 0).any():
        raise UserError("importance matrix must be non-negative")
    per_code = _one_minus_entropy(r, axis=1)
    per_factor = _one_minus_entropy(r, axis=0)
    total = r.sum()
    weights = r.sum(1) / total if total > 0 else np.full(r.shape[0], 1.0 / r.shape[0])
    return float(weights @ per_code), float(per_factor.mean()), per_code, weights, per_factor


def _regressor(importance: str, alpha: float | None, n_estimators: int, seed: int):
    if importance == "lasso":
        return Lasso(alpha=alpha) if alpha is not None else LassoCV(cv=5, alphas=30, random_state=seed)
    if importance == "forest":
        return RandomForestRegressor(n_estimators=n_estimators, min_samples_leaf=5, random_state=seed, n_jobs=1)
    return GradientBoostingRegressor(n_estimators=n_estimators, max_depth=3, random_state=seed)


def importance_matrix(z_fit, c_fit, z_test, c_test, importance: str = "lasso", alpha: float | None = None,
                      n_estimators: int = 100, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(R (L, K), test R^2 (K,), test MSE (K,)): one regressor per factor from all codes, fit on the fit split.

    Codes and factors are standardised on the fit split first, so Lasso importances do not depend on units.
    ``lasso``: R_ij = |coefficient| (absolute values, as the paper; ``alpha`` fixed, or chosen per factor by
    5-fold CV on the fit split when None). ``forest`` (random forest, ``min_samples_leaf`` 5) and ``gbt``
    (gradient-boosted trees, depth 3, as disentanglement_lib): R_ij = the impurity-based feature importance.
    """
    if importance not in IMPORTANCES:
        raise UserError(f"importance must be one of {', '.join(IMPORTANCES)}, got {importance!r}")
    z_fit, c_fit, z_test, c_test = fit_test(z_fit, c_fit, z_test, c_test, min_fit=10, min_test=2)
    c_fit, c_test = standardise(c_fit, c_test)
    z_fit, z_test = standardise(z_fit, z_test)
    r = np.zeros((c_fit.shape[1], z_fit.shape[1]))
    pred = np.zeros_like(z_test)
    for j in range(z_fit.shape[1]):
        model = _regressor(importance, alpha, n_estimators, seed)
        with warnings.catch_warnings():  # a Lasso that has not fully converged still ranks the codes
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(c_fit, z_fit[:, j])
        r[:, j] = np.abs(model.coef_) if importance == "lasso" else model.feature_importances_
        pred[:, j] = model.predict(c_test)
    return r, r2_columns(z_test, pred), ((z_test - pred) ** 2).mean(0)


def dci(z_fit, c_fit, z_test, c_test, importance: str = "lasso", alpha: float | None = None,
        n_estimators: int = 100, seed: int = 0) -> DCIResult:
    """DCI of codes ``c`` (N, L) for factors ``z`` (N, K): regressors fit on the fit split, scored on the test split.

    ``importance`` picks the regressors whose importances make R: ``lasso`` (|coefficients|), ``forest`` or
    ``gbt`` (tree feature importances); see ``importance_matrix``.
    """
    r, r2, err = importance_matrix(z_fit, c_fit, z_test, c_test, importance, alpha, n_estimators, seed)
    d, c, per_code, weights, per_factor = dci_from_importance(r)
    how = importance if importance != "lasso" else ("lasso (CV alpha)" if alpha is None else f"lasso (alpha={alpha})")
    return DCIResult(d, c, float(np.mean(r2)), r, per_code, weights, per_factor, r2, err, how)
