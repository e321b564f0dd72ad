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
C is the plain mean over factors, as in the paper (``lasso`` and ``forest``); disentanglement_lib instead weights C_j
by each factor's share of R, which equals the mean only when the columns of R have equal sums.
The paper's regressors are Lasso and random forests. With Lasso, codes that carry nothing keep no or a few tiny
coefficients, so D and C of an uninformative representation are arbitrary (all-zero R gives 0): read them together
with I; tree importances spread evenly instead (D, C near 0).

``gbt`` is disentanglement_lib's DCI (``evaluation/metrics/dci.py``), not the paper's: per factor a scikit-learn
``GradientBoostingClassifier`` with its defaults (``n_estimators`` 100, depth 3; ``random_state`` = ``seed``) is fit
on the raw codes (neither standardised nor discretised) to the factor's classes; R_ij = |feature_importances_|;
I_j = its test accuracy (``accuracy_test``; informativeness is their mean); and D and C are dlib's: the entropies of
R + 1e-11 (so an all-zero row or column is uniform, and exact zeros weigh 1e-11), C_j weighted by each factor's share
of R, and an all-zero R weighted uniformly (D = C = 0). dlib's factors are discrete already (dSprites' indices); here a
factor with at most ``n_bins`` distinct values on the fit split keeps its values as classes, and one with more is
cut into ``n_bins`` (20, as dlib's ``histogram_discretize``) equal-width bins between its fit-split minimum and
maximum (numpy's histogram edges). Unlike dlib's discretiser, which takes the bins of whatever array it is given, the
bins come from the fit split only and are applied to the test split (test values beyond the fit range fall in the
outermost bins), so a class means the same interval on both splits. A factor with one class on the fit split has
nothing to classify and is refused (one ``UserError`` line naming it).
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier, RandomForestRegressor
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
    informativeness: float  # mean over factors of the test R^2 (gbt: of the test accuracy, as dlib)
    importance: np.ndarray  # (L, K)
    per_code: np.ndarray  # D_i (L,)
    code_weights: np.ndarray  # rho_i (L,)
    per_factor: np.ndarray  # C_j (K,)
    r2_test: np.ndarray  # (K,); gbt: NaN (a classifier has no R^2)
    error_test: np.ndarray  # (K,) test MSE of the standardised factor; gbt: test misclassification rate
    method: str
    accuracy_test: np.ndarray | None = None  # (K,) gbt only: test accuracy per factor (dlib's informativeness)


def _one_minus_entropy(p: np.ndarray, axis: int) -> np.ndarray:
    """1 - entropy of the rows (axis=1) or columns (axis=0) of a non-negative matrix, normalised along ``axis``,
    in base (its length along ``axis``); an all-zero row/column counts as uniform (score 0)."""
    n = p.shape[axis]
    total = p.sum(axis=axis, keepdims=True)
    q = np.where(total > 0, p / np.where(total > 0, total, 1.0), 1.0 / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(q > 0, q * np.log(q), 0.0)
    return 1.0 + plogp.sum(axis=axis) / np.log(n)


def _one_minus_entropy_dlib(p: np.ndarray, axis: int) -> np.ndarray:
    """disentanglement_lib's 1 - entropy: of p + 1e-11 normalised along ``axis``, in base its length there."""
    q = p + 1e-11
    q = q / q.sum(axis=axis, keepdims=True)
    return 1.0 + (q * np.log(q)).sum(axis=axis) / np.log(p.shape[axis])


def dci_from_importance(importance, form: str = "paper") -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
    """(D, C, D_i per code, rho_i per code, C_j per factor) of an importance matrix (L codes x K factors, >= 0).

    ``form`` "paper": exact entropies, C the plain mean; "dlib": disentanglement_lib's (entropies of R + 1e-11, C
    weighted by each factor's share of R, an all-zero R weighted uniformly)."""
    r = as_matrix(importance, "importance matrix")
    if r.shape[0] < 2 or r.shape[1] < 2:
        raise UserError(f"DCI needs at least 2 codes and 2 factors, got an importance matrix of shape {r.shape}")
    if (r < 0).any():
        raise UserError("importance matrix must be non-negative")
    if form == "dlib":
        per_code, per_factor = _one_minus_entropy_dlib(r, axis=1), _one_minus_entropy_dlib(r, axis=0)
        w = r if r.sum() > 0 else np.ones_like(r)
        weights, factor_weights = w.sum(1) / w.sum(), w.sum(0) / w.sum()
        return float(weights @ per_code), float(factor_weights @ per_factor), per_code, weights, per_factor
    if form != "paper":
        raise UserError(f"form must be paper or dlib, got {form!r}")
    per_code = _one_minus_entropy(r, axis=1)
    per_factor = _one_minus_entropy(r, axis=0)
    total = r.sum()
    weights = r.sum(1) / total if total > 0 else np.full(r.shape[0], 1.0 / r.shape[0])
    return float(weights @ per_code), float(per_factor.mean()), per_code, weights, per_factor


def _regressor(importance: str, alpha: float | None, n_estimators: int, seed: int):
    if importance == "lasso":
        return Lasso(alpha=alpha) if alpha is not None else LassoCV(cv=5, alphas=30, random_state=seed)
    return RandomForestRegressor(n_estimators=n_estimators, min_samples_leaf=5, random_state=seed, n_jobs=1)


def check_options(importance: str, alpha: float | None, n_estimators: int, n_bins: int) -> None:
    """The knobs of ``dci``, each a one-line ``UserError`` when out of range."""
    if importance not in IMPORTANCES:
        raise UserError(f"importance must be one of {', '.join(IMPORTANCES)}, got {importance!r}")
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, numbers.Real)
                              or not math.isfinite(alpha) or alpha <= 0):
        raise UserError(f"alpha must be a number > 0 (Lasso's penalty), or None to choose it by cross-validation; "
                        f"got {alpha!r}")
    for name, value, low in (("n_estimators", n_estimators, 1), ("n_bins", n_bins, 2)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise UserError(f"{name} must be a whole number >= {low}, got {value!r}")


def factor_classes(z_fit: np.ndarray, z_test: np.ndarray, n_bins: int = 20) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(fit classes (N_fit, K), test classes (N_test, K), the discretised factors' indices): a factor with at most
    ``n_bins`` distinct fit values keeps them as classes (a test value not seen in the fit split gets class -1, which
    no classifier predicts); one with more is cut into ``n_bins`` equal-width bins of its fit range, the test split
    with the same edges (values beyond them in the outermost bins)."""
    y_fit = np.empty(z_fit.shape, dtype=np.int64)
    y_test = np.empty(z_test.shape, dtype=np.int64)
    cut = []
    for j in range(z_fit.shape[1]):
        values = np.unique(z_fit[:, j])
        if len(values) <= n_bins:
            y_fit[:, j] = np.searchsorted(values, z_fit[:, j])
            pos = np.clip(np.searchsorted(values, z_test[:, j]), 0, len(values) - 1)
            y_test[:, j] = np.where(values[pos] == z_test[:, j], pos, -1)
        else:
            cut.append(j)
            edges = np.histogram_bin_edges(z_fit[:, j], bins=n_bins)
            for out, col in ((y_fit, z_fit[:, j]), (y_test, z_test[:, j])):
                out[:, j] = np.clip(np.searchsorted(edges, col, side="right") - 1, 0, n_bins - 1)
    return y_fit, y_test, cut


def gbt_importance(z_fit, c_fit, z_test, c_test, n_estimators: int = 100, seed: int = 0,
                   n_bins: int = 20) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """disentanglement_lib's ``compute_importance_gbt``: (R (L, K) = |feature importances|, test accuracy (K,), the
    discretised factors) of one ``GradientBoostingClassifier`` per factor on the raw codes (see the module)."""
    y_fit, y_test, cut = factor_classes(z_fit, z_test, n_bins)
    one = [j for j in range(y_fit.shape[1]) if len(np.unique(y_fit[:, j])) < 2]
    if one:
        raise UserError(f"factor {', '.join(map(str, one))} has one value (class) on the fit split: DCI-gbt "
                        "classifies each factor and needs at least 2 classes; drop it from the factors")
    r = np.zeros((c_fit.shape[1], z_fit.shape[1]))
    acc = np.zeros(z_fit.shape[1])
    for j in range(z_fit.shape[1]):
        model = GradientBoostingClassifier(n_estimators=n_estimators, random_state=seed).fit(c_fit, y_fit[:, j])
        r[:, j] = np.abs(model.feature_importances_)
        acc[j] = np.mean(model.predict(c_test) == y_test[:, j])
    return r, acc, cut


def importance_matrix(z_fit, c_fit, z_test, c_test, importance: str = "lasso", alpha: float | None = None,
                      n_estimators: int = 100, seed: int = 0,
                      n_bins: int = 20) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(R (L, K), test R^2 (K,), test MSE (K,)): one regressor per factor from all codes, fit on the fit split
    (``gbt``: (R, test accuracy (K,), test misclassification rate (K,)) of dlib's classifiers, ``gbt_importance``).

    Codes and factors are standardised on the fit split first, so Lasso importances do not depend on units.
    ``lasso``: R_ij = |coefficient| (absolute values, as the paper; ``alpha`` fixed, or chosen per factor by
    5-fold CV on the fit split when None). ``forest`` (random forest, ``min_samples_leaf`` 5): R_ij = the
    impurity-based feature importance. ``gbt``: disentanglement_lib's, on the raw codes (see the module).
    Needs at least 10 fit and 2 test samples.
    """
    check_options(importance, alpha, n_estimators, n_bins)
    z_fit, c_fit, z_test, c_test = fit_test(z_fit, c_fit, z_test, c_test, min_fit=10, min_test=2)
    if importance == "gbt":
        r, acc, _ = gbt_importance(z_fit, c_fit, z_test, c_test, n_estimators, seed, n_bins)
        return r, acc, 1.0 - acc
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
        n_estimators: int = 100, seed: int = 0, n_bins: int = 20) -> DCIResult:
    """DCI of codes ``c`` (N, L) for factors ``z`` (N, K): regressors fit on the fit split, scored on the test split.

    ``importance`` picks the regressors whose importances make R: ``lasso`` (|coefficients|) or ``forest`` (tree
    feature importances), with the paper's D and C; or ``gbt``, disentanglement_lib's DCI (classifiers, accuracy as
    informativeness, dlib's D and C; factors with more than ``n_bins`` values discretised: see the module). ``alpha``
    (> 0, or None for CV) is Lasso's; ``n_estimators`` (>= 1) the trees'. Needs at least 10 fit and 2 test samples.
    """
    check_options(importance, alpha, n_estimators, n_bins)
    if importance == "gbt":
        z_fit, c_fit, z_test, c_test = fit_test(z_fit, c_fit, z_test, c_test, min_fit=10, min_test=2)
        r, acc, cut = gbt_importance(z_fit, c_fit, z_test, c_test, n_estimators, seed, n_bins)
        d, c, per_code, weights, per_factor = dci_from_importance(r, form="dlib")
        how = (f"gbt (disentanglement_lib: GradientBoostingClassifier, {n_estimators} trees, test accuracy; "
               f"{len(cut)} of {r.shape[1]} factors cut into {n_bins} bins)")
        return DCIResult(d, c, float(np.mean(acc)), r, per_code, weights, per_factor, np.full(r.shape[1], np.nan),
                         1.0 - acc, how, accuracy_test=acc)
    r, r2, err = importance_matrix(z_fit, c_fit, z_test, c_test, importance, alpha, n_estimators, seed)
    d, c, per_code, weights, per_factor = dci_from_importance(r)
    how = importance if importance != "lasso" else ("lasso (CV alpha)" if alpha is None else f"lasso (alpha={alpha})")
    return DCIResult(d, c, float(np.mean(r2)), r, per_code, weights, per_factor, r2, err, how)
