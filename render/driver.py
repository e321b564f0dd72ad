"""The Dask render driver: one task per chunk (sample or read rows -> render -> write -> mark done).

Runs on a ``LocalCluster`` of worker processes by default, or joins any scheduler
(``--scheduler tcp://HOST:PORT``, e.g. started by dask-jobqueue on SLURM/PBS). Each worker
process keeps one Blender renderer, built on its first chunk and re-posed for every image.
Chunks already marked done are skipped, so re-running a command resumes it. Given latents are
written into the store by the driver; each task reads its own rows from there.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from causal import SCM, Samples, load_scm, rng
from render.store import ChunkData, chunk_bounds, done_mask, n_chunks, prepare, write_chunk, write_given

FAULT_ENV = "IDENT3D_TEST_KILL_CHUNK"  # "K:MARKER": kill the worker once, mid-chunk K (tests only)
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

    @property
    def n_chunks(self) -> int:
        return n_chunks(self.n, self.chunk_size)

    def key(self) -> str:
        """Identifies the renderer a worker can reuse across chunks of this job."""
        return json.dumps([self.scene, self.settings], sort_keys=True)


@dataclass(frozen=True)
class RenderPlan:
    """A validated render: the job, the store's attributes and layout, and given rows (None: sampled)."""

    job: RenderJob
    attrs: dict[str, Any]
    layout: dict[str, Any]
    latents: np.ndarray | None = None
    classes: np.ndarray | None = None


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

    @property
    def ok(self) -> bool:
        return not self.failed


def cycles_seeds(seed: int, index: np.ndarray, stream: str | None = None) -> np.ndarray:
    """Per-image Cycles seeds from (seed, stream, global row id): independent of how rows are chunked.

    ``stream=None`` is the anchors' stream; a view named V uses ``stream=V`` so its render noise is
    independent of its anchor's (shared noise would be a shortcut between the two images of a pair).
    """
    key = rng.stream_key(seed, "cycles") if stream is None else rng.stream_key(seed, "cycles", "view", stream)
    u = rng.uniforms(key, index)
    return (u * (2**31 - 1)).astype(np.int64)


def view_seed(seed: int, name: str) -> int:
    """Seed of the latent transformation that makes view ``name``."""
    return rng.stream_key(seed, "view", name) % (2**31)


# ----- worker side ------------------------------------------------------------------------------
_CACHE: dict[str, Any] = {}


def _renderer(job: RenderJob) -> Any:
    key = job.key()
    if _CACHE.get("key") != key:
        from render.blender import build_renderer

        _CACHE.clear()
        _CACHE.update(key=key, renderer=build_renderer(job.scene, job.settings))
    return _CACHE["renderer"]


def _scm(job: RenderJob) -> SCM:
    key = json.dumps(job.scm, sort_keys=True)
    if _CACHE.get("scm_key") != key:
        _CACHE.update(scm_key=key, scm=load_scm(job.scm))
    return _CACHE["scm"]


def _fault_hook(k: int) -> Callable[[], None] | None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    target, marker = spec.split(":", 1)
    if int(target) != k or Path(marker).exists():
        return None

    def die() -> None:
        Path(marker).write_text(str(os.getpid()))
        os._exit(17)

    return die


def _anchors(job: RenderJob, scm: SCM, group: Any, start: int, stop: int) -> Samples:
    """Rows start..stop-1: read from the store (given latents) or sampled (counter-based)."""
    if not job.given:
        return scm.sample(stop - start, seed=job.seed, start=start)
    classes = group["classes"][start:stop] if scm.class_node else None
    return Samples(group["latents"][start:stop], classes, list(scm.names), np.arange(start, stop, dtype=np.int64),
                   scm.class_node, scm.class_names)


def render_chunk(job: RenderJob, k: int) -> tuple[int, int, float]:
    """Render and write chunk k (anchors and every view); returns (k, images, seconds)."""
    import zarr

    t0 = time.perf_counter()
    scm, renderer = _scm(job), _renderer(job)
    group = zarr.open_group(job.out, mode="r+")
    start, stop = chunk_bounds(k, job.chunk_size, job.n)
    anchors = _anchors(job, scm, group, start, stop)
    seeds = cycles_seeds(job.seed, anchors.index)
    images = renderer.render_batch(anchors.latents, anchors.classes, seeds)
    data = ChunkData(images, None, None) if job.given else ChunkData(images, anchors.latents, anchors.classes)
    views = {}
    for name, change in job.views.items():
        moved = scm.transform(anchors, change, seed=view_seed(job.seed, name))
        own = seeds if job.view_seeds == "shared" else cycles_seeds(job.seed, anchors.index, stream=name)
        views[name] = ChunkData(renderer.render_batch(moved.latents, moved.classes, own), moved.latents,
                                moved.classes)
    write_chunk(group, k, data, views, before_commit=_fault_hook(k))
    return k, (stop - start) * (1 + len(views)), time.perf_counter() - t0


# ----- driver side ------------------------------------------------------------------------------
def _client(workers: int, scheduler: str | None, threads: int):
    from dask.distributed import Client, LocalCluster

    if scheduler:
        return Client(scheduler), None
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=40,
                           env={"OMP_NUM_THREADS": str(threads)})
    return Client(cluster), cluster


def default_workers(resolution: int) -> int:
    """Worker processes for a local cluster. Measured on 2 cores (benchmarks/render_bench.py): at 64 px one
    2-thread Blender gives 16.0 img/s vs 13.3 for two 1-thread ones; at 224 px two give 1.66 vs 0.90."""
    cores = os.cpu_count() or 1
    return cores if resolution >= 128 else max(1, cores // 2)


def run(plan: RenderPlan, workers: int | None = None, scheduler: str | None = None, overwrite: bool = False,
        retries: int = 2, progress: bool = True) -> RenderReport:
    """Create or resume the store, render every chunk not yet done, and report what happened.

    ``workers=None``: :func:`default_workers` for the plan's resolution (ignored with a ``scheduler``).
    """
    from dask.distributed import as_completed
    from tqdm import tqdm

    job = plan.job
    workers = workers or default_workers(int(plan.layout["height"]))
    group = prepare(job.out, plan.attrs, plan.layout, overwrite)
    done = done_mask(group)
    todo = [k for k in range(job.n_chunks) if not done[k]]
    skipped = [k for k in range(job.n_chunks) if done[k]]
    report = RenderReport([], skipped, {}, 0, 0.0, out=job.out, n=job.n, n_chunks=job.n_chunks)
    if not todo:
        return report
    if plan.latents is not None:
        write_given(group, plan.latents, plan.classes, todo)
    per_chunk = 1 + len(job.views)
    total = sum(np.diff(chunk_bounds(k, job.chunk_size, job.n))[0] for k in todo) * per_chunk
    t0 = time.perf_counter()
    threads = max(1, (os.cpu_count() or 1) // max(1, workers))
    client, cluster = _client(workers, scheduler, threads)
    try:
        futures = {client.submit(render_chunk, job, k, retries=retries, pure=False, key=f"chunk-{k}-{t0}"): k
                   for k in todo}
        with tqdm(total=int(total), unit="img", desc="render", disable=not progress, smoothing=0.1) as bar:
            for fut in as_completed(futures):
                k = futures[fut]
                try:
                    _, count, _ = fut.result()
                    report.rendered.append(k)
                    report.images += count
                    bar.update(count)
                except Exception as exc:  # noqa: BLE001 - report the chunk, keep the others going
                    report.failed[k] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                    bar.set_postfix(failed=len(report.failed))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    report.rendered.sort()
    report.seconds = time.perf_counter() - t0
    return report

