"""Downstream probes on frozen representations: linear and 2-layer MLP classifiers, and kNN with
the best k; each is fit on one split and scored on another after standardisation."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler


def _std(z_fit: np.ndarray, z_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = StandardScaler().fit(z_fit)
    return s.transform(z_fit), s.transform(z_test)


def linear_probe_accuracy(z_fit, y_fit, z_test, y_test) -> float:
    """Logistic-regression accuracy (the "Class" column of paper 000's table)."""
    a, b = _std(z_fit, z_test)
    return float(LogisticRegression(max_iter=2000).fit(a, y_fit).score(b, y_test))


def mlp_probe_accuracy(z_fit, y_fit, z_test, y_test, hidden: int = 256, seed: int = 0) -> float:
    """Two-layer MLP probe accuracy (paper 004)."""
    a, b = _std(z_fit, z_test)
    clf = MLPClassifier(hidden_layer_sizes=(hidden,), max_iter=500, random_state=seed, early_stopping=False)
    with warnings.catch_warnings():  # a fixed iteration budget, as in the papers' probes: not the user's concern
        warnings.simplefilter("ignore", ConvergenceWarning)
        return float(clf.fit(a, y_fit).score(b, y_test))


def knn_accuracy(z_fit, y_fit, z_test, y_test, ks: range = range(1, 16)) -> tuple[float, int]:
    """Best kNN accuracy over k (paper 004: k in 1..15) and the k that gave it."""
    a, b = _std(z_fit, z_test)
    best = max((float(KNeighborsClassifier(k).fit(a, y_fit).score(b, y_test)), -k) for k in ks if k <= len(a))
    return best[0], -best[1]
