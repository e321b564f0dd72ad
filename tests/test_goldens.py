"""The refactor goldens as a test: tiny render, export/import, train, evaluate, compare and synthetic jobs through the
CLI give the digests recorded in results/goldens_issue22.json (those of the code before issue 22's redesign, which
the redesign kept, with the changes recorded since, each named with its reason). Float results depend on the CPU and the library versions, so the test runs where they are the
recorded ones and says why it skips elsewhere (benchmarks/goldens.py then compares two checkouts on one machine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import benchmark

ROOT = Path(__file__).resolve().parents[1]


def test_tiny_jobs_give_the_recorded_digests(tmp_path):
    goldens = benchmark("goldens")
    recorded = json.loads((ROOT / "results" / "goldens_issue22.json").read_text())
    here = goldens.machine()
    if here != recorded["machine"]:
        differ = sorted(k for k in here if here[k] != recorded["machine"].get(k))
        pytest.skip(f"the goldens were recorded on another machine ({', '.join(differ)} differ)")
    assert recorded["before"]["digests"] == recorded["after"]["digests"]  # what the redesign kept
    now = recorded["now"]["digests"]  # since then, only the jobs a recorded change names may differ
    assert {k for k in now if now[k] != recorded["after"]["digests"][k]} == {c["job"] for c in recorded["changed_since"]}
    assert goldens.run_all(tmp_path) == now
