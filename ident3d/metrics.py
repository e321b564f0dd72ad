"""The metrics of ``ident3d.evaluation`` on plain arrays, with one calling convention for all of them.

Every argument is passed by name (keyword-only), so true factors and learned codes cannot be swapped by position:

- ``factors``: the true factors (N, K) (for a probe: the class labels (N,)); ``codes``: the representation (N, L);
- ``factors_test``, ``codes_test``: held-out samples, for metrics that fit something on ``factors``/``codes`` (a
  regressor, a matching, a classifier) and score it on other samples; a metric that fits nothing (MIG) takes one
  set, SAP and MCC take the test split optionally (in sample without it).

Each function returns what the function of ``ident3d.evaluation`` it wraps returns (the maths lives there):
:func:`r2` (linear or kernel R^2 per factor), :func:`content_style` (block R^2 of the content and the style latents,
and paper 000's columns), :func:`mcc`, :func:`dci`, :func:`mig`, :func:`sap` and :func:`probe` (linear, kNN or MLP
accuracy); the object-centric ones take per-object arrays instead (``objects`` (N, K, D), ``slots`` (N, S, L),
masks (N, H, W)) and return results with ``.score``: :func:`fg_ari`, :func:`slot_r2`, :func:`slot_r2_masks`,
:func:`sis` (Brady et al.'s slot identifiability score) and :func:`block_mcc`. docs/metrics.md gives each one's
formula, the reference code it equals and its edges.

Inputs are checked first, each problem one ``UserError`` line: non-finite values, mismatched sample counts, 1-D
factors or codes (one sample or one column? pass ``x[:, None]`` for one column; probe labels stay (N,)), factors with
more columns than samples (a transposed or swapped array), probe labels that are not whole numbers (codes passed as
labels), too few samples for what is fitted (each function says its bound), knobs out of range (every ``seed`` a
whole number in [0, 2**32 - 1], what scikit-learn's estimators take). A factor constant on a split has no R^2 (NaN,
named in ``undefined``, left out of every mean) and no correlation (``mcc`` refuses it)::

    import ident3d.metrics as M
    M.r2(factors=z_fit, codes=h_fit, factors_test=z_test, codes_test=h_test, kind="kernel").scores
    M.mig(factors=z_test, codes=h_test).score
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ident3d import evaluation  # the functions wrapped here: evaluation.mig, evaluation.r2_per_latent, ...
from ident3d.causal.errors import UserError
from ident3d.evaluation.dci import DCIResult
from ident3d.evaluation.dci import check_options as check_dci_options
from ident3d.evaluation.metric_inputs import as_matrix, defined_mean
from ident3d.evaluation.mig import MIGResult
from ident3d.evaluation.regression import R2Result
from ident3d.evaluation.sap import SAPResult

PROBES = ("linear", "knn", "mlp")


# ----- checks ---------------------------------------------------------------------------------------------------
def _checked(metric: str, factors: Any, codes: Any, split: str = "") -> tuple[np.ndarray, np.ndarray]:
    """``factors`` and ``codes`` of one split as finite (N, K) and (N, L) float arrays with the same N; factors with
    more columns than samples are refused (a transposed array, or codes passed as factors)."""
    f = _matrix(metric, factors, f"factors{split}", strict=True)
    c = _matrix(metric, codes, f"codes{split}", strict=True)
    if f.shape[1] > f.shape[0]:
        raise UserError(f"ident3d.metrics.{metric}: factors{split} has {f.shape[0]} samples and {f.shape[1]} columns; "
                        "pass samples as rows (N, K), and the true factors as factors, the representation as codes")
    if len(f) != len(c):
        raise UserError(f"ident3d.metrics.{metric}: factors{split} has {len(f)} samples but codes{split} has {len(c)}")
    return f, c


def _matrix(metric: str, x: Any, name: str, strict: bool = False) -> np.ndarray:
    """``x`` as a finite 2-D float array (``evaluation.metric_inputs.as_matrix``; ``strict``: 1-D refused), a refusal
    naming the metric."""
    with _named(metric):
        return as_matrix(x, name, strict=strict)


@contextmanager
def _named(metric: str) -> Iterator[None]:
    """A refusal of the wrapped ``ident3d.evaluation`` function (too few samples, ...) names the public function."""
    try:
        yield
    except UserError as exc:
        text = str(exc)
        raise UserError(text if text.startswith("ident3d.metrics.") else f"ident3d.metrics.{metric}: {text}") from None


SEED_MAX = 2**32 - 1  # scikit-learn's random_state and NumPy's legacy seeds take no larger seed


def _whole(metric: str, name: str, value: Any, low: int, high: int | None = None) -> None:
    """Refuse a knob that is not a whole number in [``low``, ``high``] (``high`` None: no upper bound; a bool is not a
    number here)."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low
            or (high is not None and value > high)):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise UserError(f"ident3d.metrics.{metric}: {name} must be a whole number {bound}, got {value!r}")


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
    ridge with the papers' grid, Nystroem with ``n_components`` (>= 1) landmarks above ``exact_max`` (>= 0) fit
    samples): ``ident3d.evaluation.regression``. Needs at least 2 test samples and, linear, more fit samples than code
    dimensions + 1 (kernel: 3, for 3-fold CV). A factor constant on either split scores NaN, named in ``undefined``."""
    _required("r2", factors_test, codes_test)
    f, c, ft, ct = _checked_splits("r2", factors, codes, factors_test, codes_test)
    if kind not in ("linear", "kernel"):
        raise UserError(f"ident3d.metrics.r2: kind must be linear or kernel, got {kind!r}")
    _whole("r2", "exact_max", exact_max, 0)
    _whole("r2", "n_components", n_components, 1)
    _whole("r2", "seed", seed, 0, SEED_MAX)
    with _named("r2"):
        return evaluation.r2_per_latent(c, f, ct, ft, kind=kind, exact_max=exact_max, n_components=n_components,
                                         seed=seed)


@dataclass(frozen=True)
class ContentStyle:
    """Block R^2 of the content and the style latents (the mean R^2 of the block's defined factors, as a
    multi-output R^2 averages them; None for an empty block, NaN when none of its factors is defined), R^2 per factor
    (NaN where undefined), per report column (undefined factors left out), each column's mark, and ``undefined``:
    {factor name: why its R^2 is undefined (constant on a split)}."""

    content: float | None
    style: float | None
    per_factor: dict[str, float]
    columns: dict[str, float]
    marks: dict[str, str]  # column title -> "C", "S" or "C/S"
    method: str
    undefined: dict[str, str] = field(default_factory=dict)


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
    mean = {part: defined_mean(v) if v else None for part, v in block.items()}  # undefined (NaN) factors left out
    return ContentStyle(mean["content"], mean["style"], dict(zip(names, result.scores.tolist(), strict=True)),
                        table_row(result.scores, names, cols, None), marks(cols, style), result.method,
                        {names[j]: why for j, why in result.undefined.items()})


def style_of(views: str, store: Any) -> set[str]:
    """The latents the view maker ``views`` changes on ``store`` (a path, URL or ``ident3d.open_store`` view): the
    style of ``ident3d evaluate``'s report (``ident3d.evaluation.report.style_latents``); the rest is content."""
    from ident3d.evaluation.report import style_latents
    from ident3d.store.view import StoreView, open_store

    view = store if isinstance(store, StoreView) else open_store(str(store))
    return style_latents(views, view.scm, view.views)


def mcc(*, factors: Any, codes: Any, factors_test: Any = None, codes_test: Any = None,
        method: str = "pearson") -> float:
    """cl-ica's MCC: mean |correlation| of factors and codes matched one to one (Hungarian); with a test split the
    matching is chosen on ``factors``/``codes`` and scored on the test split (``method`` pearson or spearman).

    Refused, as cl-ica does: codes of another width than the factors (score the factors the codes are meant to hold,
    e.g. the content block); also a factor constant on a split (no correlation) and fewer than 10 samples per split.
    A constant code correlates 0 with every factor."""
    f, c, ft, ct = _checked_splits("mcc", factors, codes, factors_test, codes_test)
    if method not in ("pearson", "spearman"):
        raise UserError(f"ident3d.metrics.mcc: method must be pearson or spearman, got {method!r}")
    with _named("mcc"):
        return evaluation.mcc(f, c, method=method, z_true_test=ft, z_pred_test=ct)


def dci(*, factors: Any, codes: Any, factors_test: Any, codes_test: Any, importance: str = "lasso",
        alpha: float | None = None, n_estimators: int = 100, seed: int = 0, n_bins: int = 20) -> DCIResult:
    """DCI disentanglement, completeness and informativeness: regressors fit on ``factors``/``codes``, scored on the
    test split (``importance`` lasso or forest, the paper's; or gbt, disentanglement_lib's: classifiers, accuracy as
    informativeness, factors with more than ``n_bins`` values cut into ``n_bins`` bins of the fit split). ``alpha``
    > 0 or None (Lasso's, None: by CV), ``n_estimators`` >= 1, ``n_bins`` >= 2; at least 10 fit and 2 test samples."""
    _required("dci", factors_test, codes_test)
    with _named("dci"):  # the knobs first (importance, alpha, n_estimators, n_bins), before any array is read
        check_dci_options(importance, alpha, n_estimators, n_bins)
    _whole("dci", "seed", seed, 0, SEED_MAX)
    f, c, ft, ct = _checked_splits("dci", factors, codes, factors_test, codes_test)
    with _named("dci"):
        return evaluation.dci(f, c, ft, ct, importance=importance, alpha=alpha, n_estimators=n_estimators, seed=seed,
                              n_bins=n_bins)


def mig(*, factors: Any, codes: Any, n_bins: int = 20, discretize_factors: bool | None = None) -> MIGResult:
    """The mutual information gap of the codes for the factors, on one set of samples (nothing is fitted); ``n_bins``
    (>= 2) equal-width bins per code."""
    f, c = _checked("mig", factors, codes)
    _whole("mig", "n_bins", n_bins, 2)
    if discretize_factors is not None and not isinstance(discretize_factors, bool | np.bool_):
        raise UserError(f"ident3d.metrics.mig: discretize_factors must be True, False or None (by the factor's "
                        f"number of values), got {discretize_factors!r}")
    with _named("mig"):
        return evaluation.mig(f, c, n_bins=n_bins, discretize_factors=discretize_factors)


def sap(*, factors: Any, codes: Any, factors_test: Any = None, codes_test: Any = None) -> SAPResult:
    """SAP, the separated attribute predictability: in sample, or lines fit on ``factors``/``codes`` and scored on
    the test split."""
    f, c, ft, ct = _checked_splits("sap", factors, codes, factors_test, codes_test)
    with _named("sap"):
        return evaluation.sap(f, c, ft, ct)


def probe(*, factors: Any, codes: Any, factors_test: Any, codes_test: Any, kind: str = "linear",
          seed: int = 0) -> float:
    """Test accuracy of a classifier of the class labels ``factors`` (N,) from the codes, fit on the first split:
    ``kind`` linear (logistic regression), knn (best k in 1..15) or mlp (one hidden layer of 256)."""
    _required("probe", factors_test, codes_test)
    if kind not in PROBES:
        raise UserError(f"ident3d.metrics.probe: kind must be one of {', '.join(PROBES)}, got {kind!r}")
    _whole("probe", "seed", seed, 0, SEED_MAX)
    y, yt = _labels("probe", factors, ""), _labels("probe", factors_test, "_test")
    _, c, _, ct = _checked_splits("probe", y[:, None], codes, yt[:, None], codes_test)  # labels (N,) as one column
    if kind == "linear":
        return evaluation.linear_probe_accuracy(c, y, ct, yt)
    if kind == "mlp":
        return evaluation.mlp_probe_accuracy(c, y, ct, yt, seed=seed)
    return evaluation.knn_accuracy(c, y, ct, yt)[0]


# ----- object-centric metrics (SPEC section 8) --------------------------------------------------------------------
# Object latents are (N, K, D) (image, object, latent), slot codes (N, S, L); absent objects are marked by ``present``
# (N, K) (their latent rows are all-zero by convention) and left out of every fit, matching and R^2. The maths lives in
# ``ident3d.evaluation.object_metrics``; imported here, with this section, rather than at the top of the module.
from ident3d.evaluation import object_metrics as _objects  # noqa: E402
from ident3d.evaluation.object_metrics import BlockMccResult, FgAriResult, SISResult, SlotR2Result  # noqa: E402


def _refuse(metric: str, text: str) -> UserError:
    return UserError(f"ident3d.metrics.{metric}: {text}")


def _tensor(metric: str, x: Any, name: str, layout: str, flat_hint: str) -> np.ndarray:
    """``x`` as a finite, non-empty 3-D float array; a 2-D array (flattened per image) is refused with ``flat_hint``."""
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise _refuse(metric, f"{name} must be a numeric array {layout}") from None
    if a.ndim != 3:
        raise _refuse(metric, f"{name} must be a 3-D array {layout}, got shape {a.shape}"
                      + (f"; {flat_hint}" if a.ndim == 2 else ""))
    if 0 in a.shape:
        raise _refuse(metric, f"{name} is empty, shape {a.shape}")
    if not np.isfinite(a).all():
        raise _refuse(metric, f"{name} contains NaN or infinite values")
    return a


def _presence(metric: str, present: Any, shape: tuple[int, int], name: str) -> np.ndarray:
    """``present`` as (N, K) bool (None: every object present); only booleans or 0/1 values are taken."""
    if present is None:
        return np.ones(shape, bool)
    p = np.asarray(present)
    if p.shape != shape:
        raise _refuse(metric, f"{name} must be (N, K) = {shape} booleans (True where the object is in the image), "
                              f"got shape {p.shape}")
    if p.dtype != bool and not (np.issubdtype(p.dtype, np.number) and np.isin(p, (0, 1)).all()):
        raise _refuse(metric, f"{name} must be booleans (or 0/1), True where the object is in the image; got values "
                              f"such as {p.ravel()[~np.isin(p.ravel(), (0, 1))][:1].tolist() or p.dtype}")
    return p.astype(bool)


_OBJECTS = "(N, K, D): images x objects x latents"
_SLOTS = "(N, S, L): images x slots x code dimensions"
_FLAT_OBJECTS = ("a 2-D (N, K*D) array would make every column an object: reshape to (N, K, D) ((N, K, 1) for one "
                 "latent)")
_FLAT_SLOTS = "flattened slots (N, S*L) lose which dimensions form a slot: reshape to (N, S, L)"


def _slot_splits(metric: str, objects: Any, slots: Any, objects_test: Any, slots_test: Any, present: Any,
                 present_test: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Both splits checked and stacked: latents (N, K, D), slots (N, S, L), presence (N, K), fit and score indices."""
    parts = []
    for split in ("", "_test"):
        z = _tensor(metric, objects if not split else objects_test, f"objects{split}", _OBJECTS, _FLAT_OBJECTS)
        x = _tensor(metric, slots if not split else slots_test, f"slots{split}", _SLOTS, _FLAT_SLOTS)
        if len(z) != len(x):
            raise _refuse(metric, f"objects{split} has {len(z)} images but slots{split} has {len(x)}")
        if x.shape[1] < z.shape[1]:
            raise _refuse(metric, f"slots{split} has {x.shape[1]} slots per image for {z.shape[1]} objects; needs at "
                                  "least as many slots as objects (objects and slots swapped?)")
        p = _presence(metric, present if not split else present_test, z.shape[:2], f"present{split}")
        parts.append((z, x, p))
    (z, x, p), (zt, xt, pt) = parts
    if zt.shape[1:] != z.shape[1:]:
        raise _refuse(metric, f"objects_test has {zt.shape[1]} objects x {zt.shape[2]} latents, objects "
                              f"{z.shape[1]} x {z.shape[2]}")
    if xt.shape[1:] != x.shape[1:]:
        raise _refuse(metric, f"slots_test has {xt.shape[1]} slots x {xt.shape[2]} dimensions, slots "
                              f"{x.shape[1]} x {x.shape[2]}")
    n = len(z)
    return (np.concatenate([z, zt]), np.concatenate([x, xt]), np.concatenate([p, pt]), np.arange(n),
            np.arange(n, n + len(zt)))


def _choice(metric: str, name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise _refuse(metric, f"{name} must be one of {', '.join(choices)}, got {value!r}")


def _mask_ids(metric: str, masks: Any, name: str, kind: str) -> np.ndarray:
    """Masks of whole-number, non-negative ids as an int array (``kind``: what the ids are)."""
    try:
        a = np.asarray(masks, dtype=float)
    except (TypeError, ValueError):
        raise _refuse(metric, f"{name} must be a numeric array of {kind}") from None
    if not np.isfinite(a).all():
        raise _refuse(metric, f"{name} contains NaN or infinite values")
    if not np.array_equal(a, np.round(a)):
        raise _refuse(metric, f"{name} must hold whole-number {kind}; got non-integer values (soft masks? those are "
                              "predictions, (N, S, H, W), passed as pred_masks)")
    if (a < 0).any():
        raise _refuse(metric, f"{name} must hold non-negative {kind}; got {int(a.min())}")
    return a.astype(np.int64)


def _masks(metric: str, true_masks: Any, pred_masks: Any, split: str = "") -> tuple[np.ndarray, np.ndarray]:
    """True masks (N, H, W) object ids (0 = background) and predicted masks, (N, H, W) slot ids or (N, S, H, W) soft
    masks, of one image shape; refusals name the argument."""
    t_name, p_name = f"true_masks{split}", f"pred_masks{split}"
    t_raw = np.asarray(true_masks)
    if t_raw.ndim != 3:
        hint = "; (N, S, H, W) soft masks are predictions: pass them as pred_masks" if t_raw.ndim == 4 else ""
        raise _refuse(metric, f"{t_name} must be (N, H, W) object ids (0 = background), got shape {t_raw.shape}{hint}")
    t = _mask_ids(metric, t_raw, t_name, "object ids (0 = background, k + 1 = object k)")
    p_raw = np.asarray(pred_masks)
    if p_raw.ndim == 3:
        p = _mask_ids(metric, p_raw, p_name, "slot ids")
        if p.shape != t.shape:
            raise _refuse(metric, f"{p_name} {p.shape} and {t_name} {t.shape} differ in shape")
    elif p_raw.ndim == 4:
        try:
            p = np.asarray(p_raw, dtype=float)
        except (TypeError, ValueError):
            raise _refuse(metric, f"{p_name} must be a numeric array") from None
        if (p.shape[0], *p.shape[2:]) != t.shape:
            raise _refuse(metric, f"{p_name} (N, S, H, W) = {p.shape} does not fit {t_name} (N, H, W) = {t.shape}")
        if not np.isfinite(p).all():
            raise _refuse(metric, f"{p_name} contains NaN or infinite values")
    else:
        raise _refuse(metric, f"{p_name} must be (N, H, W) slot ids or (N, S, H, W) soft masks, got shape "
                              f"{p_raw.shape}")
    return t, p


def fg_ari(*, true_masks: Any, pred_masks: Any) -> FgAriResult:
    """FG-ARI: per image the adjusted Rand index between the true object ids and the predicted slot ids on the true
    foreground pixels, then the mean over images (``.score``; ``.per_image``, NaN where left out; ``.n_left_out`` and
    ``.left_out_reason``). ``true_masks``: (N, H, W) whole-number ids, 0 = background; ``pred_masks``: (N, H, W) slot
    ids or (N, S, H, W) soft masks (argmax over S). An image whose foreground is one object kept in one slot scores
    1.0 (scikit-learn, Wiedemer et al.; DeepMind's adjusted_rand_index gives NaN there); images with fewer than 2
    foreground pixels are left out; none with 2 or more is refused.

    Refused in one line: shapes that differ, true ids that are not whole non-negative numbers (soft masks passed as
    ``true_masks`` are refused by their 4 dimensions or their fractional values), ``pred_masks`` of another ndim.
    Not detectable: two (N, H, W) id arrays swapped (both are whole numbers); the score then reads the foreground
    from the predicted slots (slot 0 taken as background), so pass true masks as ``true_masks``."""
    t, p = _masks("fg_ari", true_masks, pred_masks)
    with _named("fg_ari"):
        return _objects.fg_ari_result(t, p)


def slot_r2(*, objects: Any, slots: Any, objects_test: Any, slots_test: Any, present: Any = None,
            present_test: Any = None, readout: str = "linear", seed: int = 0) -> SlotR2Result:
    """Per-object R^2 with slots matched by the readout's own loss (the on-diagonal part of :func:`sis`): a readout
    slot -> object latents (``readout`` linear: least squares with an intercept; mlp: a seeded depth-5 MLP) fitted on
    ``objects``/``slots`` while each image's slot-to-object matching (Hungarian, K x S) is chosen by its loss, then
    scored on the test split matched the same way. ``.score``: mean over latents of ``.per_latent``.

    ``objects`` (N, K, D) true latents per object, ``slots`` (N, S, L) slot codes, S >= K; ``present`` (N, K)
    booleans (None: all present). Refused in one line: 2-D (flattened) arrays, S < K, image counts that differ
    between objects, slots and present, K/D or S/L that differ between the splits, non-finite values, ``present``
    not booleans of shape (N, K), too few present objects to fit (the bound is L + 2 in the fit split, 2 in the test
    split), an unknown readout."""
    _choice("slot_r2", "readout", readout, _objects.READOUTS)
    _whole("slot_r2", "seed", seed, 0, SEED_MAX)
    z, x, p, fit, score = _slot_splits("slot_r2", objects, slots, objects_test, slots_test, present, present_test)
    with _named("slot_r2"):
        return _objects.slot_r2(z, x, fit, score, p, readout=readout, seed=seed)


def slot_r2_masks(*, objects: Any, slots: Any, true_masks: Any, pred_masks: Any, objects_test: Any, slots_test: Any,
                  true_masks_test: Any, pred_masks_test: Any, present: Any = None,
                  present_test: Any = None) -> SlotR2Result:
    """Per-object R^2 with slots matched by mask overlap (Dittadi et al.'s property prediction): per image, objects
    and slots matched one to one by IoU of the object's true mask (id k + 1 in ``true_masks``) and the slot's
    predicted mask (Hungarian), then a linear readout (least squares with an intercept) from each matched slot to
    its object's latents, fitted on the first split and scored on the test split. ``.score``: mean over latents.

    The arrays of :func:`slot_r2` plus each split's masks as :func:`fg_ari` takes them; refused in one line as
    there, and true object ids above K or predicted slot ids of S or more."""
    z, x, p, fit, score = _slot_splits("slot_r2_masks", objects, slots, objects_test, slots_test, present,
                                       present_test)
    n_fit, (k, s) = len(fit), (z.shape[1], x.shape[1])
    masks = [_masks("slot_r2_masks", true_masks, pred_masks), _masks("slot_r2_masks", true_masks_test,
                                                                      pred_masks_test, "_test")]
    for (t, pr), split, n in zip(masks, ("", "_test"), (n_fit, len(score)), strict=True):
        if len(t) != n:
            raise _refuse("slot_r2_masks", f"true_masks{split} has {len(t)} images but objects{split} has {n}")
        if t.max() > k:
            raise _refuse("slot_r2_masks", f"true_masks{split} has object id {t.max()} for {k} objects (ids 1..{k})")
        slots_in_masks = pr.shape[1] if pr.ndim == 4 else int(pr.max()) + 1
        if slots_in_masks > s:
            raise _refuse("slot_r2_masks", f"pred_masks{split} has {slots_in_masks} slots, slots has {s}")
    hard = [(t, pr.argmax(1) if pr.ndim == 4 else pr) for t, pr in masks]
    t_all, p_all = np.concatenate([h[0] for h in hard]), np.concatenate([h[1] for h in hard])
    with _named("slot_r2_masks"):
        return _objects.slot_r2_masks(z, x, t_all, p_all, fit, score, p)


def sis(*, objects: Any, slots: Any, objects_test: Any, slots_test: Any, present: Any = None,
        present_test: Any = None, readout: str = "linear", seed: int = 0) -> SISResult:
    """Brady et al.'s slot identifiability score, as their evaluation code defines it (SPEC section 8):
    (r_on - r_b) / (1 - r_b) - clip((r_off - r_b) / (1 - r_b), 0, 1), where r_on is the test R^2 of a readout whose
    slot-to-object matching is chosen by its own loss (:func:`slot_r2`), r_off the same with every matched pair
    forbidden (each object read from another slot), and r_b the clipped r_off with the true latents as the slots.
    ``.score`` is NaN where r_b >= 0.95 (objects nearly copies of each other; ``.reason`` says so);
    ``.r_on``, ``.r_off``, ``.ceiling`` (r_b), ``.readout``, ``.per_latent`` (r_on per latent), ``.iterations``.

    ``readout`` linear (least squares with an intercept) or mlp (a seeded depth-5 MLP, as Brady et al.'s). The
    arrays and refusals of :func:`slot_r2`; also refused: fewer than 2 objects per image. Continuous latents only."""
    _choice("sis", "readout", readout, _objects.READOUTS)
    _whole("sis", "seed", seed, 0, SEED_MAX)
    z, x, p, fit, score = _slot_splits("sis", objects, slots, objects_test, slots_test, present, present_test)
    with _named("sis"):
        return _objects.slot_identifiability_score(z, x, fit, score, p, readout=readout, seed=seed)


def block_mcc(*, objects: Any, codes: Any, block_sizes: Sequence[int], readout: str = "tree",
              seed: int = 0) -> BlockMccResult:
    """Lachapelle et al.'s block-MCC: the codes cut into blocks of ``block_sizes`` columns, the R^2 of every block
    for every object's latents, blocks and objects matched one to one (Hungarian), the mean matched R^2 (``.score``,
    in [0, 1]; ``.r2`` the block x object matrix, ``.pairs``). ``readout`` tree (the default, theirs: a depth-10
    decision tree fitted on one half of the samples, scored on the other, R^2 clipped at 0; ``seed`` picks the
    halves); linear: in-sample least squares with an intercept, ident3d's earlier form (not exactly their linear
    option, which fits without an intercept on a training split).

    ``objects`` (N, K, D): a 2-D array is refused, since flattened latents would make every column an object;
    ``codes`` (N, L) with sum(block_sizes) == L. Also refused: sample counts that differ, non-finite values, block
    sizes that are not whole numbers >= 1, fewer samples than the largest block + 2 (tree: 4), an unknown readout."""
    _choice("block_mcc", "readout", readout, _objects.BLOCK_READOUTS)
    _whole("block_mcc", "seed", seed, 0, SEED_MAX)
    z = _tensor("block_mcc", objects, "objects", _OBJECTS, _FLAT_OBJECTS)
    c = _matrix("block_mcc", codes, "codes")
    if len(z) != len(c):
        raise _refuse("block_mcc", f"objects has {len(z)} samples but codes has {len(c)}")
    sizes = list(block_sizes) if isinstance(block_sizes, Iterable) and not isinstance(block_sizes, str) else None
    if not sizes or any(isinstance(b, bool) or not isinstance(b, int | np.integer) or b < 1 for b in sizes):
        raise _refuse("block_mcc", f"block_sizes must be whole numbers >= 1, one per block, got {block_sizes!r}")
    if sum(sizes) != c.shape[1]:
        raise _refuse("block_mcc", f"block_sizes {sizes} sum to {sum(sizes)}, codes has {c.shape[1]} columns")
    needed = 4 if readout == "tree" else max(sizes) + 2
    if len(z) < needed:
        raise _refuse("block_mcc", f"needs at least {needed} samples, got {len(z)}")
    with _named("block_mcc"):
        return _objects.block_mcc(z, c, [int(b) for b in sizes], readout=readout, seed=seed)


__all__ = ["BlockMccResult", "ContentStyle", "FgAriResult", "SISResult", "SlotR2Result", "block_mcc", "content_style",
           "dci", "fg_ari", "mcc", "mig", "probe", "r2", "sap", "sis", "slot_r2", "slot_r2_masks", "style_of"]
