"""Scoring representations against ground truth: pure functions on arrays (R^2, MCC, probes,
clustering, uniformity, reconstruction), usable without any run directory."""

from evaluation.clustering import gmm_scores
from evaluation.mcc import mcc
from evaluation.probes import knn_accuracy, linear_probe_accuracy, mlp_probe_accuracy
from evaluation.regression import r2_per_latent
from evaluation.uniformity import reconstruction_mse, uniformity

__all__ = ["gmm_scores", "knn_accuracy", "linear_probe_accuracy", "mcc", "mlp_probe_accuracy", "r2_per_latent",
           "reconstruction_mse", "uniformity"]
