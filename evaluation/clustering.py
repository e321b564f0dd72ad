"""GMM clustering of representations against classes: accuracy after Hungarian matching of
clusters to classes, NMI and ARI (paper 004)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.mixture import GaussianMixture
from sklearn.preprocessing import StandardScaler


def gmm_scores(z: np.ndarray, y: np.ndarray, n_components: int | None = None, seed: int = 0) -> dict[str, float]:
    """Fit a GMM with one component per class; score its clusters against the labels."""
    y = np.asarray(y)
    k = n_components or len(np.unique(y))
    pred = GaussianMixture(k, random_state=seed, n_init=3).fit_predict(StandardScaler().fit_transform(z))
    labels = np.unique(y)
    table = np.zeros((k, len(labels)))
    for i, c in enumerate(labels):
        np.add.at(table[:, i], pred[y == c], 1)
    rows, cols = linear_sum_assignment(-table)
    return {"accuracy": float(table[rows, cols].sum() / len(y)),
            "nmi": float(normalized_mutual_info_score(y, pred)),
            "ari": float(adjusted_rand_score(y, pred))}
