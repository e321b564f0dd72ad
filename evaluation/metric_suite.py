"""The metrics by name, one registry for every table: ``ident3d evaluate --metrics``, and a ``metrics:`` list in a
compare, synthetic or scaling config. Each metric is a class registered with ``@register_metric("name")`` that says
what it needs (``needs``: the factors and codes of a fit and a score split always; ``run``: the trained run;
``store``: the images' store, its encodings and attributes; ``labels``: the images' classes; ``images``: the
images themselves) and the numbers it puts in a table (``columns``);
``score(run, data, names)`` is the one call that scores them, and ``table_values`` flattens its result into the
table's ``NAME/COLUMN`` columns. Adding a metric to every table is one class (see docs/extending.md)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.evaluation.citris_metrics import citris_scores
from ident3d.evaluation.dci import dci
from ident3d.evaluation.dci_es import dci_es_explicitness
from ident3d.evaluation.metric_base import METRICS, Metric, ScoringData, register_metric
from ident3d.evaluation.mig import mig
from ident3d.evaluation.sap import sap
from ident3d.evaluation.temporal_scores import HEADLINE, node_factors, sequence_store_scores, summary, temporal_scores


def parse_metrics(text: str | Sequence[str] | None, flag: str = "--metrics") -> list[str]:
    """``"dci,mig"`` (or a list) -> the metric names, checked; None or empty -> none (``flag`` starts a refusal)."""
    if text is not None and not isinstance(text, str | list | tuple):
        raise UserError(f"{flag} must be a list of metric names, e.g. [dci, mig], got {text!r}")
    names = [str(n).strip() for n in (text.split(",") if isinstance(text, str) else text or []) if str(n).strip()]
    bad = [n for n in names if n not in METRICS.names()]
    if bad:
        raise UserError(f"{flag}: unknown metric {bad[0]!r}; choose from {', '.join(METRICS.names())}, e.g. dci,mig")
    return list(dict.fromkeys(names))


def score(run: Any, data: ScoringData, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{metric: its numbers} for each of ``names``: the one scoring call of evaluate, compare, synthetic and scaling.
    A metric that needs the run or a store refuses, in one line, data that lack them."""
    out = {}
    for name in parse_metrics(list(names)):
        metric = METRICS.get(name)()
        with metric_named(name):
            if "run" in metric.needs and run is None:
                raise UserError("needs a trained run to read")
            if "store" in metric.needs and data.store is None:
                raise UserError("needs a store to read (a synthetic source has none); drop it from metrics")
            if "images" in metric.needs and data.store is None and data.images is None:
                raise UserError("needs images (a synthetic source has none); drop it from metrics")
            if "labels" in metric.needs and data.labels() is None:
                raise UserError("needs classes (a labelled store from `ident3d dataset`, or a scene with classes); "
                                "drop it from metrics")
            values = dict(metric(run, data))
        missing = [c for c in metric.columns if c not in values]
        if missing:
            raise ValueError(f"metric {name} gave no column {missing[0]!r} (it declares {metric.columns})")
        out[name] = {k: float(v) if isinstance(v, int | float | np.floating) and not isinstance(v, bool) else v
                     for k, v in values.items()}
    return out


def columns(names: Sequence[str]) -> list[str]:
    """The table columns of the metrics ``names``: ``NAME/COLUMN`` in the order each metric declares them."""
    return [f"{name}/{col}" for name in names for col in METRICS.get(name).columns]


def table_values(scores: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """A ``score`` result as its table cells, ``{NAME/COLUMN: value}`` (the declared columns only)."""
    return {f"{name}/{col}": float(values[col]) for name, values in scores.items() if name in METRICS.names()
            for col in METRICS.get(name).columns}


@contextmanager
def metric_named(name: str) -> Iterator[None]:
    """A metric's refusal (e.g. too few samples) names the metric, so the user knows which one to drop or feed."""
    try:
        yield
    except UserError as exc:
        raise UserError(f"metric {name}: {exc}") from None


def _splits(data: ScoringData) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return data.factors_fit, data.codes_fit, data.factors_score, data.codes_score


@register_metric("dci")
class DCI(Metric):
    """DCI disentanglement, completeness and informativeness (Eastwood & Williams), Lasso importances and the paper's
    D and C (unweighted C; disentanglement_lib's gradient-boosted form is ``dci(..., importance="gbt")``). Still version
    1: making gbt disentanglement_lib's left Lasso's numbers as they were."""

    columns = ("disentanglement", "completeness", "informativeness")

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        r = dci(*_splits(data), importance="lasso")
        return {"disentanglement": r.disentanglement, "completeness": r.completeness,
                "informativeness": r.informativeness, "importance": r.method}


@register_metric("dci_es")
class DCIExplicitness(Metric):
    """DCI-ES explicitness (Eastwood et al. 2023): the area above the loss-capacity curve."""

    columns = ("explicitness",)

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        return {"explicitness": dci_es_explicitness(*_splits(data)).score}


@register_metric("mig")
class MIG(Metric):
    """Mutual information gap (Chen et al. 2018) on the score split."""

    columns = ("mig",)

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        r = mig(data.factors_score, data.codes_score)
        return {"mig": r.score, "n_bins": r.n_bins}


@register_metric("sap")
class SAP(Metric):
    """Separated attribute predictability (Kumar et al. 2018)."""

    columns = ("sap",)

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        return {"sap": sap(*_splits(data)).score}


@register_metric("citris")
class Citris(Metric):
    """CITRIS's R^2 and Spearman diag / sep over factors (linear regressor, Hungarian matching)."""

    columns = ("r2_diag", "r2_sep", "r2_max_off_diag", "spearman_diag", "spearman_sep")

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        r = citris_scores(*_splits(data), regressor="linear")
        return {"r2_diag": r.r2_diag, "r2_sep": r.r2_sep, "r2_max_off_diag": r.r2_max_off_diag,
                "spearman_diag": r.spearman_diag, "spearman_sep": r.spearman_sep}


@register_metric("temporal")
class Temporal(Metric):
    """CITRIS's variable-level scores of latents learned from interventional sequences (a sequence store, or the
    ``temporal_sequences`` synthetic source), under the run's own assignment of latents to variables when its model
    learns one (else post hoc)."""

    needs = frozenset({"codes", "run"})
    data_needs = frozenset({"sequences"})  # of a store; the synthetic source carries its own sequences
    columns = HEADLINE

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        if data.store is None:
            return self.of_source(run, data)
        info, enc = data.store, data.encoded or {}
        seq = info.attrs.sequences
        if not seq:
            raise UserError(f"needs a sequence store; {info.path} holds i.i.d. images (render one with "
                            "`ident3d render --sequences N --length T`)")
        factors = node_factors(enc["latents"], info.latent_names, enc.get("classes"), info.attrs.class_node,
                               list(seq["intervention_names"]))
        codes = np.concatenate([data.codes_fit, data.codes_score])
        assignment = _assignment(run.objective(image_size=info.image_size))
        return sequence_store_scores(seq, factors, codes, len(data.codes_fit), assignment)

    @staticmethod
    def of_source(run: Any, data: ScoringData) -> dict[str, Any]:
        """The scores on a synthetic source's frames, grouped by its causal variables."""
        source = data.source
        if getattr(source, "node_variable", None) is None:
            raise UserError("needs a sequence store or the temporal_sequences synthetic source (a source of "
                            "interventional sequences, whose causal variables it groups the factors by)")
        s = temporal_scores(data.factors_fit, data.codes_fit, data.factors_score, data.codes_score,
                            source.node_variable, _assignment(run.objective(in_dim=source.obs_dim)))
        return summary(s, source.variable_names)


def _assignment(objective: Any) -> np.ndarray | None:
    """The learned assignment of latents to causal variables of a model that has one (CITRIS-style), else None."""
    learner = getattr(objective, "learner", None)
    return learner.assignment() if hasattr(learner, "assignment") else None


# the metrics of labelled image stores live in their own module; importing it here registers them with the rest
from ident3d.evaluation import modality_metrics, probe_metrics, slot_metrics  # noqa: E402,F401  (they import metric_base, not this)
