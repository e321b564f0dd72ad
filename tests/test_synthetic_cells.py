"""Issue 20, items 1, 2, 4, 7, 10 and 13 for ``ident3d synthetic`` (and the cell keys ``compare`` shares): a cell is
reused only for the settings that made it, --out must be a synthetic output, the whole config is checked before any
work, a cell killed (SIGKILL) or interrupted (Ctrl-C) resumes to the uninterrupted run's scores with one metrics row
per step, and Ctrl-C says where it stopped. Cells are a 3-latent box/normal problem with a 16-16 MLP (about 1 s)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import assert_refused, default_sigint, run_cli, tree_digest

REPO = Path(__file__).resolve().parents[1]
CFG = {
    "name": "tiny", "seeds": [0],
    "train": {"objective": "lp_infonce", "encoder": "mlp", "encoder_args": {"hidden": [16, 16]}, "out_dim": 3,
              "steps": 600, "batch_size": 64, "lr": 0.003, "amp": False, "log_every": 10, "checkpoint_every": 1000},
    "evaluate": {"fit": 500, "score": 500},
    "rows": [{"name": "box normal", "source": {"kind": "latent_pairs", "space": "box", "conditional": "normal",
                                               "scale": 0.05, "dim": 3}, "hp": {"p": 2}}],
}
CELL = Path("cells/box_normal/seed_0")


def write_config(folder: Path, cfg: dict = CFG) -> Path:
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def synthetic(config: Path, out: Path, *extra):
    return run_cli("synthetic", "--config", config, "--out", out, "--no-progress", "--no-figures", *extra)


def steps_logged(cell: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (cell / "metrics.jsonl").read_text().splitlines()]


def without_time(scores: dict) -> dict:
    return {k: v for k, v in scores.items() if k != "train_seconds"}


# ----- item 1: a cell is reused only for its own settings -------------------------------------------------------
def test_a_changed_setting_runs_the_cell_again_and_keeps_the_old_one(tmp_path):
    config, out = write_config(tmp_path), tmp_path / "out"
    assert synthetic(config, out, "--steps", "5").returncode == 0
    five = (out / CELL / "scores.json").read_text()
    r = synthetic(config, out, "--steps", "5")  # same settings: the finished cell is reused, not retrained
    assert r.returncode == 0 and (out / CELL / "scores.json").read_text() == five and steps_logged(out / CELL) == [5]
    r = synthetic(config, out, "--steps", "10")
    assert r.returncode == 0, r.stderr
    assert "settings changed: train.steps 5 -> 10; moved it to seed_0.stale-1" in r.stdout, r.stdout
    assert steps_logged(out / CELL) == [10] and (out / CELL / "scores.json").read_text() != five
    assert (out / "cells/box_normal/seed_0.stale-1/scores.json").read_text() == five  # moved aside, not lost
    table = json.loads((out / "table.json").read_text())
    assert table["rows"]["box normal"]["stats"]["linear_r2"]["mean"] == json.loads(
        (out / CELL / "scores.json").read_text())["linear_r2"]
    # a hyperparameter written differently but equal (2 vs 2.0) is the same cell; another value is not
    cfg = json.loads(json.dumps(CFG))
    cfg["rows"][0]["hp"] = {"p": 2.0}
    r = synthetic(write_config(tmp_path, cfg), out, "--steps", "10")
    assert r.returncode == 0 and "settings changed" not in r.stdout and steps_logged(out / CELL) == [10]
    cfg["train"]["lr"] = 0.002
    r = synthetic(write_config(tmp_path, cfg), out, "--steps", "10")
    assert "train.lr 0.003 -> 0.002" in r.stdout and (out / "cells/box_normal/seed_0.stale-2").is_dir(), r.stdout
    assert "figures" not in r.stdout and not (out / "figures").exists()  # --no-figures: no folder named


def test_cells_on_two_workers_score_as_in_one_process(tmp_path):
    """`--workers 2` runs the cells on a local Dask cluster (the engine compare uses): the same table, and every
    cell's weights bit-identical to the serial run's (both at one torch thread: thread counts are set, not
    inherited); a diverged cell would be reported by the same policy."""
    import torch

    cfg = json.loads(json.dumps(CFG))
    cfg["seeds"] = [0, 1]
    config = write_config(tmp_path, cfg)
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        r = synthetic(config, serial, "--steps", "20")
    finally:
        torch.set_num_threads(threads)
    assert r.returncode == 0, r.stderr
    r = synthetic(config, parallel, "--steps", "20", "--workers", "2")
    assert r.returncode == 0 and "Dask dashboard" in r.stdout, r.stderr[-2000:]
    for seed in (0, 1):
        cell = Path(f"cells/box_normal/seed_{seed}")
        a = torch.load(serial / cell / "checkpoint.pt", weights_only=False)["model"]
        b = torch.load(parallel / cell / "checkpoint.pt", weights_only=False)["model"]
        assert all(torch.equal(a[k], b[k]) for k in a)
        assert without_time(json.loads((serial / cell / "scores.json").read_text())) == \
            without_time(json.loads((parallel / cell / "scores.json").read_text()))
    seeds_differ = json.loads((serial / "cells/box_normal/seed_0/scores.json").read_text())["linear_r2"] != \
        json.loads((serial / "cells/box_normal/seed_1/scores.json").read_text())["linear_r2"]
    assert seeds_differ  # the two cells are two different runs, so equal tables are not an accident


def test_compare_cells_use_the_same_keys(tmp_path):
    """compare keys its (view maker, seed) cells by the same helper: a cell trained with other steps is moved aside."""
    from ident3d.pipelines.cells import claim_cell, matches
    from ident3d.pipelines.kinds.compare import CompareConfig, cell_settings
    from ident3d.training.hparams import parse_config

    raw = yaml.safe_load((REPO / "configs/da_vs_lt_small.yaml").read_text())

    def settings(stores: dict[str, str]) -> dict:
        cfg = parse_config(CompareConfig, raw, "x")
        return cell_settings(cfg, cfg.rows[0], 0, stores)

    stores = {"train": "sha-train", "test": "sha-test"}
    cell = tmp_path / "cells" / "seed0"
    claim_cell(cell, settings(stores), say=lambda text: None)
    (cell / "report.json").write_text("{}")
    assert matches(cell, settings(stores))
    raw["train"]["hp"]["tau"] = 1  # the same value in another type
    assert matches(cell, settings(stores))
    raw["train"]["steps"] = 500
    said = []
    claim_cell(cell, settings(stores), say=said.append)
    assert not (cell / "report.json").exists() and (tmp_path / "cells/seed0.stale-1/report.json").exists()
    assert "train.steps 250 -> 500" in said[0]
    assert not matches(cell, settings({**stores, "train": "another train store"}))
    assert matches(cell, settings({**stores, "test": "another test store"}))  # scoring only


# ----- item 2: --out must be a synthetic output ----------------------------------------------------------------
def test_out_that_is_not_a_synthetic_output_is_refused(tmp_path):
    config = write_config(tmp_path)
    run = tmp_path / "run"  # a training run's folder
    run.mkdir()
    for name in ("config.json", "metrics.jsonl", "checkpoint.pt"):
        (run / name).write_text("{}\n")
    before = tree_digest(tmp_path)
    assert_refused(synthetic(config, run, "--steps", "2"), str(run), "is not empty and not an ident3d synthetic output",
                   "config.json")
    assert tree_digest(tmp_path) == before
    other, other_cfg = tmp_path / "other", tmp_path / "other_cfg"
    other_cfg.mkdir()
    assert synthetic(write_config(other_cfg, {**CFG, "name": "another"}), other, "--steps", "2").returncode == 0
    before = tree_digest(tmp_path)
    assert_refused(synthetic(config, other, "--steps", "2"), "holds the synthetic experiment 'another', not 'tiny'")
    assert tree_digest(tmp_path) == before


# ----- item 7: the whole config is checked before any work --------------------------------------------------------
def _edit(path, value):
    def apply(cfg):
        node = cfg
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return apply


@pytest.mark.parametrize("edit,expected", [
    (_edit(["evaluate", "fit"], -10), "evaluate.fit: must be a whole number >= 10, got -10"),
    (_edit(["evaluate", "n_fit"], 500), "evaluate.n_fit is now evaluate.fit, the name every experiment kind uses"),
    (_edit(["evaluate", "kernel"], "yes"), "evaluate.kernel: must be true or false, got 'yes'"),
    (_edit(["train", "amp"], "maybe"), "train.amp: must be true or false, got 'maybe'"),
    (_edit(["rows", 0, "expect"], {"linear_r2": {"min": "high"}}), "rows[0].expect.linear_r2.min: must be a finite number or null, got 'high'"),
    (_edit(["rows", 0, "note"], ["a", "list"]), "rows[0].note: must be text, got ['a', 'list']"),
    (_edit(["rows", 0, "hp"], {"p": 2, "tau": "abc"}),
     "rows[0] (box normal): objective lp_infonce's hyperparameter tau must be a finite number > 0, got 'abc'"),
    (_edit(["seeds"], [0, -1]), "seeds[1]: must be a whole number >= 0, got -1"),
])
def test_bad_config_is_refused_before_any_work(tmp_path, edit, expected):
    cfg = json.loads(json.dumps(CFG))
    edit(cfg)
    config = write_config(tmp_path, cfg)
    r = synthetic(config, tmp_path / "out", "--steps", "2")
    assert_refused(r, f"config {config}", expected)
    assert not (tmp_path / "out").exists()


# ----- items 4 and 10: a killed or interrupted cell resumes to the uninterrupted scores -----------------------------
@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted cell (600 steps): its scores and metrics."""
    folder = tmp_path_factory.mktemp("reference")
    r = synthetic(write_config(folder), folder / "out")
    assert r.returncode == 0, r.stderr
    cell = folder / "out" / CELL
    return json.loads((cell / "scores.json").read_text()), (cell / "metrics.jsonl").read_text().splitlines()


def _start_and_stop(tmp_path: Path, sig: int) -> tuple[subprocess.CompletedProcess, Path]:
    """Start the cell in a real process, send ``sig`` once it has a checkpoint, and wait for it to end."""
    config, out = write_config(tmp_path), tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "ident3d.pipelines.cli", "synthetic", "--config", str(config), "--out",
                             str(out), "--no-progress", "--no-figures"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_sigint,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 120
    while not (out / CELL / "checkpoint.pt").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(proc.pid, sig)
    stdout, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), out


def _checkpoint_step(cell: Path) -> int:
    import torch

    return int(torch.load(cell / "checkpoint.pt", weights_only=False)["step"])


def _assert_resumes_to_reference(out: Path, reference, stopped: int) -> None:
    scores, metrics = reference
    assert 0 < _checkpoint_step(out / CELL) < 600 and not (out / CELL / "scores.json").exists()
    r = synthetic(write_config(out.parent), out)  # the same command again
    assert r.returncode == 0 and "settings changed" not in r.stdout, r.stderr
    resumed = json.loads((out / CELL / "scores.json").read_text())
    assert without_time(resumed) == without_time(scores)
    rows = [json.loads(line) for line in (out / CELL / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(10, 601, 10))  # one row per logged step, none twice
    assert [r["loss"] for r in rows] == [json.loads(line)["loss"] for line in metrics]
    assert all(a["seconds"] <= b["seconds"] for a, b in zip(rows, rows[1:], strict=False))  # one clock over both runs
    assert resumed["train_seconds"] == rows[-1]["seconds"]


def test_a_killed_cell_resumes_from_its_checkpoint(tmp_path, reference):
    """Its steps (600) are below checkpoint_every (1000): the cell still checkpoints along the way."""
    r, out = _start_and_stop(tmp_path, signal.SIGKILL)
    assert r.returncode == -signal.SIGKILL
    _assert_resumes_to_reference(out, reference, _checkpoint_step(out / CELL))


def test_ctrl_c_checkpoints_says_where_and_resumes(tmp_path, reference):
    r, out = _start_and_stop(tmp_path, signal.SIGINT)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 130 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    stopped = _checkpoint_step(out / CELL)
    assert lines[0] == (f"ident3d synthetic: interrupted in cell 'box normal' seed 0 at step {stopped}; its checkpoint "
                        f"of step {stopped} is kept; 0 of 1 cells done; re-run the same command to resume"), lines[0]
    _assert_resumes_to_reference(out, reference, stopped)
