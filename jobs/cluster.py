"""The Dask plumbing of every parallel job (renders, imports, experiment cells): reach an existing scheduler or
start a local cluster whose workers are set up for our tasks, keep a bounded window of chunk tasks in flight, stop
cleanly on a failure no retry can fix or on Ctrl-C, and count the workers a run lost. Below ``render``, ``ingest``
and ``pipelines``; it knows nothing of what the tasks do."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ident3d.causal.errors import UserError

CONNECT_TIMEOUT_S = 10.0  # default wait for an existing scheduler (--scheduler) before giving up
MALLOC_TRIM = "MALLOC_TRIM_THRESHOLD_"
DASK_MALLOC_TRIM = 65536  # what Dask's nanny sets in every worker's environment unless told otherwise


@dataclass(frozen=True)
class ChunkFailure:
    """A chunk failed for a reason no retry can fix (bad scene, mesh or data, a corrupt PNG, full disk): returned
    by a render or import task as a value, not raised, so Dask neither retries it nor logs a traceback; the
    driver stops the run with its one line."""

    k: int
    message: str


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
    """A LocalCluster of ``workers`` 1-task processes and its client; ``threads`` > 0 sets each one's
    $OMP_NUM_THREADS (the Cycles threads of a render worker). The workers are started with SIGINT ignored
    (inherited across exec), so Ctrl-C reaches only the driver, which stops them and says how to resume instead
    of every worker printing a KeyboardInterrupt traceback. They start without Dask's default
    $MALLOC_TRIM_THRESHOLD_ (64 KiB): it makes glibc hand every freed tensor back to the kernel, and a torch
    training cell then ran 1.8x slower at one thread (results/malloc_trim.json), mostly in system time."""
    import dask
    from dask.distributed import Client, LocalCluster

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.environ.get(MALLOC_TRIM) == str(DASK_MALLOC_TRIM):  # left behind by an earlier cluster of this process
        del os.environ[MALLOC_TRIM]
    try:
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{MALLOC_TRIM}": None}):
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                                   silence_logs=50, env={"OMP_NUM_THREADS": str(threads)} if threads else {})
        return Client(cluster), cluster
    finally:
        signal.signal(signal.SIGINT, previous)


def cpu_cores() -> int:
    """Cores this process may use (its CPU affinity where the OS tells, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def dashboard_link(client: Any) -> str:
    """The scheduler's dashboard link, or a note that it has none."""
    try:
        return str(client.dashboard_link)
    except Exception:  # noqa: BLE001 - a scheduler started without a dashboard
        return "none (the scheduler runs without one)"


def window_size(client: Any) -> int:
    """Tasks kept in flight: enough to keep every worker thread busy (x4), bounded so a job of millions of chunks
    holds a few thousand futures, not one per chunk."""
    try:
        threads = sum(client.nthreads().values())
    except Exception:  # noqa: BLE001 - a scheduler that does not say: assume a large farm
        threads = 256
    return max(16, 4 * threads)


def drain(client: Any, submit: Callable[[int], Any], todo: Iterable[int], total: int, desc: str, progress: bool,
          collect: Callable[[Any, int, Any], None], interrupted: Callable[[], str], window: int | None = None) -> None:
    """Run one task per chunk of ``todo`` (``submit(k)`` -> future), at most ``window`` (default
    :func:`window_size`) in flight, and
    collect each as it finishes with ``collect(future, chunk, bar)`` under a progress bar of ``total`` images; at a
    UserError or Ctrl-C cancel what is still queued (Ctrl-C becomes a KeyboardInterrupt saying ``interrupted()``,
    e.g. how many chunks are done and how to resume). Shared by render and import."""
    from dask.distributed import as_completed
    from tqdm import tqdm

    pending = iter(todo)
    futures: dict[Any, int] = {}
    try:
        with tqdm(total=total, unit="img", desc=desc, disable=not progress, smoothing=0.1) as bar:
            for k in take(pending, window or window_size(client)):
                futures[submit(k)] = k
            queue = as_completed(list(futures))
            for fut in queue:
                k = futures.pop(fut)
                collect(fut, k, bar)
                for nxt in take(pending, 1):
                    new = submit(nxt)
                    futures[new] = nxt
                    queue.add(new)
    except KeyboardInterrupt:
        client.cancel(list(futures))
        raise KeyboardInterrupt(interrupted()) from None
    except UserError:
        client.cancel(list(futures))
        raise


def take(it: Any, count: int) -> list[int]:
    """Up to ``count`` next items of an iterator."""
    out = []
    for x in it:
        out.append(x)
        if len(out) == count:
            break
    return out


def workers_lost(client: Any, seconds: float) -> int:
    """Worker processes the scheduler lost unexpectedly (crashed, killed) during the last ``seconds``."""
    try:
        events = client.get_events("all")
    except Exception:  # noqa: BLE001 - an older scheduler without the event log: report none
        return 0
    since = time.time() - seconds - 1.0
    return sum(1 for t, msg in events if t >= since and isinstance(msg, dict)
               and msg.get("action") == "remove-worker" and not msg.get("expected", True))


@contextmanager
def cluster_client(client: Any, workers: int, threads: int = 1, progress: bool = False) -> Iterator[tuple[Any, Any]]:
    """(client, cluster) to run tasks on: ``client`` as given (an existing scheduler's, closed by its caller; cluster
    None), or a LocalCluster of ``workers`` processes (``threads``: each one's $OMP_NUM_THREADS) started here and
    stopped on leaving. With ``progress`` the dashboard's link is printed."""
    cluster = None
    if client is None:
        client, cluster = local_cluster(workers, threads)
    try:
        if progress:
            print(f"Dask dashboard: {dashboard_link(client)}", flush=True)
        yield client, cluster
    finally:
        if cluster is not None:
            client.close()
            cluster.close()
