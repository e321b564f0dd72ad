"""The metrics of ``ident3d.evaluation`` on plain arrays, with one calling convention for all of them.

Every argument is passed by name (keyword-only), so true factors and learned codes cannot be swapped by position:

- ``factors``: the true factors (N, K) (for a probe: the class labels (N,)); ``codes``: the representation (N, L);
- ``factors_test``, ``codes_test``: held-out samples, for metrics that fit something on ``factors``/``codes`` (a
  regressor, a matching, a classifier) and score it on other samples; a metric that fits nothing (MIG) takes one
  set, SAP and MCC take the test split optionally (in sample without it).

Each function returns what the function of ``ident3d.evaluation`` it wraps returns (the maths lives there):
:func:`r2` (linear or kernel R^2 per factor), :func:`content_style` (block R^2 of the content and the style latents,
and paper 000's columns), :func:`mcc`, :func:`dci`, :func:`mig`, :func:`sap` and :func:`probe` (linear, kNN or MLP
accuracy). Inputs are checked first, each problem one ``UserError`` line: non-finite values, mismatched sample
counts, factors with more columns than samples (a transposed or swapped array), probe labels that are not whole
numbers (codes passed as labels)::

    import ident3d.metrics as M
    M.r2(factors=z_fit, codes=h_fit, factors_test=z_test, codes_test=h_test, kind="kernel").scores
    M.mig(factors=z_test, codes=h_test).score
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ident3d import evaluation  # the functions wrapped here: evaluation.mig, evaluation.r2_per_latent, ...
from ident3d.causal.errors import UserError
from ident3d.evaluation.dci import DCIResult
from ident3d.evaluation.metric_inputs import as_matrix
from ident3d.evaluation.mig import MIGResult
from ident3d.evaluation.regression import R2Result
from ident3d.evaluation.sap import SAPResult

PROBES = ("linear", "knn", "mlp")


# ----- checks ---------------------------------------------------------------------------------------------------
def _checked(metric: str, factors: Any, codes: Any, split: str = "") -> tuple[np.ndarray, np.ndarray]:
    """``factors`` and ``codes`` of one split as finite (N, K) and (N, L) float arrays with the same N; factors with
    more columns than samples are refused (a transposed array, or codes passed as factors)."""
    f, c = _matrix(metric, factors, f"factors{split}"), _matrix(metric, codes, f"codes{split}")
    if f.shape[1] > f.shape[0]:
        raise UserError(f"ident3d.metrics.{metric}: factors{split} has {f.shape[0]} samples and {f.shape[1]} columns; "
                        "pass samples as rows (N, K), and the true factors as factors, the representation as codes")
    if len(f) != len(c):
        raise UserError(f"ident3d.metrics.{metric}: factors{split} has {len(f)} samples but codes{split} has {len(c)}")
    return f, c


def _matrix(metric: str, x: Any, name: str) -> np.ndarray:
    """``x`` as a finite 2-D float array (``evaluation.metric_inputs.as_matrix``), a refusal naming the metric."""
    try:
        return as_matrix(x, name)
    except UserError as exc:
        raise UserError(f"ident3d.metrics.{metric}: {exc}") from None


def _checked_splits(metric: str, factors: Any, codes: Any, factors_test: Any,
                    codes_test: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Both splits checked (:func:`_checked`); the test split may be absent as a whole, not half given."""
    f, c = _checked(metric, factors, codes)
    if (factors_test is None) != (codes_test is None):
        raise UserError(f"ident3d.metrics.{metric}: give both factors_test and codes_test, or neither")
    if factors_test is None:
        return f, c, None, None
    ft, ct = _checked(metric, factors_test, codes_test, "_test")
    if ft.shape[1] != f.shape[1] or ct.shape[1] != c.shape[1]:
        raise UserError(f"ident3d.metrics.{metric}: the test split has {ft.shape[1]} factors and {ct.shape[1]} code "
                        f"dimensions, the fit split {f.shape[1]} and {c.shape[1]}")
    return f, c, ft, ct


def _required(metric: str, factors_test: Any, codes_test: Any) -> None:
    """Refuse a metric that scores on held-out samples without them."""
    if factors_test is None or codes_test is None:
        raise UserError(f"ident3d.metrics.{metric} scores on held-out samples: pass factors_test and codes_test")


def _labels(metric: str, labels: Any, split: str) -> np.ndarray:
    """Class labels (N,) as whole numbers; a float array (codes passed as labels) is refused."""
    y = _matrix(metric, labels, f"factors{split}")
    if y.shape[1] != 1 or not np.array_equal(y, np.round(y)):
        raise UserError(f"ident3d.metrics.{metric}: factors{split} must be class labels, one whole number per sample "
                        f"(N,); got shape {np.shape(labels)}" + ("" if y.shape[1] != 1 else " with non-integer values"))
    return y[:, 0].astype(np.int64)


# ----- metrics --------------------------------------------------------------------------------------------------
def r2(*, factors: Any, codes: Any, factors_test: Any, codes_test: Any, kind: str = "linear", exact_max: int = 2000,
       n_components: int = 500, seed: int = 0) -> R2Result:
    """Test R^2 of predicting each factor from the codes (``kind`` "linear": least squares; "kernel": RBF kernel
    ridge with the papers' grid, Nystroem above ``exact_max`` fit samples): ``ident3d.evaluation.regression``."""
    _required("r2", factors_test, codes_test)
    f, c, ft, ct = _checked_splits("r2", factors, codes, factors_test, codes_test)
    if kind not in ("linear", "kernel"):
        raise UserError(f"ident3d.metrics.r2: kind must be linear or kernel, got {kind!r}")
    return evaluation.r2_per_latent(c, f, ct, ft, kind=kind, exact_max=exact_max, n_components=n_components,
                                     seed=seed)


@dataclass(frozen=True)
class ContentStyle:
    """Block R^2 of the content and the style latents (the mean R^2 of the block's factors, as a multi-output R^2
    averages them; None for an empty block), R^2 per factor, per report column, and each column's mark."""

    content: float | None
    style: float | None
    per_factor: dict[str, float]
    columns: dict[str, float]
    marks: dict[str, str]  # column title -> "C", "S" or "C/S"
    method: str


def content_style(*, factors: Any, codes: Any, factors_test: Any, codes_test: Any, names: Sequence[str],
                  style: Iterable[str], groups: Mapping[str, Sequence[str]] | None = None,
                  kind: str = "linear") -> ContentStyle:
    """R^2 (:func:`r2`) summed up as ``ident3d evaluate`` does: over the ``style`` latents (those the views change,
    e.g. :func:`style_of`), the rest (content), and the report's columns built from ``names`` (the factors' column
    names) and ``groups`` (a store's ``latent_groups``; none: a column per latent)."""
    from ident3d.evaluation.report import columns, marks, table_row

    result = r2(factors=factors, codes=codes, factors_test=factors_test, codes_test=codes_test, kind=kind)
    names, style = list(names), set(style)
    if len(names) != len(result.scores):
        raise UserError(f"ident3d.metrics.content_style: {len(names)} names for {len(result.scores)} factor columns")
    unknown = sorted(style - set(names))
    if unknown:
        raise UserError(f"ident3d.metrics.content_style: style latent(s) {', '.join(unknown)} are not among the "
                        f"names {', '.join(names)}")
    cols = columns(names, groups or {})
    block = {part: [s for n, s in zip(names, result.scores, strict=True) if (n in style) == (part == "style")]
             for part in ("content", "style")}
    mean = {part: float(np.mean(v)) if v else None for part, v in block.items()}
    return ContentStyle(mean["content"], mean["style"], dict(zip(names, result.scores.tolist(), strict=True)),
                        table_row(result.scores, names, cols, None), marks(cols, style), result.method)


def style_of(views: str, store: Any) -> set[str]:
    """The latents the view maker ``views`` changes on ``store`` (a path, URL or ``ident3d.open_store`` view): the
    style of ``ident3d evaluate``'s report (``ident3d.evaluation.report.style_latents``); the rest is content."""
    from ident3d.evaluation.report import style_latents
    from ident3d.store.view import StoreView, open_store

    view = store if isinstance(store, StoreView) else open_store(str(store))
    return style_latents(views, view.scm, view.views)


def mcc(*, factors: Any, codes: Any, factors_test: Any = None, codes_test: Any = None,
        method: str = "pearson") -> float:
    """Mean |correlation| of factors and codes matched one to one (Hungarian); with a test split the matching is
    chosen on ``factors``/``codes`` and scored on the test split (``method`` pearson or spearman)."""
    f, c, ft, ct = _checked_splits("mcc", factors, codes, factors_test, codes_test)
    if method not in ("pearson", "spearman"):
        raise UserError(f"ident3d.metrics.mcc: method must be pearson or spearman, got {method!r}")
    return evaluation.mcc(f, c, method=method, z_true_test=ft, z_pred_test=ct)


def dci(*, factors: Any, codes: Any, factors_test: Any, codes_test: Any, importance: str = "lasso",
        alpha: float | None = None, n_estimators: int = 100, seed: int = 0) -> DCIResult:
    """DCI disentanglement, completeness and informativeness: regressors fit on ``factors``/``codes``, scored on the
    test split (``importance`` lasso, forest or gbt)."""
    _required("dci", factors_test, codes_test)
    f, c, ft, ct = _checked_splits("dci", factors, codes, factors_test, codes_test)
    return evaluation.dci(f, c, ft, ct, importance=importance, alpha=alpha, n_estimators=n_estimators, seed=seed)


def mig(*, factors: Any, codes: Any, n_bins: int = 20, discretize_factors: bool | None = None) -> MIGResult:
    """The mutual information gap of the codes for the factors, on one set of samples (nothing is fitted)."""
    f, c = _checked("mig", factors, codes)
    return evaluation.mig(f, c, n_bins=n_bins, discretize_factors=discretize_factors)


def sap(*, factors: Any, codes: Any, factors_test: Any = None, codes_test: Any = None) -> SAPResult:
    """SAP, the separated attribute predictability: in sample, or lines fit on ``factors``/``codes`` and scored on
    the test split."""
    f, c, ft, ct = _checked_splits("sap", factors, codes, factors_test, codes_test)
    return evaluation.sap(f, c, ft, ct)


def probe(*, factors: Any, codes: Any, factors_test: Any, codes_test: Any, kind: str = "linear",
          seed: int = 0) -> float:
    """Test accuracy of a classifier of the class labels ``factors`` (N,) from the codes, fit on the first split:
    ``kind`` linear (logistic regression), knn (best k in 1..15) or mlp (one hidden layer of 256)."""
    _required("probe", factors_test, codes_test)
    if kind not in PROBES:
        raise UserError(f"ident3d.metrics.probe: kind must be one of {', '.join(PROBES)}, got {kind!r}")
    y, yt = _labels("probe", factors, ""), _labels("probe", factors_test, "_test")
    _, c, _, ct = _checked_splits("probe", y, codes, yt, codes_test)
    if kind == "linear":
        return evaluation.linear_probe_accuracy(c, y, ct, yt)
    if kind == "mlp":
        return evaluation.mlp_probe_accuracy(c, y, ct, yt, seed=seed)
    return evaluation.knn_accuracy(c, y, ct, yt)[0]


__all__ = ["ContentStyle", "content_style", "dci", "mcc", "mig", "probe", "r2", "sap", "style_of"]
