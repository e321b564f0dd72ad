"""The Dask render driver: one task per chunk (sample -> render -> write -> mark done).

Runs on a ``LocalCluster`` of worker processes by default, or joins any scheduler
(``--scheduler tcp://HOST:PORT``, e.g. started by dask-jobqueue on SLURM/PBS). Each worker
process keeps one Blender renderer, built on its first chunk and re-posed for every image.
Chunks already marked done are skipped, so re-running a command resumes it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from causal import SCM, load_scm, rng
from render.store import ChunkData, chunk_bounds, done_mask, n_chunks, prepare, write_chunk

FAULT_ENV = "IDENT3D_TEST_KILL_CHUNK"  # "K:MARKER": kill the worker once, mid-chunk K (tests only)


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

    @property
    def n_chunks(self) -> int:
        return n_chunks(self.n, self.chunk_size)

    def key(self) -> str:
        """Identifies the renderer a worker can reuse across chunks of this job."""
        return json.dumps([self.scene, self.settings], sort_keys=True)


@dataclass
class RenderReport:
    """What a run did: chunks rendered now, skipped as already done, and failed (index -> error)."""

    rendered: list[int]
    skipped: list[int]
    failed: dict[int, str]
    images: int
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.failed


def cycles_seeds(seed: int, index: np.ndarray) -> np.ndarray:
    """Per-image Cycles seeds from (seed, global row id): independent of how rows are chunked."""
    u = rng.uniforms(rng.stream_key(seed, "cycles"), index)
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


def render_chunk(job: RenderJob, k: int) -> tuple[int, int, float]:
    """Render and write chunk k (anchors and every view); returns (k, images, seconds)."""
    import zarr

    t0 = time.perf_counter()
    scm, renderer = _scm(job), _renderer(job)
    start, stop = chunk_bounds(k, job.chunk_size, job.n)
    anchors = scm.sample(stop - start, seed=job.seed, start=start)
    seeds = cycles_seeds(job.seed, anchors.index)
    data = ChunkData(renderer.render_batch(anchors.latents, anchors.classes, seeds), anchors.latents,
                     anchors.classes)
    views = {}
    for name, change in job.views.items():
        moved = scm.transform(anchors, change, seed=view_seed(job.seed, name))
        views[name] = ChunkData(renderer.render_batch(moved.latents, moved.classes, seeds), moved.latents,
                                moved.classes)
    group = zarr.open_group(job.out, mode="r+")
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


def run(job: RenderJob, attrs: Mapping[str, Any], layout: Mapping[str, Any], workers: int = 1,
        scheduler: str | None = None, overwrite: bool = False, retries: int = 2,
        progress: bool = True) -> RenderReport:
    """Create or resume the store, render every chunk not yet done, and report what happened."""
    from dask.distributed import as_completed
    from tqdm import tqdm

    group = prepare(job.out, attrs, layout, overwrite)
    done = done_mask(group)
    todo = [k for k in range(job.n_chunks) if not done[k]]
    skipped = [k for k in range(job.n_chunks) if done[k]]
    report = RenderReport([], skipped, {}, 0, 0.0)
    if not todo:
        return report
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

