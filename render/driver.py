"""The Dask render driver: one task per chunk (sample or read rows -> render -> write -> mark done).

Runs on a ``LocalCluster`` of worker processes by default, or joins any scheduler
(``--scheduler tcp://HOST:PORT``, e.g. started by dask-jobqueue on SLURM/PBS). Each worker
process keeps one Blender renderer, built on its first chunk and re-posed for every image.
Chunks already marked done are skipped, so re-running a command resumes it. Given latents are
written into the store by the driver; each task reads its own rows from there.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from causal import SCM, Samples, load_scm, rng
from causal.errors import UserError
from render.store import ChunkData, chunk_bounds, done_mask, n_chunks, prepare, write_chunk, write_given

FAULT_ENV = "IDENT3D_TEST_KILL_CHUNK"  # "K:MARKER": kill the worker once, mid-chunk K (tests only)
FULL_DISK_ENV = "IDENT3D_TEST_FULL_DISK"  # "K": writing chunk K fails with ENOSPC (tests only)
CONNECT_TIMEOUT_S = 10.0  # default wait for an existing scheduler (--scheduler) before giving up
BASE_WORKER_BYTES = 400 * 2**20  # a worker's Blender with the scene built (measured RSS ~357 MB)
BUFFER_BYTES_PER_PX = 128  # Cycles' float RGBA render/denoise passes per pixel (upper estimate)
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
    workers_lost: int = 0  # worker processes that died during the run (their chunks were retried elsewhere)

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


@dataclass(frozen=True)
class ChunkFailure:
    """A chunk failed for a reason no retry can fix (bad scene, mesh or data, full disk): returned by the task as
    a value, not raised, so Dask neither retries it nor logs a traceback; the driver stops the run with it."""

    k: int
    message: str


def render_chunk(job: RenderJob, k: int) -> tuple[int, int, float] | ChunkFailure:
    """Render and write chunk k; returns (k, images, seconds), or a ChunkFailure for errors that cannot succeed
    on a retry. Other exceptions propagate: Dask retries them (a worker fault may be transient)."""
    try:
        return _render_chunk(job, k)
    except UserError as exc:
        return ChunkFailure(k, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        return ChunkFailure(k, f"no space left on the device holding {job.out} (writing chunk {k}); free some "
                               "space, then re-run the same command to resume (finished chunks are kept)")


def _full_disk_hook(k: int) -> Callable[[], None] | None:
    """Test hook: with $IDENT3D_TEST_FULL_DISK=K, writing chunk K fails as a full disk would (ENOSPC)."""
    if os.environ.get(FULL_DISK_ENV) != str(k):
        return None

    def full() -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return full


def _render_chunk(job: RenderJob, k: int) -> tuple[int, int, float]:
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
    write_chunk(group, k, data, views, before_commit=_fault_hook(k) or _full_disk_hook(k))
    return k, (stop - start) * (1 + len(views)), time.perf_counter() - t0


# ----- driver side ------------------------------------------------------------------------------
def connect(scheduler: str, timeout: float = CONNECT_TIMEOUT_S) -> Any:
    """A client of an existing scheduler, or one line saying it cannot be reached (nothing is created first)."""
    from dask.distributed import Client

    try:
        return Client(scheduler, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - any connection failure becomes one line
        why = (str(exc) or type(exc).__name__).splitlines()[0]
        raise UserError(f"cannot reach the Dask scheduler at {scheduler}: {why}; start it or drop --scheduler") \
            from None


def local_cluster(workers: int, threads: int) -> tuple[Any, Any]:
    """A LocalCluster of ``workers`` 1-thread processes and its client. The workers are started with SIGINT
    ignored (inherited across exec), so Ctrl-C reaches only the driver, which stops them and says how to resume
    instead of every worker printing a KeyboardInterrupt traceback."""
    from dask.distributed import Client, LocalCluster

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=50, env={"OMP_NUM_THREADS": str(threads)})
        return Client(cluster), cluster
    finally:
        signal.signal(signal.SIGINT, previous)


def available_memory() -> int | None:
    """Bytes of memory available to new processes (MemAvailable on Linux, else free physical pages); None if
    unknown. Shared by the memory checks of rendering and sampling."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def worker_memory(resolution: int, chunk_size: int, n_views: int) -> int:
    """Estimated peak bytes of one render worker: Blender, Cycles' buffers for one image, and the chunk's uint8
    images (anchors and views) held until they are written."""
    px = resolution * resolution
    return BASE_WORKER_BYTES + px * BUFFER_BYTES_PER_PX + chunk_size * px * 3 * (1 + n_views)


def check_memory(layout: dict[str, Any], workers: int, available: int | None = None) -> None:
    """Refuse a render whose workers would not fit in memory, with one line saying what to lower."""
    res, chunk, views = int(layout["height"]), int(layout["chunk_size"]), len(layout.get("views", []))
    need = worker_memory(res, chunk, views) * workers
    have = available_memory() if available is None else available
    if have is not None and need > have:
        raise UserError(f"{workers} worker(s) rendering {res} px images in chunks of {chunk} "
                        f"(x{1 + views} with views) need about {gb(need)} of memory but {gb(have)} is available; "
                        "lower --resolution, --chunk-size or --workers")


def gb(nbytes: int) -> str:
    """A byte count as GB for messages, e.g. '1,248.4 GB'."""
    return f"{nbytes / 2**30:,.1f} GB"


def default_workers(resolution: int) -> int:
    """Worker processes for a local cluster. Measured on 2 cores (benchmarks/render_bench.py): at 64 px one
    2-thread Blender gives 15.5 img/s vs 9.5 for two 1-thread ones; at 224 px two give 1.46 vs 0.86 for one."""
    cores = os.cpu_count() or 1
    return cores if resolution >= 128 else max(1, cores // 2)


def run(plan: RenderPlan, workers: int | None = None, scheduler: str | None = None, overwrite: bool = False,
        retries: int = 2, progress: bool = True, connect_timeout: float = CONNECT_TIMEOUT_S) -> RenderReport:
    """Create or resume the store, render every chunk not yet done, and report what happened.

    ``workers=None``: :func:`default_workers` for the plan's resolution (ignored with a ``scheduler``, which is
    reached first: an unreachable one creates nothing). Errors no retry can fix stop the run with a one-line
    ``UserError``; Ctrl-C stops it with a ``KeyboardInterrupt`` saying how many chunks are done. Finished chunks
    are kept either way, so re-running the same command resumes.
    """
    job = plan.job
    workers = workers or default_workers(int(plan.layout["height"]))
    check_memory(plan.layout, 1 if scheduler else workers)
    client = connect(scheduler, connect_timeout) if scheduler else None
    try:
        return _run(plan, client, workers, overwrite, retries, progress)
    except OSError as exc:  # the driver's own writes (store creation, given latents) on a full disk
        if exc.errno != errno.ENOSPC:
            raise
        raise UserError(f"no space left on the device holding {job.out}; free some space, then re-run the same "
                        "command to resume (finished chunks are kept)") from None
    finally:
        if client is not None:
            client.close()


def _run(plan: RenderPlan, client: Any, workers: int, overwrite: bool, retries: int, progress: bool) -> RenderReport:
    """The body of :func:`run` once the scheduler (if any) answered: prepare the store, start a local cluster
    if needed, render what is not done."""
    job = plan.job
    cluster = None
    try:
        group = prepare(job.out, plan.attrs, plan.layout, overwrite)
        done = done_mask(group)
        todo = [k for k in range(job.n_chunks) if not done[k]]
        report = RenderReport([], [k for k in range(job.n_chunks) if done[k]], {}, 0, 0.0, out=job.out, n=job.n,
                              n_chunks=job.n_chunks)
        if not todo:
            return report
        if plan.latents is not None:
            write_given(group, plan.latents, plan.classes, todo)
        if client is None:
            client, cluster = local_cluster(workers, max(1, (os.cpu_count() or 1) // max(1, workers)))
        if progress:
            print(f"Dask dashboard: {dashboard_link(client)}", flush=True)
        _render(client, job, todo, retries, progress, report, group)
        report.workers_lost = _workers_lost(client, report.seconds)
        return report
    finally:
        if cluster is not None:
            client.close()
            cluster.close()


def dashboard_link(client: Any) -> str:
    """The scheduler's dashboard link, or a note that it has none."""
    try:
        return str(client.dashboard_link)
    except Exception:  # noqa: BLE001 - a scheduler started without a dashboard
        return "none (the scheduler runs without one)"


def _render(client: Any, job: RenderJob, todo: list[int], retries: int, progress: bool, report: RenderReport,
            group: Any) -> None:
    """Submit one task per chunk and collect them into ``report``; stop at the first unfixable failure
    (UserError) or at Ctrl-C (KeyboardInterrupt with how to resume), cancelling what is still queued."""
    t0 = time.perf_counter()
    per_chunk = 1 + len(job.views)
    total = sum(np.diff(chunk_bounds(k, job.chunk_size, job.n))[0] for k in todo) * per_chunk
    futures = {client.submit(render_chunk, job, k, retries=retries, pure=False, key=f"chunk-{k}-{time.time()}"): k
               for k in todo}
    try:
        drain(client, futures, int(total), "render", progress, lambda fut, k, bar: _collect(fut, k, report, bar),
              lambda: f"interrupted: {int(done_mask(group).sum())} of {job.n_chunks} chunks done; re-run the same "
                      "command to resume")
    finally:
        report.seconds = time.perf_counter() - t0
    report.rendered.sort()


def drain(client: Any, futures: dict[Any, int], total: int, desc: str, progress: bool,
          collect: Callable[[Any, int, Any], None], interrupted: Callable[[], str]) -> None:
    """Collect chunk tasks ({future: chunk}) as they finish with ``collect(future, chunk, bar)``, under a progress bar
    of ``total`` images; at a UserError or Ctrl-C cancel what is still queued (Ctrl-C becomes a KeyboardInterrupt
    saying ``interrupted()``, e.g. how many chunks are done and how to resume). Shared by render and import."""
    from dask.distributed import as_completed
    from tqdm import tqdm

    try:
        with tqdm(total=total, unit="img", desc=desc, disable=not progress, smoothing=0.1) as bar:
            for fut in as_completed(futures):
                collect(fut, futures[fut], bar)
    except KeyboardInterrupt:
        client.cancel(list(futures))
        raise KeyboardInterrupt(interrupted()) from None
    except UserError:
        client.cancel(list(futures))
        raise


def _collect(fut: Any, k: int, report: RenderReport, bar: Any) -> None:
    """Record one finished chunk task: rendered, failed after its retries, or an unfixable ChunkFailure."""
    try:
        result = fut.result()
    except Exception as exc:  # noqa: BLE001 - report the chunk, keep the others going
        report.failed[k] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        bar.set_postfix(failed=len(report.failed))
        return
    if isinstance(result, ChunkFailure):
        raise UserError(result.message)
    _, count, _ = result
    report.rendered.append(k)
    report.images += count
    bar.update(count)


def _workers_lost(client: Any, seconds: float) -> int:
    """Worker processes the scheduler lost unexpectedly (crashed, killed) during the last ``seconds``."""
    try:
        events = client.get_events("all")
    except Exception:  # noqa: BLE001 - an older scheduler without the event log: report none
        return 0
    since = time.time() - seconds - 1.0
    return sum(1 for t, msg in events if t >= since and isinstance(msg, dict)
               and msg.get("action") == "remove-worker" and not msg.get("expected", True))
