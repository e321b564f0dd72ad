"""The suite's thread counts: under pytest-xdist each worker process gets one torch thread and one BLAS/OpenMP thread
(two workers on two cores each running torch's or OpenBLAS's default of all cores oversubscribe them; a test that
needs another count sets and restores it). Processes a test starts keep their own defaults."""

import os

import pytest


def pytest_configure(config):
    """One torch and one BLAS thread per xdist worker (not in a plain, single-process run)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(1)
        threadpool_limits(1)  # numpy's OpenBLAS, scikit-learn's OpenMP: for the rest of the worker's life


# the longest tests (tens of seconds each on one core), started first: at the end of a run one of them would leave the
# other xdist worker idle for its length (ordering only; each still runs exactly once)
SLOW_FIRST = ("tests/test_temporal_e2e.py::test_citris_vae_beats_untrained_encoder_and_shuffled_targets",
              "tests/test_compare.py::test_demo_end_to_end", "tests/test_goldens.py::",
              "tests/test_benchmarks_tiny.py::test_tiny_run[synthetic_workers]")


def pytest_collection_modifyitems(config, items):
    """The ``SLOW_FIRST`` tests at the front, every other test in its collected order (the sort is stable)."""
    items.sort(key=lambda item: not item.nodeid.startswith(SLOW_FIRST))


@pytest.fixture(scope="session")
def tiny_store(tmp_path_factory):
    """``helpers.render_tiny_store``'s store, rendered once per test process for the modules that train on it; tests
    only read it (one that changes a store changes a copy)."""
    from helpers import render_tiny_store

    return render_tiny_store(tmp_path_factory.mktemp("tiny") / "c3d32.zarr")
