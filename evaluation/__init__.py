"""Scoring representations against ground truth: pure functions on arrays (R^2, MCC, probes,
clustering, uniformity, reconstruction), usable without any run directory."""

from ident3d.evaluation.citris_metrics import citris_scores, diag_and_sep, group_matrices
from ident3d.evaluation.clustering import gmm_scores
from ident3d.evaluation.dci import dci, dci_from_importance, importance_matrix
from ident3d.evaluation.dci_es import dci_es_explicitness, explicitness, loss_capacity_curves
from ident3d.evaluation.mcc import mcc
from ident3d.evaluation.mig import discretize, mig, mig_from_discrete, mutual_info_matrix
from ident3d.evaluation.probes import knn_accuracy, linear_probe_accuracy, mlp_probe_accuracy
from ident3d.evaluation.regression import r2_per_latent
from ident3d.evaluation.sap import sap, sap_from_scores, sap_scores
from ident3d.evaluation.uniformity import reconstruction_mse, uniformity

__all__ = ["gmm_scores", "knn_accuracy", "linear_probe_accuracy", "mcc", "mlp_probe_accuracy", "r2_per_latent",
           "reconstruction_mse", "uniformity",
           "citris_scores", "dci", "dci_es_explicitness", "dci_from_importance", "diag_and_sep", "discretize",
           "explicitness", "group_matrices", "importance_matrix", "loss_capacity_curves", "mig", "mig_from_discrete",
           "mutual_info_matrix", "sap", "sap_from_scores", "sap_scores"]
