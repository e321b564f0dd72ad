"""A render's plain data, passed between the API that plans it, the driver that runs it and the workers that render
its chunks: ``RenderJob`` (everything a worker needs, shipped to remote workers with each task), ``RenderPlan`` (a
validated render: the job, the store's attributes and layout, given rows) and ``RenderReport`` (what a run did).

Its own module so the worker (``render.worker``) and the driver (``render.driver``) both import it without importing
each other's side: the driver imports the worker's chunk function, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ident3d.store.attrs import StoreAttrs
from ident3d.store.zarr_io import n_chunks

VIEW_SEEDS = ("independent", "shared")  # a view's Cycles seeds: its own stream, or its anchor's


@dataclass(frozen=True)
class RenderJob:
    """Everything a worker needs to render any chunk; plain data so it ships to remote workers."""

    out: str
    scene: dict[str, Any]
    scm: dict[str, Any]
    settings: dict[str, Any]
    n: int
    seed: int
    chunk_size: int
    views: dict[str, list[str]] = field(default_factory=dict)
    view_seeds: str = "independent"
    given: bool = False  # True: the anchors' latents (and classes) are already in the store; read, don't sample
    placement: dict[str, Any] | None = None  # the rules rows are redrawn to keep (PlacementRules.to_dict); None: none
    text: dict[str, Any] | None = None  # captions: the store's text attribute (render.text_plan); None: none
    # the views rendered by a second mechanism: {view: {knob: value}} (render.mechanisms); other views: the scene's
    mechanisms: dict[str, dict[str, Any]] = field(default_factory=dict)
    threads: int = 0  # Cycles CPU threads per worker process; 0: $OMP_NUM_THREADS, else the Dask worker's threads
    # called with k after chunk k's arrays are written, before its done flag: where tests inject a worker's death
    # or a full disk (a picklable callable, shipped with the job); None in every real run
    before_commit: Callable[[int], None] | None = None

    @property
    def n_chunks(self) -> int:
        return n_chunks(self.n, self.chunk_size)


@dataclass(frozen=True)
class RenderPlan:
    """A validated render: the job, the store's attributes and layout, and given rows (None: sampled)."""

    job: RenderJob
    attrs: StoreAttrs
    layout: dict[str, Any]
    latents: np.ndarray | None = None
    classes: np.ndarray | None = None
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # per-row arrays beside the latents (sequences)


@dataclass
class RenderReport:
    """What a run did: chunks rendered now, skipped as already done, and failed (index -> error)."""

    rendered: list[int]
    skipped: list[int]
    failed: dict[int, str]
    images: int
    seconds: float
    out: str = ""
    n: int = 0
    n_chunks: int = 0
    workers_lost: int = 0  # worker processes that died during the run (their chunks were retried elsewhere)
    placed_rows: int = 0  # with placement rules: anchor rows rendered by this run, and the draws they took
    placement_draws: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed
