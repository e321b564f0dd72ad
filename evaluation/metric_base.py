"""What every metric is: the ``Metric`` class (what it needs, the columns it gives), the data it reads
(``ScoringData``) and the one registry ``METRICS`` that ``ident3d.evaluation.metric_suite`` scores from; metric modules
register their classes here with ``@register_metric``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ident3d.training.registry import Registry

METRICS = Registry("metric", hint="ident3d evaluate --help")
register_metric = METRICS.register
# the version of the numbers every report has besides its metrics' (R^2 per latent, MCC, class accuracy: evaluation
# .run_report and evaluation.synthetic.score): part of a cell's scoring key, raised when they change, so finished
# cells are scored again (not trained again). 2: MCC only at equal widths (else mcc_content / matched_corr / none),
# undefined R^2 (a constant latent) NaN and left out of the means, too few samples refused (issue: metric parity)
BUILTIN_SCORES_VERSION = 2


@dataclass(frozen=True)
class ScoringData:
    """What a metric may read: true factors (N, K) and learned codes (N, L) of the fit and score splits; for images,
    the store's info (``ident3d.store.info.StoreInfo``) and its encodings (``ident3d.evaluation.encode``), or the
    images and classes themselves (fit rows then score rows; ``ident3d probe`` on a named dataset); for a synthetic
    run, its source (``ident3d.training.synthetic``) instead. ``seed``: of a metric's own randomness (a probe's
    initialisation, a GMM's)."""

    factors_fit: np.ndarray
    codes_fit: np.ndarray
    factors_score: np.ndarray
    codes_score: np.ndarray
    store: Any = None
    encoded: Mapping[str, np.ndarray] | None = None
    source: Any = None
    images: np.ndarray | None = None
    classes: np.ndarray | None = None
    seed: int = 0

    def labels(self) -> np.ndarray | None:
        """The classes of the fit rows then the score rows: given, or the store's; None when there are none."""
        return self.classes if self.classes is not None else (self.encoded or {}).get("classes")


class Metric:
    """A metric: ``needs`` what it reads, ``columns`` the numbers a table shows; ``__call__`` returns a mapping
    with at least those columns (more, e.g. a matrix, stays in the report's JSON)."""

    needs: ClassVar[frozenset[str]] = frozenset({"codes"})
    # kinds of test store it scores ("sequences", "objects"): experiment configs check them before any store is made
    data_needs: ClassVar[frozenset[str]] = frozenset()
    columns: ClassVar[tuple[str, ...]] = ()
    # raised whenever the metric's numbers change (a fix, a new definition): a cell's scoring key holds every metric's
    # version, so finished cells are scored again with the new one and never retrained for it
    version: ClassVar[int] = 1

    def __call__(self, run: Any, data: ScoringData) -> Mapping[str, Any]:
        raise NotImplementedError
