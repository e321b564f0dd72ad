"""Mean correlation coefficient: |correlation| between true and inferred dimensions, matched one
to one with the Hungarian algorithm, averaged over the matched pairs. Out of sample: the matching
is chosen on the fit split and scored on the test split.

``mcc`` is cl-ica's MCC (brendel-group/cl-ica, ``disentanglement_utils``): it needs as many code dimensions as
factors and refuses any other widths (a partial matching of 2 codes to 2 of 3 factors would score 1.0 while a
factor is not recovered at all). ``matched_corr`` is the Hungarian best-min(K, L) matching for other widths (e.g.
an image encoder's 128 dimensions against 10 latents): a number of its own, not cl-ica's MCC. ``report_mcc`` is
what the built-in reports write: MCC at equal widths, MCC of the content block when the codes are meant to hold
only it (fewer codes than factors and as many as content factors), else no MCC.

Undefined and refused inputs (each a one-line ``UserError``): a factor constant on a split the metric reads has no
correlation with anything (0 / 0; cl-ica's ``np.corrcoef`` gives NaN there) and is refused, naming it; a constant
code dimension carries nothing and correlates 0 with every factor (a collapsed dimension of a trained model is a
result, not an input error). Each split the metric reads needs at least ``MIN_SAMPLES`` (10) samples: the |corr| of
two independent variables over n samples has a spread of about 1 / sqrt(n - 1) and the matching picks the largest,
so with 3 samples unrelated codes scored 0.87.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.stats import rankdata

from ident3d.causal.errors import UserError
from ident3d.evaluation.metric_inputs import constant_columns

MIN_SAMPLES = 10
METHODS = ("pearson", "spearman")


def _abs_corr(a: np.ndarray, b: np.ndarray, method: str) -> np.ndarray:
    """|corr| matrix between the columns of a (N, Da) and b (N, Db); a constant column correlates 0."""
    if method == "spearman":
        a, b = np.apply_along_axis(rankdata, 0, a), np.apply_along_axis(rankdata, 0, b)
    elif method != "pearson":
        raise UserError(f"method must be pearson or spearman, got {method!r}")
    a, b = a - a.mean(0), b - b.mean(0)
    sa, sb = np.sqrt((a * a).sum(0)), np.sqrt((b * b).sum(0))
    a, b = a / np.where(sa > 0, sa, 1.0), b / np.where(sb > 0, sb, 1.0)  # a constant column stays 0
    return np.minimum(np.abs(a.T @ b), 1.0)


def _as_2d(x) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    return a[:, None] if a.ndim == 1 else a


def _check_split(z: np.ndarray, h: np.ndarray, split: str) -> None:
    if len(z) != len(h):
        raise UserError(f"factors{split} has {len(z)} samples but codes{split} has {len(h)}")
    if len(z) < MIN_SAMPLES:
        raise UserError(f"MCC needs at least {MIN_SAMPLES} samples{split}, got {len(z)}")
    const = constant_columns(z)
    if const.size:
        raise UserError(f"factor {', '.join(map(str, const))} is constant{split}: its correlation with any code is "
                        "undefined (0 / 0); drop it from the factors")


def matched_corr(z_true, z_pred, method: str = "pearson", z_true_test=None, z_pred_test=None) -> float:
    """Mean |corr| of the min(K, L) pairs of a Hungarian matching of factors to codes of any widths, in sample or
    out of sample (matching from the first pair of arrays). Equal widths: ``mcc``; other widths: not cl-ica's MCC
    (with more codes than factors the best K of L codes are picked; with fewer, factors go unmatched)."""
    z, h = _as_2d(z_true), _as_2d(z_pred)
    _check_split(z, h, "")
    c = _abs_corr(z, h, method)
    rows, cols = linear_sum_assignment(-c)
    if (z_true_test is None) != (z_pred_test is None):
        raise UserError("give both test arrays, or neither")
    if z_true_test is None:
        return float(c[rows, cols].mean())
    zt, ht = _as_2d(z_true_test), _as_2d(z_pred_test)
    if zt.shape[1] != z.shape[1] or ht.shape[1] != h.shape[1]:
        raise UserError(f"the test split has {zt.shape[1]} factors and {ht.shape[1]} code dimensions, the fit split "
                        f"{z.shape[1]} and {h.shape[1]}")
    _check_split(zt, ht, " (test split)")
    ct = _abs_corr(zt, ht, method)
    return float(ct[rows, cols].mean())


def mcc(z_true: np.ndarray, z_pred: np.ndarray, method: str = "pearson",
        z_true_test: np.ndarray | None = None, z_pred_test: np.ndarray | None = None) -> float:
    """cl-ica's MCC in sample, or out of sample when test arrays are given (matching from the first pair).

    Needs as many code dimensions as factors (``UserError`` otherwise, naming both widths), at least ``MIN_SAMPLES``
    samples per split and no constant factor (see the module docstring)."""
    k, n_codes = _as_2d(z_true).shape[1], _as_2d(z_pred).shape[1]
    if k != n_codes:
        raise UserError(f"MCC needs as many code dimensions as factors (cl-ica refuses other widths), got {k} "
                        f"factors and {n_codes} code dimensions; score the factors the codes are meant to hold "
                        "(e.g. the content block), or use matched_corr for a best-match correlation")
    return matched_corr(z_true, z_pred, method, z_true_test, z_pred_test)


@dataclass(frozen=True)
class ReportMCC:
    """What a report writes for MCC: ``name`` "mcc" (equal widths), "mcc_content" (the content block), "matched_corr"
    (wider codes, when asked for) or None (no MCC); ``value`` None where it is not computed, with ``note`` why."""

    name: str | None
    value: float | None
    note: str = ""


def report_mcc(z_fit, h_fit, z_test, h_test, latent_names: Sequence[str], content: Sequence[str] | None = None,
               wider: bool = False, method: str = "pearson") -> ReportMCC:
    """Out-of-sample MCC of a report under the name that says what it is:

    - as many codes as factors: ``mcc`` (cl-ica's);
    - fewer codes than factors: ``mcc_content``, the MCC of the ``content`` factors (the block the codes are meant to
      hold, e.g. paper 000's 5 codes for 5 content of 10 latents) when the widths then match, else none;
    - more codes than factors: ``matched_corr`` (best-K Hungarian matching, not cl-ica's MCC) when ``wider``, else
      none.

    Inputs the metric refuses (too few samples, a constant factor) give the name with value None and the reason."""
    names = list(latent_names)
    k, n_codes = np.shape(z_fit)[1], np.shape(h_fit)[1]
    z_fit, z_test = np.asarray(z_fit, float), np.asarray(z_test, float)
    if n_codes == k:
        name, fn, cols = "mcc", mcc, list(range(k))
    elif n_codes < k:
        content = [n for n in (content or []) if n in names]
        if len(content) != n_codes:
            return ReportMCC(None, None, f"{n_codes} code dimensions for {k} factors and {len(content)} content "
                                         "factors: no MCC (cl-ica's needs equal widths)")
        name, fn, cols = "mcc_content", mcc, [names.index(n) for n in content]
    elif wider:
        name, fn, cols = "matched_corr", matched_corr, list(range(k))
    else:
        return ReportMCC(None, None, f"{n_codes} code dimensions for {k} factors: no MCC (cl-ica's needs equal widths)")
    try:
        value = fn(z_fit[:, cols], h_fit, method, z_test[:, cols], h_test)
    except UserError as exc:
        return ReportMCC(name, None, str(exc))
    note = {"mcc": "", "mcc_content": f"MCC of the content factors {', '.join(names[c] for c in cols)}",
            "matched_corr": (f"best {k} of {n_codes} code dimensions matched to the {k} factors (Hungarian): not "
                             "cl-ica's MCC, which needs equal widths")}[name]
    return ReportMCC(name, value, note)
