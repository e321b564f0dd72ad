"""The suite's thread counts: under pytest-xdist each worker process gets one torch thread (two workers on two cores
each running torch's default of all cores oversubscribe them; a test that needs another count sets and restores it)."""

import os


def pytest_configure(config):
    """One torch thread per xdist worker (not in a plain, single-process run)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
