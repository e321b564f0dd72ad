"""Paper 004's classification probes on frozen representations in one call: linear, 2-layer MLP, best-k kNN
and GMM clustering (accuracy, NMI, ARI)."""

from __future__ import annotations

import numpy as np

from ident3d.evaluation.clustering import gmm_scores
from ident3d.evaluation.probes import knn_accuracy, linear_probe_accuracy, mlp_probe_accuracy


def classification_probes(z_fit: np.ndarray, y_fit: np.ndarray, z_test: np.ndarray, y_test: np.ndarray,
                          seed: int = 0) -> dict[str, float]:
    """Accuracies fit on one split and scored on the other; the GMM is fit and scored on the test split."""
    knn, k = knn_accuracy(z_fit, y_fit, z_test, y_test)
    gmm = gmm_scores(z_test, y_test, seed=seed)
    return {"linear": linear_probe_accuracy(z_fit, y_fit, z_test, y_test),
            "mlp": mlp_probe_accuracy(z_fit, y_fit, z_test, y_test, seed=seed),
            "knn": knn, "knn_k": float(k),
            "gmm_accuracy": gmm["accuracy"], "gmm_nmi": gmm["nmi"], "gmm_ari": gmm["ari"]}
