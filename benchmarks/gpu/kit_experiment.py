"""The kit's ``experiment`` job: a named experiment config run through the one engine (``ident3d experiment``) on the
chosen device, its stores taken from the pack (data ``STEM.KEY`` is the store ``stores.KEY`` of ``STEM.yaml``), so a
paper-scale run on a GPU is the same run as here. Its table.json goes into the job's numbers."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit_cli import run_ident3d, tail
from kit_pack_format import KitError, data_names

KINDS = ("compare", "synthetic")


@dataclass
class Plan:
    """One experiment job, checked before anything runs: the config, its kind and settings, and the pack data that
    become its stores (by store key)."""

    config: Path
    kind: str
    cfg: dict[str, Any]
    stores: dict[str, str] = field(default_factory=dict)

    @property
    def stem(self) -> str:
        """The config's file stem: its stores are the pack's data STEM.KEY."""
        return self.config.stem


def data_for(stem: str, manifest: dict[str, Any]) -> list[str]:
    """The pack's data that belong to the experiment ``stem`` (``STEM.KEY``)."""
    return [name for name in data_names(manifest) if name.startswith(stem + ".")]


def plan(config: Path, manifest: dict[str, Any], can_render: bool) -> Plan:
    """Read and check the config (one line for a problem): a compare or synthetic kind; every store of a compare
    config in the pack unless this machine can render it."""
    import yaml

    if not config.is_file():
        raise KitError(f"--config {config}: no such file")
    try:
        cfg = yaml.safe_load(config.read_text())
    except yaml.YAMLError as exc:
        raise KitError(f"--config {config}: not YAML ({str(exc).splitlines()[0]})") from None
    kind = cfg.get("kind") if isinstance(cfg, dict) else None
    if kind not in KINDS:
        raise KitError(f"--config {config}: kind {kind!r}; the experiment job runs {' and '.join(KINDS)} configs "
                       "(a scaling config: run each of its points' configs as a job)")
    p = Plan(config, kind, cfg)
    if kind == "compare":
        if not isinstance(cfg.get("stores"), dict) or not isinstance(cfg.get("train"), dict):
            raise KitError(f"--config {config}: a compare config needs stores and train sections")
        here = set(data_for(p.stem, manifest))
        for key in cfg["stores"]:
            if f"{p.stem}.{key}" in here:
                p.stores[key] = f"{p.stem}.{key}"
            elif not can_render:
                raise KitError(f"experiment {p.stem} needs its store {key!r}, which this machine cannot render (no "
                               f"bpy): pack it with pack.py --data {p.stem}.{key}=PATH")
    return p


def command(p: Plan, out: Path, device: str) -> list[str]:
    """The ident3d command on the config as written: ``experiment`` with ``--set train.device=DEVICE`` for a compare
    config (a synthetic config's device is its alias's ``--device``)."""
    if p.kind == "synthetic":
        return ["synthetic", "--config", str(p.config.resolve()), "--out", str(out), "--device", device,
                "--no-progress"]
    return ["experiment", str(p.config.resolve()), "--out", str(out), "--no-progress", "--set",
            f"train.device={device}"]


def run_experiment(p: Plan, device: str, work: Path, out: Path, unpack: Any, paths: list[Path],
                   deadline: float) -> dict[str, Any]:
    """Unpack the experiment's stores into its output folder (``WORK/experiments/STEM``: kept between runs on a warm
    machine, so a cut-off run resumes), run it within ``deadline`` and return its numbers; its table.md is copied
    into ``out``."""
    where = work / "experiments"
    exp = where / p.stem
    for key, name in p.stores.items():
        unpack(name, exp / "stores" / f"{key}.zarr")
    where.mkdir(parents=True, exist_ok=True)
    log = where / f"{p.stem}.log"
    args = command(p, exp, device)
    code, seconds = run_ident3d(args, log, paths, deadline - time.monotonic())
    table = exp / "table.json"
    numbers: dict[str, Any] = {"config": str(p.config), "kind": p.kind, "name": p.cfg.get("name"),
                               "ident3d_command": ["ident3d", *args], "exit_code": code, "seconds": seconds,
                               "cells": len(list(exp.glob("cells/*/seed_*"))),
                               "steps_per_cell": p.cfg.get("train", {}).get("steps"),
                               "batch_size": p.cfg.get("train", {}).get("batch_size"),
                               "stores_from_pack": p.stores, "log_tail": tail(log)}
    if code == 0 and table.is_file():
        numbers["table"] = json.loads(table.read_text())
        out.mkdir(parents=True, exist_ok=True)
        if (exp / "table.md").is_file():
            shutil.copy(exp / "table.md", out / f"experiment_{p.stem}_table.md")
    numbers["status"] = "ok" if "table" in numbers else "timed out" if code is None else "failed"
    return numbers
