"""Per-latent R^2 of predicting each true latent from the representation (papers 000/001).

Both are standardised on the fit split; the score is on a held-out split. ``linear`` is ordinary
least squares; ``kernel`` is RBF kernel ridge with the papers' grid (alpha in {1, 0.1, 0.01, 0.001},
gamma in logspace(-2, 2, 4), 3-fold CV). Above ``exact_max`` fit samples the kernel is approximated
with a Nystroem feature map (``n_components`` landmarks) + ridge, which the result records.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.kernel_approximation import Nystroem
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold
from sklearn.preprocessing import StandardScaler

ALPHAS = (1.0, 0.1, 0.01, 0.001)
GAMMAS = tuple(np.logspace(-2, 2, 4))


@dataclass(frozen=True)
class R2Result:
    """R^2 per latent column and how it was computed."""

    scores: np.ndarray
    method: str


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
    then refit on the whole fit split.
    """
    z_fit, z_test = _standardise(np.asarray(z_fit, float), np.asarray(z_test, float))
    y_fit, y_test = _standardise(np.asarray(y_fit, float).reshape(len(z_fit), -1),
                                 np.asarray(y_test, float).reshape(len(z_test), -1))
    d = y_fit.shape[1]
    if kind == "linear":
        pred = LinearRegression().fit(z_fit, y_fit).predict(z_test)
        return R2Result(np.array([r2_score(y_test[:, j], pred[:, j]) for j in range(d)]), "linear")
    if kind != "kernel":
        raise ValueError(f"kind must be linear or kernel, got {kind!r}")
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
    return R2Result(scores, "kernel ridge (RBF, exact)" if exact else f"kernel ridge (RBF, Nystroem {n_comp})")
