"""The render driver's decisions without rendering: the default split, the bounds on a job's size, and the
windowed task submission that keeps a million-chunk job from holding a million futures (a real in-process Dask
client)."""

import pytest

from ident3d.causal import UserError
from ident3d.jobs.cluster import drain
from ident3d.render import plan_render
from ident3d.render.driver import check_bookkeeping, default_workers


def test_default_split_by_cores_and_device(monkeypatch):
    import ident3d.render.driver as d

    monkeypatch.setattr(d, "cpu_cores", lambda: 2)
    assert default_workers(64) == 1 and default_workers(224) == 1  # one 2-thread process: measured best on 2 cores
    monkeypatch.setattr(d, "cpu_cores", lambda: 16)
    assert default_workers(64) == 2  # one process per 8 cores
    assert default_workers(224, "gpu") == 1 and default_workers(64, "gpu") == 1  # a GPU does not split the cores


def test_bookkeeping_and_disk_bounds(tmp_path):
    job = plan_render(tmp_path / "s.zarr", n=10**9, chunk_size=64, settings={"resolution": 32}).job
    check_bookkeeping(job, available=8 * 2**30, free_disk=10**13)  # 15.6 M chunks x 64 B = 1 GB: fits in 8 GB
    with pytest.raises(UserError, match=r"--n 1,000,000,000 in chunks of 64 makes 15,625,000 chunks .* raise "
                                        r"--chunk-size"):
        check_bookkeeping(job, available=2**30, free_disk=10**13)
    with pytest.raises(UserError, match=r"need at least 286.1 GB of disk .* but 93.1 GB is free"):
        check_bookkeeping(job, available=8 * 2**30, free_disk=10**11)  # 1e9 x 32 x 32 x 3 x 10%


def test_drain_keeps_a_bounded_window_of_tasks_in_flight():
    from dask.distributed import Client, LocalCluster

    seen, in_flight, peak = [], set(), []

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        def submit(k):
            in_flight.add(k)
            peak.append(len(in_flight))
            return client.submit(lambda x: x * x, k, pure=False)

        def collect(fut, k, bar):
            in_flight.discard(k)
            seen.append((k, fut.result()))

        drain(client, submit, range(50), 50, "test", False, collect, lambda: "stopped", window=3)
    assert sorted(seen) == [(k, k * k) for k in range(50)]
    assert max(peak) == 3  # never more than the window submitted and not yet collected
