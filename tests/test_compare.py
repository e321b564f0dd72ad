"""ident3d compare/demo: config validation (one-line errors, exit 2) and the demo end to end on real
renders, checking paper 000's qualitative facts for its two rows."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from helpers import read_png, run_cli

from ident3d.pipelines.cli import main


def _cli(*args):
    """The command in-process (helpers.run_cli: exit code, stdout, stderr as a real process would give them)."""
    return run_cli(*args)


@pytest.mark.parametrize("edit,expected", [
    (lambda c: c["rows"].append({"name": "DA: blur", "views": "blur"}), "rows[12].views (DA: blur): unknown view maker 'blur'"),
    (lambda c: c["rows"].append({"name": "LT: lights", "views": "lt_exact:lights"}), "needs the stored view 'lights'"),
    (lambda c: c.pop("stores"), "stores: is missing (required: stores, train, rows)"),
    (lambda c: c["rows"].append({"name": "gen", "views": "colour", "train": {"objective": "simvae", "hp": {"x": 1}}}),
     "rows[12].train (gen): objective simvae has no hyperparameter 'x'"),
    (lambda c: c["rows"].append({"name": "gen", "views": "colour", "train": "simvae"}), "rows[12].train: must be a mapping"),
    # issue 20 item 7: the whole config, before anything renders, naming file and key
    (lambda c: c["evaluate"].update(fit=-10), "evaluate.fit: must be a whole number >= 10, got -10"),
    (lambda c: c["evaluate"].update(kernel="yes"), "evaluate.kernel: must be true or false, got 'yes'"),
    (lambda c: c["stores"]["test"].update(resolution=4), "stores.test: resolution must be at least 8 px, got 4"),
    (lambda c: c["stores"]["train"].update(colour=1), "stores.train.colour: is not a setting here; allowed: n, resolution"),
    (lambda c: c["rows"][0].update(paper="high"), "rows[0].paper: must be a list, got 'high'"),
    (lambda c: c["train"]["hp"].update(tau="abc"), "objective infonce's hyperparameter tau must be a finite number > 0"),
])
def test_bad_config_exit_2(tmp_path, edit, expected):
    cfg = yaml.safe_load(open("configs/da_vs_lt_small.yaml"))
    edit(cfg)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    r = _cli("compare", "--config", str(path), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and expected in r.stderr, r.stderr
    assert f"config {path}" in r.stderr
    assert not (tmp_path / "out").exists()  # nothing ran


def test_rows_may_override_the_train_section():
    from ident3d.pipelines.kinds.compare import load_config, row_train

    cfg = load_config("configs/da_vs_lt_small_generative.yaml")
    own = [row_train(cfg, r) for r in cfg.rows]
    assert own[0]["objective"] == "infonce" and own[0]["hp"] == {"tau": 1.0}
    assert own[2]["objective"] == "simvae" and own[2]["hp"] == {"decoder_width": 64} and own[2]["steps"] == 250


def test_missing_config_exit_2(tmp_path):
    r = _cli("compare", "--config", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "not found" in r.stderr


def test_demo_end_to_end_says_what_it_does_first_and_shows_progress_before_the_first_chunk(tmp_path):
    """`ident3d demo` as a user runs it (one process): its first output is its one-line plan and the render progress
    bar appears before any chunk of the render is finished (at 0 images), so a user sees progress from the first
    seconds on any machine (the order of events, not their times: issue 42 §4); then the two rows keep paper 000's
    qualitative facts, the tables and figure are written, and a second run resumes with every cell skipped."""
    demo = tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "ident3d.pipelines.cli", "demo", "--out", str(demo)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline, events = time.monotonic() + 900, []  # a guard against a hang only
    os.set_blocking(proc.stdout.fileno(), False)
    os.set_blocking(proc.stderr.fileno(), False)
    text = {"out": b"", "err": b""}
    try:
        while time.monotonic() < deadline:
            done = proc.poll() is not None
            for name, stream in (("out", proc.stdout), ("err", proc.stderr)):
                text[name] += stream.read() or b""
            if "line" not in events and b"ident3d demo: render 512 + 384" in text["out"]:
                events.append("line")
            if "bar" not in events and b"render:" in text["err"]:
                events.append("bar")
                first_bar = text["err"][text["err"].index(b"render:"):].split(b"\r")[0]
            if done:
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 0 and events == ["line", "bar"], (proc.returncode, events, text["err"][-2000:])
    assert b"| 0/" in first_bar, first_bar  # shown before the first chunk of images was rendered
    out = text["out"].decode()
    table = json.loads((demo / "table.json").read_text())["rows"]
    lt, da = table["LT: change hues"]["stats"], table["DA: colour distortion"]["stats"]
    for row in (lt, da):  # both views change the hues: they are discarded (style), positions are kept
        hues = [row[c]["mean"] for c in ("hues: object", "hues: spotlight", "hues: background")]
        assert max(hues) < 0.25 and row["positions: object"]["mean"] > 0.4, row
    assert "LT: change hues" in out and "cell 2/3: LT: change hues, seed 0" in out
    assert "supervised (ceiling)" in table and "Fraction of the supervised ceiling" in out
    config = json.loads((demo / "cells/lt_change_hues/seed_0/config.json").read_text())
    assert config["data"] == str((demo / "stores/train.zarr").resolve())  # absolute, as the README says
    md, vs = (demo / "table.md").read_text(), (demo / "vs_paper.md").read_text()
    assert all(f"| {name} |" in md and f"| {name} |" in vs for name in table)
    assert [r[0] for r in csv.reader((demo / "table.csv").open())][1:] == list(table)
    h, w, colours = read_png(demo / "table.png")
    assert h > 100 and w > 300 and colours > 20  # a drawn heatmap
    # re-running resumes: every cell is skipped, the table is the same
    assert main(["demo", "--out", str(demo), "--no-progress"]) == 0
    assert json.loads((demo / "table.json").read_text())["rows"] == table


def test_a_diverging_cell_is_reported_and_the_grid_goes_on(tmp_path):
    """One divergence policy for every experiment (as synthetic's): the diverging cell is named in the table and
    left out, the others are tabulated, and it has no report, so running again retries it."""
    from ident3d.pipelines.kinds.compare import check_config, run_compare

    store = {"resolution": 16, "samples": 1, "seed": 0}
    cfg = check_config({
        "name": "diverge", "scene": "causal3dident", "ceiling": False, "seeds": [0],
        "stores": {"train": {**store, "n": 64, "views": "hues:hues"}, "test": {**store, "n": 64, "seed": 1}},
        "train": {"objective": "infonce", "encoder": "cnn", "out_dim": 4, "steps": 4, "batch_size": 32, "lr": 1e-3},
        "evaluate": {"fit": 32, "score": 32, "kernel": False},
        "rows": [{"name": "LT: change hues", "views": "lt_exact:hues"},
                 {"name": "exploding lr", "views": "lt_exact:hues", "train": {"lr": 1e12}}]}, "test")
    result = run_compare(cfg, tmp_path / "out")
    assert list(result["table"]) == ["LT: change hues"]
    summary = json.loads((tmp_path / "out" / "table.json").read_text())
    assert [(d["row"], d["seed"]) for d in summary["diverged"]] == [("exploding lr", 0)]
    assert "loss became" in summary["diverged"][0]["why"] and "exploding lr, seed 0 (loss became" in result["markdown"]
    assert (tmp_path / "out/cells/lt_change_hues/seed_0/report.json").exists()
    assert not (tmp_path / "out/cells/exploding_lr/seed_0/report.json").exists()
