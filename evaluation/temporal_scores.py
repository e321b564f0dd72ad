"""Scores of latents learned from interventional sequences against the true factors, at the level of CITRIS's causal
variables (a variable may span several factors, e.g. position = x, y, z).

Variable-level R^2 matrix: latent dimensions are grouped by an assignment to variables (a CITRIS-style model's
learned one, or ``posthoc_assignment`` for models without one); as in
``ident3d.evaluation.citris_metrics.group_matrices`` a regressor from each group's dimensions predicts every factor (fit
split -> test split), and entry (g, k) is the mean test R^2 over variable k's factors. diag / sep are
``citris_metrics.diag_and_sep`` of that K x K matrix.
``temporal_scores`` adds the factor-level scores every learner gets the same way: CITRIS's R^2 diag / sep with
single dimensions matched to factors (``citris_scores`` without an assignment), DCI (Lasso) and MIG.
"""

from __future__ import annotations

import numpy as np

from ident3d.causal.dynamic import DynamicSCM
from ident3d.evaluation.citris_metrics import citris_scores, diag_and_sep, group_matrices
from ident3d.evaluation.dci import dci
from ident3d.evaluation.mig import mig
from ident3d.training.temporal.variables import causal_variables, node_variable


def correlation_ratio(x: np.ndarray, y: np.ndarray, n_bins: int = 20) -> np.ndarray:
    """eta^2 of each column of y (N, K) given x (N,): the share of y's variance explained by its mean within
    ``n_bins`` quantile bins of x (a nonlinear R^2 of predicting y from x, in-sample)."""
    edges = np.quantile(x, np.linspace(0, 1, n_bins + 1)[1:-1])
    bins = np.searchsorted(edges, x)
    y = y - y.mean(0)
    total = (y**2).sum(0)
    explained = np.zeros(y.shape[1])
    for b in np.unique(bins):
        sel = bins == b
        explained += sel.sum() * y[sel].mean(0) ** 2
    return np.where(total > 0, explained / np.where(total > 0, total, 1.0), 0.0)


def posthoc_assignment(z_fit: np.ndarray, c_fit: np.ndarray, node_var: np.ndarray) -> np.ndarray:
    """(L,) variable of each latent dimension for models that learn none: the variable whose best-explained factor
    the dimension explains most (correlation ratio on the fit split)."""
    n_vars = int(node_var.max()) + 1
    out = np.empty(c_fit.shape[1], dtype=int)
    for d in range(c_fit.shape[1]):
        eta = correlation_ratio(c_fit[:, d], z_fit)
        out[d] = int(np.argmax([eta[node_var == k].max() for k in range(n_vars)]))
    return out


def variable_r2(z_fit, c_fit, z_test, c_test, node_var: np.ndarray, assignment: np.ndarray,
                regressor: str = "mlp", seed: int = 0) -> np.ndarray:
    """(K, K) R^2 matrix: row g regresses every factor on the dimensions assigned to variable g, column k averages
    the test R^2 over variable k's factors (dimensions assigned -1 are dropped)."""
    n_vars = int(node_var.max()) + 1
    groups = [np.flatnonzero(assignment == g) for g in range(n_vars)]
    r2, _ = group_matrices(z_fit, c_fit, z_test, c_test, groups, regressor, seed)
    return np.stack([r2[:, node_var == k].mean(1) for k in range(n_vars)], axis=1)


def temporal_scores(z_fit: np.ndarray, c_fit: np.ndarray, z_test: np.ndarray, c_test: np.ndarray,
                    node_var: np.ndarray, assignment: np.ndarray | None = None, regressor: str = "mlp",
                    seed: int = 0) -> dict[str, float | np.ndarray | str]:
    """Variable-level diag / sep (learned ``assignment``, or post hoc when None), factor-level CITRIS diag / sep
    (Hungarian), DCI D / C / I (Lasso) and MIG of codes ``c`` for factors ``z``."""
    kind = "learned" if assignment is not None else "post hoc"
    a = posthoc_assignment(z_fit, c_fit, node_var) if assignment is None else np.asarray(assignment)
    r2 = variable_r2(z_fit, c_fit, z_test, c_test, node_var, a, regressor, seed)
    diag, sep, _ = diag_and_sep(r2)
    nodes = citris_scores(z_fit, c_fit, z_test, c_test, None, regressor, seed)
    d = dci(z_fit, c_fit, z_test, c_test, seed=seed)
    return {"diag": diag, "sep": sep, "r2": r2, "assignment": a, "assignment_kind": kind,
            "diag_factors": nodes.r2_diag, "sep_factors": nodes.r2_sep, "dci_d": d.disentanglement,
            "dci_c": d.completeness, "dci_i": d.informativeness, "mig": mig(z_test, c_test).score}


def node_factors(latents: np.ndarray, latent_names: list[str], classes: np.ndarray | None, class_node: str | None,
                 node_names: list[str]) -> np.ndarray:
    """(N, len(node_names)) true factors in a dynamic SCM's node order: a store's latents by name, its class node
    (if any) from the class labels."""
    out = np.zeros((len(latents), len(node_names)), np.float32)
    for j, name in enumerate(latent_names):
        out[:, node_names.index(name)] = latents[:, j]
    if class_node:
        out[:, node_names.index(class_node)] = classes
    return out


def sequence_store_scores(sequences: dict, factors: np.ndarray, codes: np.ndarray, n_fit: int,
                          assignment: np.ndarray | None, regressor: str = "mlp", seed: int = 0) -> dict:
    """``temporal_scores`` of codes on a sequence store (``sequences``: its attributes' dynamic spec and names;
    ``factors`` in node order), the first ``n_fit`` rows fitting the regressors; a JSON-ready dict with the R^2
    matrix under the causal variables' names."""
    variables = causal_variables(DynamicSCM(sequences["spec"]))
    node_var = node_variable(variables, len(sequences["intervention_names"]))
    s = temporal_scores(factors[:n_fit], codes[:n_fit], factors[n_fit:], codes[n_fit:], node_var, assignment,
                        regressor, seed)
    return summary(s, list(variables))


HEADLINE = ("diag", "sep", "diag_factors", "sep_factors", "dci_d", "mig")  # the numbers a table shows


def summary(scores: dict, variables: list[str]) -> dict:
    """``temporal_scores`` as a JSON-ready dict: the ``HEADLINE`` numbers as floats, the assignment and its kind, and
    the R^2 matrix (rounded) under the causal variables' names."""
    out = {k: float(scores[k]) for k in HEADLINE}
    out.update(assignment_kind=scores["assignment_kind"], assignment=np.asarray(scores["assignment"]).tolist(),
               variables=list(variables), r2=np.round(scores["r2"], 4).tolist())
    return out
