"""The local Dask cluster every ident3d job starts (``ident3d.jobs.cluster.local_cluster``) gives its workers glibc's own
memory trimming: Dask's default ``MALLOC_TRIM_THRESHOLD_=65536`` made each freed torch tensor go back to the
kernel, and a training cell in a worker ran 1.8x slower (results/malloc_trim.json)."""

from __future__ import annotations

import os


def _worker_env() -> dict[str, str | None]:
    return {key: os.environ.get(key) for key in ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS")}


def test_workers_start_without_dasks_malloc_trim_threshold(monkeypatch):
    from ident3d.jobs.cluster import DASK_MALLOC_TRIM, MALLOC_TRIM, local_cluster

    monkeypatch.setenv(MALLOC_TRIM, str(DASK_MALLOC_TRIM))  # as an earlier cluster of this process leaves it
    client, cluster = local_cluster(1, 3)
    try:
        env = next(iter(client.run(_worker_env).values()))
    finally:
        client.close()
        cluster.close()
    assert env == {"MALLOC_TRIM_THRESHOLD_": None, "OMP_NUM_THREADS": "3"}


def test_a_plain_dask_cluster_would_set_it():
    """The control: without ident3d's setting, Dask's nanny puts the variable in the worker's environment."""
    from dask.distributed import Client, LocalCluster

    before = os.environ.get("MALLOC_TRIM_THRESHOLD_")
    try:
        with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0", silence_logs=50) as cluster, \
                Client(cluster) as client:
            env = next(iter(client.run(_worker_env).values()))
    finally:  # Dask's nanny writes it into this process's environment too; later subprocesses must not inherit it
        os.environ.pop("MALLOC_TRIM_THRESHOLD_", None)
        if before is not None:
            os.environ["MALLOC_TRIM_THRESHOLD_"] = before
    assert env["MALLOC_TRIM_THRESHOLD_"] == "65536"
