"""Issue 42 §3, experiments: a config is checked whole before any store is made (``--dry-run`` checks what a run
checks before its first step), and experiment outputs are local folders (an ``s3://`` --out is refused, not written
to a local folder named ``s3:``)."""

from __future__ import annotations

import pytest
import yaml
from helpers import run_cli

COMPARE = {"kind": "compare", "name": "c",
           "stores": {"train": {"n": 16, "resolution": 16, "samples": 1}, "test": {"n": 8, "resolution": 16,
                                                                                   "samples": 1}},
           "train": {"objective": "infonce", "encoder": "cnn", "out_dim": 8, "steps": 2, "batch_size": 8},
           "rows": [{"name": "a", "views": "colour"}]}


def config(tmp_path, **edit) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**COMPARE, **edit}))
    return str(path)


@pytest.mark.parametrize("edit, says", [
    ({"stores": {"train": {"dataset": "digits", "split": "train", "n": 100000},
                 "test": {"dataset": "digits", "split": "test"}}},
     "stores.train.n: is 100,000 but digits (train) has 1,797 images; lower n or leave it out (all of them)"),
    ({"stores": {"train": {"n": 10**12, "resolution": 16, "samples": 1}, "test": COMPARE["stores"]["test"]}},
     "stores.train: --n 1,000,000,000,000 in chunks of 64 makes 15,625,000,000 chunks whose bookkeeping needs about"),
    ({"rows": [{"name": "a", "views": "next_frame"}]},
     "row 'a' (views next_frame) needs a sequence store (sequences: and length:), which stores.train is not; "
     "change stores.train or the row's views"),
    ({"metrics": ["fg_ari"]},
     "metric fg_ari needs a multi-object store (scene: multi3dident, masks and per-object latents), which stores.test "
     "is not; change stores.test or the metric"),
    ({"metrics": ["temporal"]},
     "metric temporal needs a sequence store (sequences: and length:), which stores.test is not"),
])
def test_what_a_run_would_refuse_after_rendering_is_refused_by_a_dry_run_and_before_any_store(tmp_path, edit, says):
    path = config(tmp_path, **edit)
    for extra in (("--dry-run",), ()):
        r = run_cli("experiment", path, "--out", tmp_path / "out", *extra)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert says in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_a_multi_object_test_store_passes_the_object_metrics_check(tmp_path):
    """The negative control: the same metric with a multi-object scene is ok (the check reads the planned store)."""
    path = config(tmp_path, scene="multi3dident", metrics=["fg_ari"],
                  stores={"train": {"n": 16, "resolution": 16, "samples": 1, "scm": "multi3dident_independent"},
                          "test": {"n": 8, "resolution": 16, "samples": 1, "scm": "multi3dident_independent"}})
    r = run_cli("experiment", path, "--dry-run", "--out", tmp_path / "out")
    assert r.returncode == 0 and r.stdout.startswith(f"config {path}: ok"), r.stderr


@pytest.mark.parametrize("extra", [(), ("--dry-run",)])
def test_an_object_storage_out_is_refused_not_written_locally(tmp_path, monkeypatch, extra):
    monkeypatch.chdir(tmp_path)
    path = config(tmp_path)
    r = run_cli("experiment", path, "--out", "s3://bucket/x", *extra)
    assert r.returncode == 2 and r.stderr.strip() == (
        "ident3d experiment: error: --out s3://bucket/x: this output is a local folder (object storage holds stores: "
        "ident3d render --out s3://...); give a local folder and copy the results up when done"), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_a_seed_beyond_torchs_range_is_one_line(tmp_path):
    r = run_cli("train", "--data", tmp_path / "none.zarr", "--seed", str(10**23), "--out", tmp_path / "run")
    assert r.returncode == 2 and r.stderr.strip().endswith(
        f"--seed must be a whole number in [0, {2**63 - 1}], got {10**23}; e.g. --seed 0")
    assert not (tmp_path / "run").exists()
