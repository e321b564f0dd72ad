"""CITRIS's evaluation of learned latents (Lippe et al., "CITRIS: causal identifiability from temporal intervened
sequences", ICML 2022): the R^2 matrix between latent groups and true causal factors, its diagonal mean ("diag",
higher is better), the separation ("sep", lower is better) and the same for Spearman's rank correlation.

As in the authors' code (phlippe/CITRIS, models/shared/callbacks.py, CorrelationMetricsLogCallback): a latent group
is the set of latent dimensions the model assigns to one factor (its learned target assignment; dimensions in no
group are dropped); a regressor from each group's dimensions predicts every factor, fit on one split and scored on
the other; entry (g, k) is the test R^2 of group g's prediction of factor k, and the Spearman entry is the rank
correlation between that prediction and factor k. Rows follow the factors, so the diagonal pairs each factor with
its own group: diag = mean of the diagonal; sep = for each group, the largest entry for another factor, averaged
over groups (their ``max_off_diag``); ``*_max_off_diag`` is the single largest off-diagonal entry.
Without an assignment (a model that learns none, e.g. a baseline), each dimension is its own group and factors are
matched one to one to dimensions by the Hungarian algorithm on the R^2 matrix (the authors fall back to the
identity assignment instead, which assumes the dimensions already come in factor order).

Regressor ("mlp", default): like theirs, an MLP with two tanh hidden layers of 128 units, Adam, learning rate 4e-3,
batches of 512, 100 epochs, on latents and factors standardised on the fit split. Theirs is one network over all
groups with the group mask as an extra input (they report the same results as one network per group); here it is
one scikit-learn network per group, all factors as outputs. "linear" (least squares) is the cheap alternative.
Factors are treated as continuous (their angle and categorical factors use angular distance and accuracy).
A group with no dimensions predicts the fit-split mean (R^2 about 0, Spearman 0).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.stats import rankdata
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression
from sklearn.neural_network import MLPRegressor

from ident3d.causal.errors import UserError
from ident3d.evaluation.metric_inputs import fit_test, r2_columns, standardise

REGRESSORS = ("mlp", "linear")


@dataclass(frozen=True)
class CitrisResult:
    """CITRIS's R^2 and Spearman matrices (rows: each factor's latent group, columns: factors) and summaries."""

    r2: np.ndarray  # (K, K)
    spearman: np.ndarray  # (K, K)
    r2_diag: float
    r2_sep: float
    r2_max_off_diag: float
    spearman_diag: float
    spearman_sep: float
    spearman_max_off_diag: float
    assignment: np.ndarray  # (L,) factor index of each latent dimension, -1 for none
    matched: bool  # True when the assignment came from Hungarian matching
    regressor: str


def diag_and_sep(matrix) -> tuple[float, float, float]:
    """(diag, sep, largest off-diagonal entry) of a square (groups x factors) matrix, group k = factor k."""
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        raise UserError(f"diag and sep need a square matrix of at least 2 x 2, got shape {m.shape}")
    off = np.where(np.eye(len(m), dtype=bool), -np.inf, m)
    return float(np.diag(m).mean()), float(off.max(1).mean()), float(off.max())


def _spearman_columns(y: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Spearman correlation of each column of ``pred`` with the same column of ``y`` (0 for a constant column)."""
    ry, rp = rankdata(y, axis=0), rankdata(pred, axis=0)
    ry, rp = ry - ry.mean(0), rp - rp.mean(0)
    den = np.sqrt((ry**2).sum(0) * (rp**2).sum(0))
    return np.where(den > 0, (ry * rp).sum(0) / np.where(den > 0, den, 1.0), 0.0)


def _predict(x_fit: np.ndarray, y_fit: np.ndarray, x_test: np.ndarray, regressor: str, seed: int) -> np.ndarray:
    if x_fit.shape[1] == 0:
        return np.broadcast_to(y_fit.mean(0), (len(x_test), y_fit.shape[1])).copy()
    if regressor == "linear":
        return LinearRegression().fit(x_fit, y_fit).predict(x_test)
    net = MLPRegressor(hidden_layer_sizes=(128, 128), activation="tanh", learning_rate_init=4e-3,
                       batch_size=min(512, len(x_fit)), max_iter=100, random_state=seed)
    with warnings.catch_warnings():  # a fixed epoch budget, as theirs
        warnings.simplefilter("ignore", ConvergenceWarning)
        net.fit(x_fit, y_fit)
    return net.predict(x_test).reshape(len(x_test), -1)


def group_matrices(z_fit, c_fit, z_test, c_test, groups, regressor: str = "mlp",
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(R^2, Spearman), each (len(groups), K): a regressor from the latent dimensions in ``groups[g]`` (a list of
    column indices of ``c``) predicts every factor; fit on the fit split, scored on the test split."""
    if regressor not in REGRESSORS:
        raise UserError(f"regressor must be one of {', '.join(REGRESSORS)}, got {regressor!r}")
    z_fit, c_fit, z_test, c_test = fit_test(z_fit, c_fit, z_test, c_test, min_fit=10, min_test=3)
    c_fit, c_test = standardise(c_fit, c_test)
    z_fit, z_test = standardise(z_fit, z_test)
    groups = [np.asarray(dims, dtype=int).ravel() for dims in groups]
    if any(((dims < 0) | (dims >= c_fit.shape[1])).any() for dims in groups):
        raise UserError(f"group entries must be latent dimension indices 0..{c_fit.shape[1] - 1}")
    r2 = np.empty((len(groups), z_fit.shape[1]))
    rho = np.empty_like(r2)
    for g, dims in enumerate(groups):
        pred = _predict(c_fit[:, dims], z_fit, c_test[:, dims], regressor, seed)
        r2[g], rho[g] = r2_columns(z_test, pred), _spearman_columns(z_test, pred)
    return r2, rho


def _check_assignment(assignment, n_codes: int, n_factors: int) -> np.ndarray:
    a = np.asarray(assignment)
    if a.shape != (n_codes,) or not np.issubdtype(a.dtype, np.integer):
        raise UserError(f"assignment must be {n_codes} integers (a factor index per latent dimension, -1 for none)")
    if ((a < -1) | (a >= n_factors)).any():
        bad = sorted(set(a[(a < -1) | (a >= n_factors)].tolist()))
        raise UserError(f"assignment entries must be factor indices 0..{n_factors - 1} or -1, got {bad}")
    return a


def citris_scores(z_fit, c_fit, z_test, c_test, assignment=None, regressor: str = "mlp",
                  seed: int = 0) -> CitrisResult:
    """CITRIS's R^2 / Spearman matrices with diag and sep, for codes ``c`` (N, L) and factors ``z`` (N, K).

    ``assignment`` (L,): the factor each latent dimension belongs to (-1: none), e.g. the argmax of a CITRIS
    model's target assignment; None: Hungarian matching of single dimensions to factors on the R^2 matrix
    (needs L >= K).
    """
    z_fit, c_fit, z_test, c_test = fit_test(z_fit, c_fit, z_test, c_test, min_fit=10, min_test=3)
    n_codes, n_factors = c_fit.shape[1], z_fit.shape[1]
    if n_factors < 2:
        raise UserError(f"CITRIS's diag and sep need at least 2 factors, got {n_factors}")
    if assignment is None:
        if n_codes < n_factors:
            raise UserError(f"matching latent dimensions to factors needs at least as many dimensions ({n_codes}) "
                            f"as factors ({n_factors}); give an assignment instead")
        r2_all, rho_all = group_matrices(z_fit, c_fit, z_test, c_test, [[i] for i in range(n_codes)], regressor, seed)
        rows, cols = linear_sum_assignment(-r2_all)
        dim_of = np.empty(n_factors, dtype=int)
        dim_of[cols] = rows
        a = np.full(n_codes, -1)
        a[dim_of] = np.arange(n_factors)
        r2, rho = r2_all[dim_of], rho_all[dim_of]
    else:
        a = _check_assignment(assignment, n_codes, n_factors)
        groups = [np.flatnonzero(a == k) for k in range(n_factors)]
        r2, rho = group_matrices(z_fit, c_fit, z_test, c_test, groups, regressor, seed)
    return CitrisResult(r2, rho, *diag_and_sep(r2), *diag_and_sep(rho), a, assignment is None, regressor)
