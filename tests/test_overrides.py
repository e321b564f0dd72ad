"""``--set PATH=VALUE`` on every experiment kind (issue 43 §2): dotted paths with list indices, values read as YAML,
held to the config file's own checks, recorded in the output's marker; a smoke run with ``--set train.steps=1`` into
the same output leaves the real cells to come back without training again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import run_cli

from ident3d.causal.errors import UserError
from ident3d.pipelines.overrides import apply_overrides, parse_path

ROOT = Path(__file__).resolve().parents[1]
TINY = {"kind": "synthetic", "name": "tiny", "seeds": [0], "evaluate": {"fit": 200, "score": 200},
        "train": {"objective": "lp_infonce", "encoder": "mlp", "out_dim": 3, "steps": 3, "batch_size": 32},
        "rows": [{"name": "box", "source": {"kind": "latent_pairs", "dim": 3}, "hp": {"p": 2}}]}


def test_paths_values_and_what_a_path_cannot_reach():
    assert parse_path("rows[1].train.hp.tau") == ["rows", 1, "train", "hp", "tau"]
    cfg = {"train": {"steps": 3}, "rows": [{"name": "a"}, {"name": "b", "train": {}}], "seeds": [0]}
    out = apply_overrides(cfg, ["train.steps=1", "rows[1].train.lr=1e-3", "seeds=[0, 1]", "rows[-1].name=c",
                                "train.device=cuda", "train.amp=false", "name=x"])
    assert out == {"train": {"steps": 1, "device": "cuda", "amp": False}, "seeds": [0, 1], "name": "x",
                   "rows": [{"name": "a"}, {"name": "c", "train": {"lr": 1e-3}}]}
    assert cfg["train"] == {"steps": 3}  # the parsed config itself is left as it was
    for text, says in [("train.stepz.x=1", "--set train.stepz.x: train has no key 'stepz' (its keys: steps)"),
                       ("rows[2].name=x", "--set rows[2].name: rows has 2 items (indices 0..1)"),
                       ("train[0]=1", "--set train[0]: train is not a list"),
                       ("seeds.first=1", "--set seeds.first: seeds is not a mapping with keys"),
                       ("train.steps", "--set train.steps: give PATH=VALUE, e.g. --set train.steps=3"),
                       ("train..steps=1", "--set train..steps: '' is not a key"),
                       ("train.steps=[1", "--set train.steps=[1: the value is not YAML")]:
        with pytest.raises(UserError) as exc:
            apply_overrides(cfg, [text])
        assert str(exc.value).startswith(says), str(exc.value)


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def trained_steps(out: Path) -> int:
    """The step count the cell's run was trained with (its config.json)."""
    return json.loads((out / "cells/box/seed_0/config.json").read_text())["steps"]


def test_a_smoke_run_leaves_the_real_cells_to_come_back(tiny, tmp_path):
    out = tmp_path / "out"
    real = run_cli("experiment", tiny, "--out", out, "--no-progress")
    assert real.returncode == 0 and trained_steps(out) == 3, real.stderr
    assert json.loads((out / "synthetic.json").read_text()) == {"name": "tiny", "overrides": []}
    table = (out / "table.md").read_text()
    smoke = run_cli("experiment", tiny, "--out", out, "--no-progress", "--set", "train.steps=1")
    assert smoke.returncode == 0 and trained_steps(out) == 1, smoke.stderr
    assert json.loads((out / "synthetic.json").read_text()) == {"name": "tiny", "overrides": ["train.steps=1"]}
    again = run_cli("experiment", tiny, "--out", out, "--no-progress")
    assert again.returncode == 0 and trained_steps(out) == 3, again.stderr
    assert "took back seed_0.stale-1, made with these settings" in again.stdout, again.stdout
    assert (out / "table.md").read_text() == table  # the real cell as it was: nothing trained again
    assert (out / "cells/box/seed_0.stale-2/config.json").exists()  # the smoke cell, set aside in turn


@pytest.mark.parametrize("config, override, says", [
    (None, "train.steps=2.5", "train.steps: must be a whole number >= 1, got 2.5"),
    (None, "train.stepz=2", "stepz"),
    (None, "rows[3].hp.p=1", "--set rows[3].hp.p: rows has 1 items (indices 0..0)"),
    ("configs/da_vs_lt_small.yaml", "stores.train.n=0", "stores.train.n: must be a whole number >= 1, got 0"),
    ("configs/scaling/paper001.yaml", "bogus=1", "bogus: is not a setting here; allowed: name, paper, points, kind, description"),
])
def test_a_bad_override_is_one_line_on_every_kind_and_nothing_is_written(tiny, tmp_path, config, override, says):
    config = tiny if config is None else ROOT / config
    for extra in ((), ("--dry-run",)):
        r = run_cli("experiment", config, "--out", tmp_path / "out", "--set", override, *extra)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and says in lines[0], r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("config, override, shows", [
    ("configs/da_vs_lt_small.yaml", "seeds=[5]", ", seed 5: "),
    ("configs/synthetic/paper001.yaml", "seeds=[5]", ", seed 5: "),
    ("configs/scaling/paper001.yaml", "name=renamed", "experiment 'renamed'"),
])
def test_every_kind_takes_overrides_in_a_dry_run(config, override, shows, tmp_path):
    r = run_cli("experiment", ROOT / config, "--dry-run", "--out", tmp_path / "out", "--set", override, cwd=ROOT)
    assert r.returncode == 0 and shows in r.stdout, r.stderr + r.stdout
    without = run_cli("experiment", ROOT / config, "--dry-run", "--out", tmp_path / "out", cwd=ROOT)
    assert without.returncode == 0 and shows not in without.stdout
