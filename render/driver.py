"""The Dask render driver: run a render, one task per chunk (the worker's ``render_chunk``: sample or read rows ->
render -> write -> mark done), submitted and collected into a ``RenderReport``.

A local job with one worker renders in this process (no cluster to start: small jobs start at once); more
workers run on a ``LocalCluster`` of worker processes, and ``--scheduler tcp://HOST:PORT`` joins any
cluster (e.g. started by dask-jobqueue on SLURM/PBS). What each worker process holds (one Blender renderer, the
thread that runs it) and the chunk body are ``ident3d.render.worker``; this module only decides, submits and
collects. Chunks already marked done are skipped, so re-running a command resumes it. Given latents are written into
the store by the driver; each task reads its own rows from there. Preparing a store (creating it, reading its done
flags, writing given latents) goes in blocks with Ctrl-C held to a block's end: an interrupt then removes a store
this run created and keeps one it resumes (``prepare_store``). Before anything is created, a job's memory, bookkeeping
and disk are checked against what the machine has (``check_memory``, ``check_bookkeeping``).
"""

from __future__ import annotations

import errno
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.jobs.cluster import (
    CONNECT_TIMEOUT_S,
    ChunkFailure,
    cluster_client,
    connect,
    cpu_cores,
    drain,
    workers_lost,
)
from ident3d.render.job import RenderJob, RenderPlan, RenderReport
from ident3d.render.settings import check_blender
from ident3d.render.worker import render_chunk
from ident3d.store.attrs import check_blender_resume
from ident3d.store.memory import check_fits, gb
from ident3d.store.zarr_io import (
    is_url,
    n_chunks,
    prepare,
    read_rows,
    store_exists,
    store_group,
    store_name,
    write_given,
)

BASE_WORKER_BYTES = 400 * 2**20  # a worker's Blender with the scene built (measured RSS ~357 MB)
BUFFER_BYTES_PER_PX = 128  # Cycles' float RGBA render/denoise passes per pixel (upper estimate)
# the driver's per-chunk state, upper estimate: the done flags and the to-do indices (9 B), the lists of chunks
# skipped, to do and rendered (36 B each as Python ints) and the done read's block (DONE_BLOCK chunks at a time:
# Zarr holds ~2.4 KB per chunk while it reads, measured, so a whole million-chunk read would take GBs)
BOOKKEEPING_BYTES_PER_CHUNK = 128
# chunks per read of the done flags and per write of given latents while a store is prepared: its memory and Ctrl-C
# grain (writing a sequence store's five given arrays took ~5 ms per chunk on 2 busy cores, so a Ctrl-C waits under
# a second; blocks of 256 to 4,096 read all 31,250 flags of --n 2000000 in the same 3.3-3.7 s as one read)
DONE_BLOCK = 128
MIN_STORED_FRACTION = 0.1  # smallest compressed/raw image size seen (0.21 at 224 px, 0.42 at 64 px): disk check


def worker_memory(resolution: int, chunk_size: int, n_views: int, masks: bool = False) -> int:
    """Estimated peak bytes of one render worker: Blender, Cycles' buffers for one image, and the chunk's uint8
    images (anchors and views) held until they are written, and their masks (``masks``: object slots)."""
    px = resolution * resolution
    return BASE_WORKER_BYTES + px * BUFFER_BYTES_PER_PX + chunk_size * px * (3 + int(masks)) * (1 + n_views)


def check_memory(layout: dict[str, Any], workers: int, available: int | None = None,
                 chunk_flags: str = "--chunk-size") -> None:
    """Refuse a render whose workers would not fit in memory (:func:`store.memory.check_fits`), with one line saying
    what to lower (``chunk_flags``: the flags that set a chunk's images, e.g. a sequence render's)."""
    res, chunk, views = int(layout["height"]), int(layout["chunk_size"]), len(layout.get("views", []))
    check_fits(worker_memory(res, chunk, views, bool(layout.get("slots"))) * workers,
               f"{workers} worker(s) rendering {res} px images in chunks of {chunk:,} (x{1 + views} with views) need",
               f"lower --resolution, {chunk_flags} or --workers", available)


def default_workers(resolution: int, device: str = "cpu") -> int:
    """Worker processes for a local job; each gets cores // workers Cycles threads. A GPU device: one worker (it
    does not split the cores). On the CPU one process per ``THREADS_PER_WORKER`` cores: measured on 2 cores
    (benchmarks/render_bench.py sweeps the splits at 64, 128 and 224 px, results/render_bench.json), one 2-thread
    process beats two 1-thread processes at every resolution (by 19%, 34% and 31%); above 8 cores the split is a
    guess (Cycles' per-image serial work, about 5 ms, idles more threads on small images), not a measurement.
    ``resolution`` is kept for callers and for a split that depends on it."""
    if device == "gpu":
        return 1
    return max(1, cpu_cores() // THREADS_PER_WORKER)


THREADS_PER_WORKER = 8  # cores one local render process takes before another is started (see default_workers)


def check_bookkeeping(job: RenderJob, available: int | None = None, free_disk: int | None = None) -> None:
    """Refuse an ``n`` whose per-chunk bookkeeping would not fit in memory, or whose store would not fit on the
    local disk even at the best compression seen, before anything is created (one line, the flags to change)."""
    chunks = n_chunks(job.n, job.chunk_size)
    check_fits(chunks * BOOKKEEPING_BYTES_PER_CHUNK, f"--n {job.n:,} in chunks of {job.chunk_size} makes "
               f"{chunks:,} chunks whose bookkeeping needs", "lower --n or raise --chunk-size", available)
    res = int(job.settings["resolution"])
    store = int(job.n * res * res * 3 * (1 + len(job.views)) * MIN_STORED_FRACTION)
    if free_disk is None and not is_url(job.out):
        parent = next((q for q in [Path(job.out), *Path(job.out).parents] if q.exists()), Path("."))
        usage = shutil.disk_usage(parent)
        free_disk = usage.free if usage.total else None  # a virtual file system (/proc) has no size to compare
    if free_disk is not None and store > free_disk:
        raise UserError(f"--n {job.n:,} images of {res} px need at least {gb(store)} of disk for the store "
                        f"(at {MIN_STORED_FRACTION:.0%} of their raw size, the best compression seen) but "
                        f"{gb(free_disk)} is free at {job.out}; lower --n or --resolution, or choose another --out")


def run(plan: RenderPlan, workers: int | None = None, scheduler: str | None = None, overwrite: bool = False,
        retries: int = 2, progress: bool = True, connect_timeout: float = CONNECT_TIMEOUT_S,
        threads: int | None = None, allow_blender_change: bool = False) -> RenderReport:
    """Create or resume the store, render every chunk not yet done, and report what happened.

    ``workers=None``: :func:`default_workers` for the plan's resolution and device (ignored with a ``scheduler``,
    which is reached first: an unreachable one creates nothing). One local worker (or a single chunk to do) renders
    in this process, without a cluster. ``threads``: Cycles threads per worker process (default: the cores split
    evenly between the local workers; with a scheduler, each worker's own thread count). Errors no retry can fix
    stop the run with a one-line ``UserError``; Ctrl-C stops it with a ``KeyboardInterrupt`` saying how many chunks
    are done (counted once the workers stopped). Finished chunks are kept either way, so re-running resumes. Ctrl-C
    while the store is prepared, before any chunk renders, removes a store this run created (:func:`prepare_store`).
    Resuming a store another Blender rendered is refused unless ``allow_blender_change``.
    """
    job = plan.job
    # local workers need bpy here (a cluster's workers say so themselves, bpy_module); a finished store renders
    # nothing, so it resumes without bpy (a GPU machine trains on stores carried there)
    if scheduler is None and not finished(job.out):
        check_blender()
    device = str(job.settings.get("device", "cpu"))
    workers = workers or default_workers(int(plan.layout["height"]), device)
    check_bookkeeping(job)
    check_memory(plan.layout, 1 if scheduler else workers)
    client = connect(scheduler, connect_timeout) if scheduler else None
    try:
        return _run(plan, client, workers, threads, overwrite, retries, progress, allow_blender_change)
    except OSError as exc:  # the driver's own writes (store creation, given latents) on a full disk
        if exc.errno != errno.ENOSPC:
            raise
        raise UserError(f"no space left on the device holding {job.out}; free some space, then re-run the same "
                        "command to resume (finished chunks are kept)") from None
    finally:
        if client is not None:
            client.close()


def _run(plan: RenderPlan, client: Any, workers: int, threads: int | None, overwrite: bool, retries: int,
         progress: bool, allow_blender_change: bool = False) -> RenderReport:
    """The body of :func:`run` once the scheduler (if any) answered: prepare the store, render what is not done
    in this process or on a cluster (a local one started here when more than one worker is wanted)."""
    job = plan.job
    group, done = prepare_store(plan, overwrite, allow_blender_change)
    todo = np.flatnonzero(~done)
    report = RenderReport([], np.flatnonzero(done).tolist(), {}, 0, 0.0, out=job.out, n=job.n,
                          n_chunks=job.n_chunks)
    if not len(todo):
        return report
    gpu = job.settings.get("device") == "gpu"
    if client is None and (workers == 1 or len(todo) == 1):
        job = replace(job, threads=threads or (0 if gpu else cpu_cores()))
        _render_inline(job, todo, retries, progress, report, group)
        return report
    if threads:
        job = replace(job, threads=threads)
    with cluster_client(client, workers, 0 if gpu else max(1, cpu_cores() // workers), progress) as (client, cluster):
        _render(client, cluster, job, todo, retries, progress, report, group)
        report.workers_lost = workers_lost(client, report.seconds)
    return report


class HeldInterrupt:
    """Ctrl-C held while a store is prepared: the handler only records it and :meth:`check` raises it between
    blocks of Zarr I/O, so none is left in flight (Zarr's event loop would print two lines per pending task at
    exit, and a write landing after the clean-up would bring a removed store back). Only Python's own handler in
    the main thread is replaced; elsewhere (another handler, a thread) Ctrl-C arrives as it would."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> HeldInterrupt:
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum: int, frame: Any) -> None:
        """The SIGINT handler while held: remember it."""
        self.requested = True

    def check(self) -> None:
        """Raise the Ctrl-C held so far (a KeyboardInterrupt), if any."""
        if self.requested:
            self.requested = False
            raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


def prepare_store(plan: RenderPlan, overwrite: bool, allow_blender_change: bool = False) -> tuple[Any, np.ndarray]:
    """Create the store or reopen it to resume, read which chunks are done and write the given latents of the
    others, in blocks of ``DONE_BLOCK`` chunks with Ctrl-C held until a block ends (:class:`HeldInterrupt`);
    returns the group and the done flags. A store created here has none done: its flags are not read.

    Ctrl-C here (before any chunk is rendered) is a KeyboardInterrupt saying what became of the store: one this
    run created (new, or replaced with ``overwrite``) is removed, an empty folder given as ``out`` is left empty,
    so re-running starts afresh; a store being resumed (or any store at a URL) is kept, complete in its arrays
    (creating them is never cut short) and with its given latents rewritten at every start, so re-running resumes.
    A store with chunks left to render that another Blender made is refused before anything is written, unless
    ``allow_blender_change`` (``ident3d.store.attrs.check_blender_resume``); a complete one is only skipped.
    """
    out = plan.job.out
    local = not is_url(out)
    fresh = local and (overwrite or not (Path(out) / "zarr.json").is_file())
    empty_folder = local and Path(out).is_dir() and not any(Path(out).iterdir())
    with HeldInterrupt() as held:
        try:
            group = prepare(out, plan.attrs, plan.layout, overwrite)
            done = np.zeros(plan.job.n_chunks, bool) if fresh else read_done(group, held.check)
            if not fresh and not done.all():
                check_blender_resume(group, allow_blender_change, out)
            if plan.latents is not None:
                todo = np.flatnonzero(~done)
                for start in range(0, len(todo), DONE_BLOCK):
                    held.check()
                    write_given(group, plan.latents, plan.classes, todo[start:start + DONE_BLOCK].tolist(),
                                plan.extra)
            held.check()
        except KeyboardInterrupt:
            raise KeyboardInterrupt(_abandon(out, fresh, empty_folder)) from None
    return group, done


def finished(out: str) -> bool:
    """Whether ``out`` is a store every chunk of which is done (False where there is none, or it cannot be read; a
    URL the backend cannot reach, e.g. without credentials, is the one-line error of ``store_exists``)."""

    if is_url(out) and not store_exists(out):
        return False
    try:
        group = store_group(out, mode="r")
        return "done" in group and bool(read_done(group).all())
    except (OSError, KeyError, ValueError):
        return False


def read_done(group: Any, between: Callable[[], None] = lambda: None) -> np.ndarray:
    """The store's done flags, read ``DONE_BLOCK`` chunks at a time (Zarr holds ~2.4 KB per chunk while it reads:
    one read of a million-chunk store's flags would take GBs), calling ``between()`` before each read."""
    flags, path = group["done"], store_name(group)
    parts = [np.zeros(0, bool)]
    for start in range(0, flags.shape[0], DONE_BLOCK):
        between()
        parts.append(np.asarray(read_rows(flags, slice(start, start + DONE_BLOCK), path), dtype=bool))
    return np.concatenate(parts)


def _abandon(out: str, fresh: bool, empty_folder: bool) -> str:
    """After Ctrl-C while preparing ``out``: remove it if this run created it (re-make the empty folder it was),
    and say so and how to go on."""
    if not fresh:
        return f"interrupted while preparing {out}, before any chunk was rendered; the store is kept as it was: " \
               "re-run the same command to resume"
    shutil.rmtree(out, ignore_errors=True)
    if empty_folder:
        Path(out).mkdir(parents=True, exist_ok=True)
    return f"interrupted while preparing {out}, before any chunk was rendered; the partial store was removed: " \
           "re-run the same command to start it"


def _images(job: RenderJob, todo: np.ndarray) -> int:
    """Images the chunks ``todo`` hold, anchors and views."""
    rows = len(todo) * job.chunk_size
    if len(todo) and todo[-1] == job.n_chunks - 1:  # the last chunk may be short
        rows -= job.n_chunks * job.chunk_size - job.n
    return int(rows) * (1 + len(job.views))


def _interrupted(job: RenderJob, done: int, note: str = "") -> str:
    """The Ctrl-C message: ``done`` chunks done now (counted once the workers stopped) and how to resume."""
    return f"interrupted: {done} of {job.n_chunks} chunks done{note}; re-run the same command to resume"


def _inline_done(report: RenderReport, group: Any, current: int | None) -> int:
    """Chunks done when an in-process render stopped: those skipped and rendered, and the one it was on if its flag
    was set before the stop (read alone: reading every flag of a million-chunk store takes minutes)."""
    count = len(report.skipped) + len(report.rendered)
    if current is not None and report.rendered[-1:] != [current] and bool(group["done"][current]):
        count += 1
    return count


def _render_inline(job: RenderJob, todo: np.ndarray, retries: int, progress: bool, report: RenderReport,
                   group: Any) -> None:
    """Render the chunks ``todo`` one after another in this process (no cluster): the same task as a Dask worker
    runs, retried ``retries`` times on an unexpected error; Ctrl-C stops between frame sequences."""
    from tqdm import tqdm

    t0, current = time.perf_counter(), None
    try:
        with tqdm(total=_images(job, todo), unit="img", desc="render", disable=not progress, smoothing=0.1) as bar:
            for k in todo.tolist():
                current = k
                for attempt in range(retries + 1):
                    try:
                        result = render_chunk(job, k)
                        break
                    except (KeyboardInterrupt, MemoryError):
                        raise
                    except Exception as exc:  # noqa: BLE001 - retried, then reported like a Dask task's failure
                        if attempt == retries:
                            result = exc
                _record(result, k, report, bar)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(_interrupted(job, _inline_done(report, group, current))) from None
    finally:
        report.seconds = time.perf_counter() - t0
    report.rendered.sort()


def _render(client: Any, cluster: Any, job: RenderJob, todo: np.ndarray, retries: int, progress: bool,
            report: RenderReport, group: Any) -> None:
    """One task per chunk on the cluster, collected into ``report``; stop at the first unfixable failure
    (UserError) or at Ctrl-C (a KeyboardInterrupt saying how to resume, counted after a local cluster's workers
    stopped; a remote cluster may still finish the chunks it is rendering)."""
    t0, run_id = time.perf_counter(), f"{time.time():.6f}"

    def submit(k: int) -> Any:
        return client.submit(render_chunk, job, k, retries=retries, pure=False, key=f"chunk-{k}-{run_id}")

    def interrupted() -> str:
        if cluster is not None:
            cluster.close()  # stop the workers first, so the count is final
            return _interrupted(job, int(read_done(group).sum()))
        return _interrupted(job, int(read_done(group).sum()), " (chunks still running on the cluster may finish)")

    try:
        drain(client, submit, todo.tolist(), _images(job, todo), "render", progress,
              lambda fut, k, bar: _collect(fut, k, report, bar), interrupted)
    finally:
        report.seconds = time.perf_counter() - t0
    report.rendered.sort()


def _collect(fut: Any, k: int, report: RenderReport, bar: Any) -> None:
    """Record one finished chunk task: rendered, failed after its retries, or an unfixable ChunkFailure."""
    try:
        result = fut.result()
    except Exception as exc:  # noqa: BLE001 - report the chunk, keep the others going
        result = exc
    _record(result, k, report, bar)


def _record(result: Any, k: int, report: RenderReport, bar: Any) -> None:
    """A chunk's outcome into the report: rendered (k, images, s), failed (an exception), or a ChunkFailure that
    stops the run."""
    if isinstance(result, ChunkFailure):
        raise UserError(result.message)
    if isinstance(result, BaseException):
        report.failed[k] = f"{type(result).__name__}: {result}".splitlines()[0]
        bar.set_postfix(failed=len(report.failed))
        return
    count = result[1]
    report.rendered.append(k)
    report.images += count
    if len(result) > 3:  # placement: the anchor rows and their draws
        report.placed_rows += result[3]
        report.placement_draws += result[4]
    bar.update(count)
