"""The render worker: what each process that renders chunks holds and does. Per process: one Blender renderer,
built on its first chunk and re-posed for every image (rebuilt when a job's scene, settings or threads differ), the
loaded SCM, and the one thread that imports bpy and runs every render when tasks run off the main thread (a Dask
worker's task pool; ``BlenderThread``). Per chunk (``render_chunk``, the function the driver submits as a Dask task
and calls in process for a local one-worker job): read or sample the anchors' rows, apply the placement rules,
render the anchors and every view with counter-based Cycles seeds (a view of a second mechanism with its material,
camera or lamps staged on the renderer, ``render.mechanisms``), write the chunk and mark it done.

Apart from the driver (``render.driver``: run, submit, collect) so the state that must live in each worker process
is in one place, and the driver imports this module, never the other way round. ``render_chunk`` is a module-level
function of plain data (``render.job.RenderJob``), so a pickled task resolves here on any worker.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from ident3d.causal import SCM, Samples, load_scm, rng
from ident3d.causal.errors import UserError
from ident3d.jobs.cluster import ChunkFailure
from ident3d.render.job import RenderJob
from ident3d.render.placement import place_rows, placement_seed, take
from ident3d.render.placement_rules import parse_rules
from ident3d.render.text_plan import chunk_captions
from ident3d.store.masks import visibility
from ident3d.store.zarr_io import ChunkData, chunk_bounds, store_group, write_chunk


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


_CACHE: dict[str, Any] = {}  # this process's renderer, SCM and BlenderThread, kept from chunk to chunk
_RENDER_LOCK = threading.Lock()  # bpy is process-global: one chunk renders at a time in a process


def worker_threads(job: RenderJob) -> int:
    """Cycles threads for this process: the job's, else $OMP_NUM_THREADS (a local cluster sets it per worker), else
    the Dask worker's thread count (a farm worker started with --nthreads / jobqueue cores), else 0 (all cores)."""
    if job.threads:
        return job.threads
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        from distributed import get_worker

        return int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        return 0


def _renderer(job: RenderJob) -> Any:
    threads = worker_threads(job)
    key = json.dumps([job.scene, job.settings, threads], sort_keys=True)
    if _CACHE.get("key") != key:
        from ident3d.render.blender import build_renderer

        old = _CACHE.pop("renderer", None)
        _CACHE.pop("key", None)  # a build that fails leaves no stale key behind
        if old is not None:
            old.close()
        _CACHE["renderer"] = build_renderer(job.scene, job.settings, threads=threads)
        _CACHE["key"] = key
    return _CACHE["renderer"]


def _scm(job: RenderJob) -> SCM:
    key = json.dumps(job.scm, sort_keys=True)
    if _CACHE.get("scm_key") != key:
        _CACHE.update(scm_key=key, scm=load_scm(job.scm))
    return _CACHE["scm"]


def _anchors(job: RenderJob, scm: SCM, group: Any, start: int, stop: int) -> Samples:
    """Rows start..stop-1: read from the store (given latents) or sampled (counter-based)."""
    if not job.given:
        return scm.sample(stop - start, seed=job.seed, start=start)
    classes = group["classes"][start:stop] if scm.class_node else None
    return Samples(group["latents"][start:stop], classes, list(scm.names), np.arange(start, stop, dtype=np.int64),
                   scm.class_node, scm.class_names)


class BlenderThread:
    """The one thread that imports bpy and runs every render of a process whose tasks run off its main thread (a
    Dask worker's task threads), and that shuts Blender down in an ``atexit`` hook before Python's finalisation.

    Why: bpy's importing thread is Blender's main thread, and its exit must run there too (see
    ``ident3d.render.bpy_module.exit_blender``). A Dask worker ran its tasks, so imported bpy, in a thread of its task
    pool; that pool is joined when the worker closes, so at exit Blender's teardown ran in the process's main
    thread and segfaulted: every ``dask worker`` that had rendered died with signal 11 on SIGTERM (the nanny logged
    "Worker process N was killed by signal 11"; ``--no-nanny`` exited -11), as did a local cluster's workers. This
    thread outlives the pool (a daemon: the interpreter joins non-daemon threads before ``atexit``), and its hook
    is registered before bpy is imported, so it runs after bpy's own ``atexit`` hooks, which still use bpy. The
    hook waits for a render in progress, closes the cached renderer, exits Blender here and ends the thread.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Future] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="ident3d-blender", daemon=True)
        atexit.register(self.stop)
        self._thread.start()

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` run in this thread; its result, or its exception raised here."""
        done: Future = Future()
        self._jobs.put((fn, args, done))
        return done.result()

    def _serve(self) -> None:
        """Run the queued calls one after another until told to stop (None)."""
        while (job := self._jobs.get()) is not None:
            fn, args, done = job
            try:
                done.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised in its thread
                done.set_exception(exc)

    def stop(self) -> None:
        """Close the cached renderer, exit Blender in this thread (if it imported bpy) and end the thread."""
        if self._thread.is_alive():
            self.call(_release_blender)
            self._jobs.put(None)
            self._thread.join()


def _blender_thread() -> BlenderThread:
    """This process's BlenderThread, started on first use (callers hold _RENDER_LOCK)."""
    if "blender_thread" not in _CACHE:
        _CACHE["blender_thread"] = BlenderThread()
    return _CACHE["blender_thread"]


def _release_blender() -> None:
    """Close the cached renderer (its temporary folder) and run Blender's exit; in the thread that imported bpy."""
    renderer = _CACHE.pop("renderer", None)
    _CACHE.pop("key", None)
    if renderer is not None:
        renderer.close()
    if "bpy" in sys.modules:
        from ident3d.render.bpy_module import exit_blender

        exit_blender()


def render_chunk(job: RenderJob, k: int) -> tuple[int, int, float] | ChunkFailure:
    """Render and write chunk k; returns (k, images, seconds), or a ChunkFailure for errors that cannot succeed
    on a retry. Other exceptions propagate: Dask retries them (a worker fault may be transient)."""
    try:
        with _RENDER_LOCK:
            job = replace(job, threads=worker_threads(job))  # here: the Dask worker is only known in its own thread
            if threading.current_thread() is threading.main_thread():
                return _render_chunk(job, k)
            return _blender_thread().call(_render_chunk, job, k)
    except UserError as exc:
        return ChunkFailure(k, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        return ChunkFailure(k, f"no space left on the device holding {job.out} (writing chunk {k}); free some "
                               "space, then re-run the same command to resume (finished chunks are kept)")


def _rendered(renderer: Any, rows: Samples, seeds: np.ndarray, keep_latents: bool) -> ChunkData:
    """Rows rendered into a chunk's data: images, and for a scene with object slots the masks, each slot's visible
    pixel count and presence (from the rows' present latents); latents and classes unless ``keep_latents`` is False
    (given latents, already in the store)."""
    from ident3d.render.scene import presence

    images, masks = renderer.render_batch_masks(rows.latents, rows.classes, seeds)
    latents, classes = (rows.latents, rows.classes) if keep_latents else (None, None)
    if masks is None:
        return ChunkData(images, latents, classes)
    return ChunkData(images, latents, classes, masks, visibility(masks, renderer.scene.slots),
                     presence(renderer.scene, rows.latents))


def _render_chunk(job: RenderJob, k: int) -> tuple[int, int, float, int, int]:
    """Render and write chunk k (anchors and every view); returns (k, images, seconds, rows, draws): with placement
    rules, the anchor rows and the draws they took (0, 0 without)."""

    t0 = time.perf_counter()
    scm, renderer = _scm(job), _renderer(job)
    group = store_group(job.out, mode="r+")
    start, stop = chunk_bounds(k, job.chunk_size, job.n)
    index = np.arange(start, stop, dtype=np.int64)
    seeds = cycles_seeds(job.seed, index)
    if job.placement is None:
        anchors = _anchors(job, scm, group, start, stop)
        data = _rendered(renderer, anchors, seeds, keep_latents=not job.given)
    else:
        anchors, data = _placed(job, renderer, lambda r, pos: take(
            scm.sample(stop - start, seed=placement_seed(job.seed, r), start=start), pos), seeds,
            lambda i: f"row {start + i}")
    if job.text is not None:  # captions of the anchors as drawn (after any placement redraws)
        text, stated = chunk_captions(job.text, scm, anchors, job.seed)
        data = replace(data, text=text, text_latents=stated)
    views = {}
    for name, change in job.views.items():
        own = seeds if job.view_seeds == "shared" else cycles_seeds(job.seed, index, stream=name)
        with _staged(renderer, job.mechanisms.get(name)):
            if job.placement is None:
                moved = scm.transform(anchors, change, seed=view_seed(job.seed, name))
                views[name] = _rendered(renderer, moved, own, keep_latents=True)
                continue
            _, views[name] = _placed(job, renderer, partial(_view_draw, scm, anchors, change,
                                                            view_seed(job.seed, name)),
                                     own, lambda i, name=name: f"view {name} of row {start + i}")
    hook = None if job.before_commit is None else partial(job.before_commit, k)
    write_chunk(group, k, data, views, before_commit=hook)
    draws = 0 if data.attempts is None else int(data.attempts.sum())
    return k, (stop - start) * (1 + len(views)), time.perf_counter() - t0, (stop - start) if draws else 0, draws


@contextlib.contextmanager
def _staged(renderer: Any, mechanism: dict[str, Any] | None) -> Iterator[None]:
    """Render a view's rows with its mechanism (``BlenderRenderer.stage``); the renderer is back to the scene as
    built afterwards, even after an error, so the next chunk's anchors never see a view's material or camera."""
    try:
        renderer.stage(mechanism)
        yield
    finally:
        renderer.stage(None)


def _placed(job: RenderJob, renderer: Any, draw: Callable[[int, np.ndarray], Samples], seeds: np.ndarray,
            what: Callable[[int], str]) -> tuple[Samples, ChunkData]:
    """Rows drawn by ``draw`` (attempt, positions) until they keep the job's placement rules, rendered with their
    rows' Cycles ``seeds`` (those of the row index, whatever the attempt); their data carries each row's draws."""
    rules = parse_rules(job.placement)
    scene = renderer.scene
    rows, data, attempts = place_rows(
        len(seeds), draw, lambda rows, pos: _rendered(renderer, rows, seeds[pos], keep_latents=True), rules, scene,
        int(job.settings["resolution"]) ** 2, what)
    return rows, replace(data, attempts=attempts)


def _view_draw(scm: SCM, anchors: Samples, change: list[str], seed: int, attempt: int, pos: np.ndarray) -> Samples:
    """Draw ``attempt`` of the view rows ``pos``: the anchors' latent transformation with the view's seed (attempt 0)
    or a seed derived from it and the attempt, so every latent outside the change set stays the anchor's."""
    return scm.transform(take(anchors, pos), change, seed=placement_seed(seed, attempt))
