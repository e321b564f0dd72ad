"""Per-latent R^2 of predicting each true latent from the representation (papers 000/001).

Both are standardised on the fit split; the score is on a held-out split. ``linear`` is ordinary
least squares; ``kernel`` is RBF kernel ridge with the papers' grid (alpha in {1, 0.1, 0.01, 0.001},
gamma in logspace(-2, 2, 4), 3-fold CV). Above ``exact_max`` fit samples the kernel is approximated
with a Nystroem feature map (``n_components`` landmarks) + ridge, which the result records.

Undefined scores: R^2 divides by the variance of the factor on the scored split, so a factor that is constant on the
test split (0 / 0), or on the fit split (nothing to learn, and its standardisation is void), has no R^2: its score is
NaN, ``R2Result.undefined`` names it with the reason, and every mean over factors leaves it out (``R2Result.mean``,
``evaluation.metric_inputs.defined_mean``). scikit-learn's ``r2_score`` instead returns 1.0 for a constant factor
predicted exactly (which a standardised constant always is) and so inflated block means.

Sample bounds (each a one-line ``UserError``): the test split needs at least 2 samples (a variance); ``linear`` needs
more fit samples than code dimensions + 1 (least squares with an intercept has L + 1 parameters: with fewer samples
the fit interpolates and its held-out R^2 means nothing; 3 samples gave -34.5); ``kernel`` needs at least 3 fit
samples (3-fold cross-validation of the grid).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.kernel_approximation import Nystroem
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold
from sklearn.preprocessing import StandardScaler

from ident3d.causal.errors import UserError
from ident3d.evaluation.metric_inputs import constant_columns, defined_mean

ALPHAS = (1.0, 0.1, 0.01, 0.001)
GAMMAS = tuple(np.logspace(-2, 2, 4))


@dataclass(frozen=True)
class R2Result:
    """R^2 per latent column (NaN where undefined) and how it was computed; ``undefined``: {column index: why}."""

    scores: np.ndarray
    method: str
    undefined: dict[int, str] = field(default_factory=dict)

    def mean(self, columns=None) -> float:
        """Mean R^2 over ``columns`` (all by default), undefined ones left out; NaN when none is defined."""
        return defined_mean(self.scores if columns is None else self.scores[list(columns)])


def min_fit_samples(kind: str, code_dims: int) -> int:
    """The fewest fit samples an R^2 of ``kind`` is computed from (see the module's sample bounds)."""
    return code_dims + 2 if kind == "linear" else 3


def undefined_factors(y_fit: np.ndarray, y_test: np.ndarray) -> dict[int, str]:
    """{factor column: why its R^2 is undefined}: constant on the test split, or on the fit split."""
    why: dict[int, str] = {}
    for j in constant_columns(y_fit):
        why[int(j)] = "constant in the fit split"
    for j in constant_columns(y_test):
        why[int(j)] = "constant in the test split" if int(j) not in why else "constant in the fit and test splits"
    return dict(sorted(why.items()))


def _standardise(fit: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = StandardScaler().fit(fit)
    return s.transform(fit), s.transform(test)


def _kernel_fit_predict(z_fit: np.ndarray, y_fit: np.ndarray, z_test: np.ndarray, gamma: float, alpha: float,
                        exact: bool, n_components: int, seed: int) -> np.ndarray:
    """Multi-output RBF kernel ridge (exact, or Nystroem features + ridge) predictions for z_test."""
    if exact:
        pred = KernelRidge(kernel="rbf", gamma=gamma, alpha=alpha).fit(z_fit, y_fit).predict(z_test)
    else:
        feats = Nystroem(kernel="rbf", gamma=gamma, n_components=min(n_components, len(z_fit)), random_state=seed)
        pred = Ridge(alpha=alpha).fit(feats.fit_transform(z_fit), y_fit).predict(feats.transform(z_test))
    return np.asarray(pred).reshape(len(z_test), -1)


def r2_per_latent(z_fit: np.ndarray, y_fit: np.ndarray, z_test: np.ndarray, y_test: np.ndarray,
                  kind: str = "linear", exact_max: int = 2000, n_components: int = 500,
                  seed: int = 0) -> R2Result:
    """R^2 on the test split of predicting each column of y from z (``kind`` linear or kernel).

    Kernel: (gamma, alpha) chosen per latent by 3-fold CV on the fit split over the papers' grid,
    then refit on the whole fit split. A factor constant on either split scores NaN and is named in
    ``undefined``. Refused (``UserError``): fewer than 2 test samples, and fewer fit samples than
    ``min_fit_samples`` (linear: code dimensions + 2; kernel: 3).
    """
    if kind not in ("linear", "kernel"):
        raise UserError(f"kind must be linear or kernel, got {kind!r}")
    z_fit, z_test = np.asarray(z_fit, float), np.asarray(z_test, float)
    z_fit, z_test = z_fit.reshape(len(z_fit), -1), z_test.reshape(len(z_test), -1)
    y_fit = np.asarray(y_fit, float).reshape(len(z_fit), -1)
    y_test = np.asarray(y_test, float).reshape(len(z_test), -1)
    need = min_fit_samples(kind, z_fit.shape[1])
    if len(z_fit) < need:
        bound = (f"more fit samples than code dimensions + 1 (at least {need} for {z_fit.shape[1]} code dimensions)"
                 if kind == "linear" else "at least 3 fit samples (3-fold cross-validation)")
        raise UserError(f"{kind} R^2 needs {bound}, got {len(z_fit)}")
    if len(z_test) < 2:
        raise UserError(f"R^2 needs at least 2 test samples (a variance to explain), got {len(z_test)}")
    undefined = undefined_factors(y_fit, y_test)
    z_fit, z_test = _standardise(z_fit, z_test)
    y_fit, y_test = _standardise(y_fit, y_test)
    d = y_fit.shape[1]
    if kind == "linear":
        pred = LinearRegression().fit(z_fit, y_fit).predict(z_test)
        scores = np.array([r2_score(y_test[:, j], pred[:, j]) for j in range(d)])
        return _with_undefined(scores, "linear", undefined)
    exact = len(z_fit) <= exact_max
    grid = [(g, a) for g in GAMMAS for a in ALPHAS]
    cv = np.zeros((len(grid), d))
    for train, val in KFold(3, shuffle=True, random_state=seed).split(z_fit):
        for i, (g, a) in enumerate(grid):
            pred = _kernel_fit_predict(z_fit[train], y_fit[train], z_fit[val], g, a, exact, n_components, seed)
            cv[i] += [r2_score(y_fit[val, j], pred[:, j]) for j in range(d)]
    best = cv.argmax(0)
    scores = np.empty(d)
    for i in np.unique(best):
        cols = np.flatnonzero(best == i)
        pred = _kernel_fit_predict(z_fit, y_fit[:, cols], z_test, *grid[i], exact, n_components, seed)
        scores[cols] = [r2_score(y_test[:, c], pred[:, k]) for k, c in enumerate(cols)]
    n_comp = min(n_components, len(z_fit))
    return _with_undefined(scores, "kernel ridge (RBF, exact)" if exact else f"kernel ridge (RBF, Nystroem {n_comp})",
                           undefined)


def _with_undefined(scores: np.ndarray, method: str, undefined: dict[int, str]) -> R2Result:
    scores = scores.astype(float)
    scores[list(undefined)] = np.nan
    return R2Result(scores, method, undefined)


def r2_or_undefined(z_fit, y_fit, z_test, y_test, kind: str = "linear", **kwargs) -> R2Result:
    """``r2_per_latent``, or, where the splits are too small for it (a report of a small store, a wide layer), every
    factor NaN with the refusal as the reason: what a report writes instead of stopping."""
    try:
        return r2_per_latent(z_fit, y_fit, z_test, y_test, kind=kind, **kwargs)
    except UserError as exc:
        d = np.asarray(y_fit).reshape(len(y_fit), -1).shape[1]
        return R2Result(np.full(d, np.nan), f"{kind} (not computed)", dict.fromkeys(range(d), str(exc)))
