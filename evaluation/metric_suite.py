"""The disentanglement metrics by name, for ``ident3d evaluate --metrics``: each takes a fit and a score split of
(true factors, learned codes) and returns its headline numbers as plain floats (a JSON-ready report section)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from ident3d.causal.errors import UserError


def _dci(zf: np.ndarray, cf: np.ndarray, zs: np.ndarray, cs: np.ndarray) -> dict[str, float]:
    from ident3d.evaluation.dci import dci

    r = dci(zf, cf, zs, cs, importance="lasso")
    return {"disentanglement": r.disentanglement, "completeness": r.completeness,
            "informativeness": r.informativeness, "importance": r.method}


def _dci_es(zf: np.ndarray, cf: np.ndarray, zs: np.ndarray, cs: np.ndarray) -> dict[str, float]:
    from ident3d.evaluation.dci_es import dci_es_explicitness

    return {"explicitness": dci_es_explicitness(zf, cf, zs, cs).score}


def _mig(zf: np.ndarray, cf: np.ndarray, zs: np.ndarray, cs: np.ndarray) -> dict[str, float]:
    from ident3d.evaluation.mig import mig

    r = mig(zs, cs)
    return {"mig": r.score, "n_bins": r.n_bins}


def _sap(zf: np.ndarray, cf: np.ndarray, zs: np.ndarray, cs: np.ndarray) -> dict[str, float]:
    from ident3d.evaluation.sap import sap

    return {"sap": sap(zf, cf, zs, cs).score}


def _citris(zf: np.ndarray, cf: np.ndarray, zs: np.ndarray, cs: np.ndarray) -> dict[str, float]:
    from ident3d.evaluation.citris_metrics import citris_scores

    r = citris_scores(zf, cf, zs, cs, regressor="linear")
    return {"r2_diag": r.r2_diag, "r2_sep": r.r2_sep, "r2_max_off_diag": r.r2_max_off_diag,
            "spearman_diag": r.spearman_diag, "spearman_sep": r.spearman_sep}


METRICS: dict[str, Callable[..., dict[str, float]]] = {"dci": _dci, "dci_es": _dci_es, "mig": _mig, "sap": _sap,
                                                       "citris": _citris}


# metrics that need more than (factors, codes), scored by evaluation.run_report from the run and the store:
# temporal (sequence stores: CITRIS's variable-level R^2 under the run's own assignment of latents to variables)
RUN_METRICS = ("temporal",)


def parse_metrics(text: str | Sequence[str] | None) -> list[str]:
    """``"dci,mig"`` (or a list) -> the metric names, checked; None or empty -> none."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text or []) if n.strip()]
    known = [*METRICS, *RUN_METRICS]
    bad = [n for n in names if n not in known]
    if bad:
        raise UserError(f"--metrics: unknown metric {bad[0]!r}; choose from {', '.join(known)}, e.g. dci,mig")
    return list(dict.fromkeys(names))


def metric_suite(names: Sequence[str], z_fit: np.ndarray, c_fit: np.ndarray, z_score: np.ndarray,
                 c_score: np.ndarray) -> dict[str, dict[str, float]]:
    """{metric: its numbers} for the codes ``c`` (N, L) against the factors ``z`` (N, K) of both splits (names in
    ``RUN_METRICS`` are left to the caller)."""
    return {name: {k: (float(v) if isinstance(v, int | float | np.floating) else v)
                   for k, v in _scored(name, z_fit, c_fit, z_score, c_score).items()} for name in names
            if name in METRICS}


def _scored(name: str, *splits: np.ndarray) -> dict[str, float]:
    """One metric's numbers (a refusal names the metric)."""
    with metric_named(name):
        return METRICS[name](*splits)


@contextmanager
def metric_named(name: str) -> Iterator[None]:
    """A metric's refusal (e.g. too few samples) names the metric, so the user knows which one to drop or feed."""
    try:
        yield
    except UserError as exc:
        raise UserError(f"metric {name}: {exc}") from None
