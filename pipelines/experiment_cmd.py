"""``ident3d experiment CONFIG``: run any experiment config, of the kind its required ``kind:`` key names (a module of
``pipelines/kinds/``: compare, synthetic, scaling, ...; ``ident3d KIND --config`` is an alias with the kind implied).
``--dry-run`` checks the whole config and lists its cells and where they go, without rendering, training or writing
anything."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ident3d.causal.errors import UserError
from ident3d.pipelines.cells import cell_key, keyed, scoring_key, split_settings
from ident3d.pipelines.experiment import slug
from ident3d.pipelines.files import check_output_dir, read_yaml_config
from ident3d.pipelines.kinds import module, names
from ident3d.pipelines.overrides import add_set_flag


def kind_of(path: str | Path) -> tuple[str, ModuleType]:
    """The config's ``kind`` and its module; a config without one (or with another) is refused in one line."""
    raw = read_yaml_config(path, "configs/")
    kind = raw.get("kind") if isinstance(raw, dict) else None
    if kind not in names():
        got = "no kind" if kind is None else f"kind {kind!r}"
        raise UserError(f"config {path}: has {got}; give kind: one of {', '.join(names())} (the experiment it "
                        "describes, see docs/experiments.md)")
    return kind, module(kind)


def default_out(kind: str, name: Any) -> Path:
    """Where an experiment goes without --out: runs/KIND/NAME (the config's ``name``)."""
    return Path("runs") / kind / slug(str(name or kind))


def dry_run(path: str | Path, out: str | Path | None = None, overrides: Sequence[str] = ()) -> str:
    """Check the whole config with its ``--set`` ``overrides`` (as running it would, before any work) and list its
    cells: the text printed."""
    kind, kind_module = kind_of(path)
    if out:
        check_output_dir(out)
    missing: list[str] = []  # a synthetic source's dataset that is not here: said, not refused
    cfg = kind_module.load_config(path, overrides, missing)
    where = Path(out) if out else default_out(kind, cfg.name)
    cells = kind_module.plan(cfg, where)
    lines = [f"config {path}: ok; kind {kind}, experiment {cfg.name or kind!r}, {len(cells)} cells -> {where}"]
    lines += [f"  {row}, seed {seed}: {folder}" for row, seed, folder in cells]
    lines += [f"note: running it needs data that are not here: {text}" for text in missing]
    return "\n".join(lines)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "experiment", help="run any experiment config (its kind: key picks compare, synthetic or scaling)",
        description="Run (or resume) every cell of an experiment config and write its tables: the kind comes from "
                    "the config's kind: key. Cells are keyed by their settings (a finished cell is reused, a changed "
                    "one run again), run here or on a Dask cluster, and written atomically. --dry-run checks the "
                    "whole config and lists the cells without running anything.",
        epilog="examples:\n  ident3d experiment configs/da_vs_lt_small.yaml --dry-run\n"
               "  ident3d experiment configs/synthetic/paper001.yaml --out runs/paper001 --workers 2",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="an experiment config (configs/), with kind: compare, synthetic or scaling")
    p.add_argument("--out", help="output folder (default: runs/KIND/NAME)")
    p.add_argument("--dry-run", action="store_true", help="check the config and list its cells; run nothing")
    p.add_argument("--workers", type=int, default=1, help="cells trained in parallel on a local Dask cluster")
    p.add_argument("--scheduler", metavar="ADDR", help="run the cells on an existing Dask cluster")
    p.add_argument("--layer", choices=("output", "inner"), help="representation to tabulate (compare, scaling)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace finished tables made with another --layer (compare, scaling)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars or per-cell lines")
    add_set_flag(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise UserError(f"--workers must be a whole number >= 1, got {args.workers}")
    if args.dry_run:
        print(dry_run(args.config, args.out, args.set))
        return 0
    kind, kind_module = kind_of(args.config)
    ns = alias_args(kind, kind_module, args.config, args.out or "-")  # the alias's own defaults for its other flags
    for flag in ("layer", "overwrite"):  # given, they must be flags of the kind's own command
        if getattr(args, flag) and not hasattr(ns, flag):
            raise UserError(f"--{flag} applies to compare and scaling configs; {args.config} is a {kind} one")
        if getattr(args, flag):
            setattr(ns, flag, getattr(args, flag))
    ns.workers, ns.scheduler, ns.no_progress, ns.set = args.workers, args.scheduler, args.no_progress, args.set
    raw = read_yaml_config(args.config, "configs/", args.set)
    ns.out = args.out or str(default_out(kind, raw.get("name") if isinstance(raw, dict) else None))
    return int(kind_module.run(ns) or 0)


def alias_args(kind: str, module: ModuleType, config: str, out: str) -> argparse.Namespace:
    """The arguments ``ident3d KIND --config CONFIG --out OUT`` would get: the alias's parser gives every other flag
    its default, so both commands run the same."""
    sub = argparse.ArgumentParser().add_subparsers()
    module.add_parser(sub)
    return sub.choices[kind].parse_args(["--config", config, "--out", out])


def cell_keys(path: str | Path, overrides: Sequence[str] = ()) -> dict[str, dict[str, str]]:
    """Every cell of a config as ``"ROW/seed_S"`` (a scaling point's rows as ``POINT/ROW``) -> its training key and
    scoring key, as the engine derives them when it runs the cell (the kind's ``cell_settings_of``, which its
    ``cells`` claims); nothing is written. What the goldens record so that a change to how configs are read cannot
    silently re-key (and retrain) a cell."""
    _, kind_module = kind_of(path)
    missing: list[str] = []  # data a synthetic source reads that is not here: its cells are keyed all the same
    cfg = kind_module.load_config(path, overrides, missing)
    return {cell: {"training": cell_key(keyed(split_settings(settings)[0])), "scoring": scoring_key(settings)}
            for cell, settings in kind_module.cell_settings_of(cfg).items()}
