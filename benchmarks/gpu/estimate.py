"""GPU-hours of training per experiment config, from a window's measured throughput: each cell's steps x batch
anchors at the img/s that ident3d's pipeline for its views reached (LT rows: the LT pipeline, the others: DA) at the
config's resolution. Training only: rendering, evaluation and start-up are not in it.

    python benchmarks/gpu/estimate.py results/gpu/2026-12-01_throughput/results.json configs/paper001_3dident.yaml \\
        configs/da_vs_lt.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

Rates = dict[int, dict[str, float]]  # resolution -> {"DA": img/s, "LT": img/s}


class EstimateError(Exception):
    """A results file or config this cannot use, said in one line."""


def rates_from(results: dict[str, Any]) -> tuple[Rates, str]:
    """The training img/s of ident3d's DA and LT pipelines per measured resolution, and the encoder timed."""
    try:
        numbers = results["jobs"]["throughput"]["numbers"]
        encoder = numbers["encoder"]
        rates: Rates = {}
        for store in numbers["stores"].values():
            for name, by in store["img_per_s"].items():
                kind = "DA" if name.startswith("ident3d DA") else "LT" if name.startswith("ident3d LT") else None
                if kind and by.get(encoder):
                    rates.setdefault(int(store["resolution"]), {})[kind] = float(by[encoder])
    except (KeyError, TypeError, AttributeError):
        raise EstimateError("the results have no throughput job's numbers (run.py --job throughput)") from None
    if not rates:
        raise EstimateError("the throughput job measured no ident3d pipeline with a model")
    return rates, encoder


def rate_for(rates: Rates, resolution: int, kind: str) -> tuple[float, str]:
    """img/s for ``kind`` (DA or LT) at ``resolution``: measured there, or the nearest measured resolution's scaled
    by pixel count (a rough guide: the ResNet stem differs between small and large images); and what was done."""
    near = min(rates, key=lambda r: (abs(r - resolution), r))
    by = rates[near]
    used = kind if kind in by else "DA" if "DA" in by else next(iter(by))
    rate, notes = by[used], [] if used == kind else [f"{used} rate for {kind}"]
    if near != resolution:
        rate *= (near / resolution) ** 2
        notes.append(f"scaled from {near} px by pixel count")
    return rate, "; ".join(notes)


def compare_cells(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Every (row, seed) cell of a compare config with its training settings, the supervised ceiling row that
    ``ceiling: true`` (the default) adds included."""
    train = cfg.get("train") or {}
    rows = list(cfg.get("rows") or [])
    has_ceiling = any({**train, **(r.get("train") or {})}.get("objective") == "supervised" for r in rows)
    if cfg.get("ceiling", True) and not has_ceiling:
        rows.append({"name": "supervised (ceiling)", "views": "none", "train": {"objective": "supervised"}})
    return [{"row": r["name"], "seed": s, "views": r.get("views", ""), **{**train, **(r.get("train") or {})}}
            for r in rows for s in cfg.get("seeds", [0])]


def estimate(cfg: dict[str, Any], rates: Rates, encoder: str) -> dict[str, Any]:
    """GPU-hours of a compare config's training: the sum over its cells of steps x batch_size / img/s."""
    resolution = (cfg.get("stores") or {}).get("train", {}).get("resolution")
    if not isinstance(resolution, int):
        raise EstimateError(f"config {cfg.get('name')!r}: stores.train has no resolution (a rendered store's)")
    cells = compare_cells(cfg)
    hours, notes = 0.0, set()
    for cell in cells:
        rate, note = rate_for(rates, resolution, "LT" if str(cell["views"]).startswith("lt_") else "DA")
        hours += cell.get("steps", 1000) * cell.get("batch_size", 256) / rate / 3600
        notes.update(filter(None, [note]))
        if cell.get("encoder", "resnet18") != encoder:
            notes.add(f"{cell.get('encoder')} cells timed at the {encoder} rate")
    return {"name": cfg.get("name"), "cells": len(cells), "resolution": resolution, "gpu_hours": hours,
            "anchors": sum(c.get("steps", 1000) * c.get("batch_size", 256) for c in cells), "notes": sorted(notes)}


def estimate_file(path: Path, rates: Rates, encoder: str) -> list[dict[str, Any]]:
    """The estimate of a config file: a compare config, or each point of a scaling config (its paths relative to
    its folder); a synthetic config has no images to time."""
    import yaml

    try:
        cfg = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise EstimateError(f"{path}: cannot read it as YAML ({exc})") from None
    kind = cfg.get("kind", "compare") if isinstance(cfg, dict) else None
    if kind == "scaling":
        return [e for point in cfg.get("points") or [] for e in estimate_file(path.parent / point["config"], rates,
                                                                                  encoder)]
    if kind != "compare":
        raise EstimateError(f"{path}: kind {kind!r}; only image experiments (compare, scaling) are timed by img/s")
    return [{"config": str(path), **estimate(cfg, rates, encoder)}]


def markdown(rows: list[dict[str, Any]]) -> str:
    """The estimates as a table."""
    lines = ["| config | cells | px | anchors | GPU-hours | notes |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['config']} | {r['cells']} | {r['resolution']} | {r['anchors']:,} | {r['gpu_hours']:.2f} | "
              f"{'; '.join(r['notes']) or '-'} |" for r in rows]
    if len(rows) > 1:
        lines.append(f"| total | {sum(r['cells'] for r in rows)} | | {sum(r['anchors'] for r in rows):,} | "
                     f"{sum(r['gpu_hours'] for r in rows):.2f} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: the table of estimates; a bad input is one line and exit 2."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="a results.json of run.py with a throughput job")
    ap.add_argument("configs", type=Path, nargs="+", help="experiment configs (compare or scaling)")
    ap.add_argument("--json", type=Path, help="also write the estimates here")
    args = ap.parse_args(argv)
    try:
        try:
            results = json.loads(args.results.read_text())
        except (OSError, ValueError) as exc:
            raise EstimateError(f"{args.results}: not a readable results.json ({exc})") from None
        rates, encoder = rates_from(results)
        rows = [e for path in args.configs for e in estimate_file(path, rates, encoder)]
    except EstimateError as exc:
        print(f"estimate.py: error: {exc}", file=sys.stderr)
        return 2
    print(f"measured on {results.get('device_name')} ({encoder}): " + ", ".join(
        f"{r} px " + " / ".join(f"{k} {v:,.0f}" for k, v in by.items()) + " img/s" for r, by in sorted(rates.items())))
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
