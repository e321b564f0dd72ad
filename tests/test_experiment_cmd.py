"""``ident3d experiment CONFIG``: one command for every experiment config, the kind read from its ``kind:`` key;
``--dry-run`` checks a whole config and lists its cells without writing anything."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").rglob("*.yaml"))
TINY = {"kind": "synthetic", "name": "tiny", "seeds": [0, 1], "evaluate": {"fit": 200, "score": 200},
        "train": {"objective": "lp_infonce", "encoder": "mlp", "out_dim": 3, "steps": 3, "batch_size": 32},
        "rows": [{"name": "box", "source": {"kind": "latent_pairs", "dim": 3}, "hp": {"p": 2}}]}


def test_dry_run_accepts_every_config_under_configs_and_writes_nothing(tmp_path):
    assert len(CONFIGS) >= 19
    for config in CONFIGS:
        r = run_cli("experiment", config, "--dry-run", "--out", tmp_path / "out", cwd=ROOT)
        assert r.returncode == 0, (config, r.stderr)
        head, *cells = r.stdout.splitlines()
        kind = yaml.safe_load((ROOT / config).read_text())["kind"]
        assert head.startswith(f"config {config}: ok; kind {kind}")
        n = int(head.split(" cells")[0].rsplit(" ", 1)[1])
        listed = [line for line in cells if line.startswith("  ")]
        assert len(listed) == n > 0 and all("/seed_" in line for line in listed)
    assert not (tmp_path / "out").exists()


def test_dry_run_lists_the_cells_of_rows_times_seeds(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    r = run_cli("experiment", path, "--dry-run", "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1:] == [f"  box, seed {s}: {tmp_path / 'out/cells/box'}/seed_{s}" for s in (0, 1)]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("edit", "message"), [
    ({"kind": None}, r"has no kind; give kind: one of compare, scaling, synthetic"),
    ({"kind": "grid"}, r"has kind 'grid'; give kind: one of compare, scaling, synthetic"),
    ({"metrics": "dci"}, r"metrics: must be a list, got 'dci'"),
    ({"metrics": ["dcii"]}, r"metrics: unknown metric 'dcii'"),
])
def test_a_bad_kind_or_metric_is_one_line_before_anything_is_written(tmp_path, edit, message):
    cfg = {k: v for k, v in {**TINY, **edit}.items() if v is not None}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    for extra in ((), ("--dry-run",)):
        r = run_cli("experiment", path, "--out", tmp_path / "out", *extra)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert re.search(message, r.stderr), r.stderr
    assert not (tmp_path / "out").exists()


def test_an_alias_refuses_a_config_of_another_kind(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    r = run_cli("compare", "--config", path, "--out", tmp_path / "out")
    assert r.returncode == 2 and "kind is 'synthetic', not compare; run it with `ident3d experiment" in r.stderr
    assert not (tmp_path / "out").exists()


def test_experiment_runs_a_config_as_its_alias_does(tmp_path):
    """The same config through ``experiment`` and through ``synthetic``: the same cells and the same table."""
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, "seeds": [0]}))
    a = run_cli("experiment", path, "--out", tmp_path / "a", "--no-progress")
    b = run_cli("synthetic", "--config", path, "--out", tmp_path / "b", "--no-progress", "--no-figures")
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    tables = [json.loads((tmp_path / x / "table.json").read_text()) for x in ("a", "b")]
    for t in tables:
        t["rows"]["box"]["stats"].pop("train_seconds")
    assert tables[0] == tables[1]
    assert (tmp_path / "a/cells/box/seed_0/scores.json").exists()


def test_a_bad_worker_count_is_refused_by_a_dry_run_too(tmp_path):
    r = run_cli("experiment", ROOT / "configs/da_vs_lt_small.yaml", "--dry-run", "--workers", "0")
    assert r.returncode == 2 and "--workers must be a whole number >= 1, got 0" in r.stderr and not r.stdout


TOY_KIND = '''
"""A toy kind: one cell per number, whose result is the number squared."""
from dataclasses import dataclass
from pathlib import Path

from ident3d.pipelines.cells import Cell, claim_cell
from ident3d.pipelines.experiment import ExperimentKind, cell_dir, run_experiment, write_tables
from ident3d.pipelines.files import read_yaml_config
from ident3d.training.hparams import Count, parse_config


@dataclass(frozen=True)
class ToyConfig:
    name: str
    numbers: tuple[Count, ...]
    kind: str | None = None


@dataclass
class Toy(ExperimentKind):
    name = "toy"
    outputs = frozenset({"cells", "table.md"})

    def cells(self, cfg, out, workers, scheduler, progress):
        for row, settings in cell_settings_of(cfg).items():
            claim_cell(out / "cells" / row, settings)
        return [Cell((str(n), 0), square, (n,)) for n in cfg.numbers]

    def tabulate(self, cfg, results, diverged, out):
        write_tables(out, {"table.md": "".join(f"{k} {r['value']}\\n" for (k, _), r in sorted(results.items()))})
        return {}


def square(n, progress=False):
    return {"value": n * n}


def load_config(path, overrides=(), missing=None):
    return parse_config(ToyConfig, read_yaml_config(path, "toy.yaml", overrides), f"config {path}")


def plan(cfg, out):
    return [(str(n), 0, cell_dir(out, str(n), 0)) for n in cfg.numbers]


def cell_settings_of(cfg):
    return {f"{n}/seed_0": {"n": n} for n in cfg.numbers}


def add_parser(sub):
    p = sub.add_parser("toy")
    p.add_argument("--config", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--set", action="append", default=[])
    p.set_defaults(run=run)


def run(args):
    run_experiment(Toy(), load_config(args.config, args.set), Path(args.out), overrides=args.set)
    return 0
'''


def test_a_new_kind_is_one_file(tmp_path, monkeypatch):
    """A module dropped into the kinds' folder is an experiment kind: ``ident3d experiment`` runs and dry-runs its
    configs (with ``--set``), its subcommand exists and ``cell_keys`` keys its cells; nothing else was edited."""
    from ident3d.pipelines import kinds
    from ident3d.pipelines.cli import build_parser
    from ident3d.pipelines.experiment_cmd import cell_keys

    folder = tmp_path / "more_kinds"
    folder.mkdir()
    (folder / "toy.py").write_text(TOY_KIND)
    assert "toy" not in kinds.names()
    monkeypatch.setattr(kinds, "__path__", [*kinds.__path__, str(folder)])
    assert "toy" in kinds.names()
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump({"kind": "toy", "name": "squares", "numbers": [2, 3]}))
    r = run_cli("experiment", config, "--dry-run", "--out", tmp_path / "out", "--set", "numbers=[4, 5, 6]")
    assert r.returncode == 0 and "kind toy, experiment 'squares', 3 cells" in r.stdout, r.stderr
    r = run_cli("experiment", config, "--out", tmp_path / "out", "--set", "numbers=[4, 5]")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out/table.md").read_text() == "4 16\n5 25\n"
    assert json.loads((tmp_path / "out/toy.json").read_text()) == {"name": "squares", "overrides": ["numbers=[4, 5]"]}
    assert list(cell_keys(config)) == ["2/seed_0", "3/seed_0"]
    import ident3d.pipelines.cli as cli

    monkeypatch.setattr(cli, "COMMANDS", {**cli.COMMANDS, "toy": "kinds.toy"})
    assert "toy" in build_parser(["toy"])._subparsers._group_actions[0].choices
    r = run_cli("experiment", config, "--dry-run", "--set", "numbers=[0]")
    assert r.returncode == 2 and "numbers[0]: must be a whole number >= 1, got 0" in r.stderr, r.stderr
