"""``ident3d synthetic``: the numerical identifiability experiments of papers 000, 001 and 003 as configs: every
(row, seed) cell is one trainer run on a synthetic source, scored on held-out draws; cells resume; the table
(mean +- std over seeds, next to what the paper predicts) is written as markdown, CSV and JSON with figures."""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from causal.errors import UserError
from pipelines.files import check_output_dir, read_yaml_config, write_atomic

TOP_KEYS = {"name", "description", "paper", "train", "evaluate", "seeds", "rows"}
ROW_KEYS = {"name", "source", "hp", "train", "expect", "note"}
EVAL_KEYS = {"n_fit", "n_score", "kernel"}
EXPECT_OPS = {"min": lambda v, t: v >= t, "max": lambda v, t: v <= t}


def load_config(path: str | Path) -> dict[str, Any]:
    """Read and check a synthetic config; every row's source, encoder and objective are built once (on no data)."""
    return check_config(read_yaml_config(path, "configs/synthetic/"), str(path))


def check_config(cfg: Any, where: str) -> dict[str, Any]:
    """Validate keys, seeds, evaluation settings and every row's trainer config."""
    if not isinstance(cfg, dict) or set(cfg) - TOP_KEYS or not {"name", "rows"} <= set(cfg):
        raise UserError(f"config {where}: needs name and rows (allowed keys: {', '.join(sorted(TOP_KEYS))})")
    if not isinstance(cfg["rows"], list) or not cfg["rows"]:
        raise UserError(f"config {where}: rows must be a non-empty list of {{name, source, hp, ...}}")
    seeds = cfg.get("seeds", [0])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise UserError(f"config {where}: seeds must be a list of whole numbers >= 0, got {seeds!r}")
    ev = cfg.get("evaluate") or {}
    if not isinstance(ev, dict) or set(ev) - EVAL_KEYS:
        raise UserError(f"config {where}: evaluate takes {', '.join(sorted(EVAL_KEYS))}")
    names = set()
    for i, row in enumerate(cfg["rows"]):
        head = f"config {where}: row {i + 1}"
        if not isinstance(row, dict) or set(row) - ROW_KEYS or not {"name", "source"} <= set(row):
            raise UserError(f"{head}: needs name and source (allowed keys: {', '.join(sorted(ROW_KEYS))})")
        if row["name"] in names:
            raise UserError(f"{head}: the name {row['name']!r} is used twice")
        names.add(row["name"])
        for metric, rule in (row.get("expect") or {}).items():
            if not isinstance(rule, dict) or set(rule) - set(EXPECT_OPS) or not rule:
                raise UserError(f"{head}: expect.{metric} must be {{min: X}} or {{max: X}}, got {rule!r}")
        try:
            check_cell(train_config(cfg, row, seed=0, steps=None, device="cpu"))
        except UserError as exc:
            raise UserError(f"{head} ({row['name']}): {exc}") from None
    return cfg


def train_config(cfg: dict[str, Any], row: dict[str, Any], seed: int, steps: int | None, device: str) -> Any:
    """The TrainConfig of one cell: the config's train section, the row's overrides, the row's source and hp."""
    from training.trainer import TrainConfig

    settings = {**(cfg.get("train") or {}), **(row.get("train") or {})}
    allowed = {f.name for f in fields(TrainConfig)} - {"data", "source", "seed", "objective_args", "normalize",
                                                        "device", "views"}
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise UserError(f"train has no setting {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    if steps is not None:
        settings["steps"] = steps
    return TrainConfig(data="synthetic", views="synthetic", source=dict(row["source"]),
                       objective_args=dict(row.get("hp") or {}), seed=seed, device=device, **settings)


def check_cell(tc: Any) -> None:
    """Build the cell's source, encoder and objective once on the CPU (a tiny batch), to fail before training."""
    from training.components import check_numbers
    from training.synthetic.run import build_synthetic_run

    check_numbers(tc)
    small = replace(tc, batch_size=2, device="cpu")
    build_synthetic_run(small, device="cpu")


def slug(text: str) -> str:
    """A folder name for a row."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def run_cell(cfg: dict[str, Any], row: dict[str, Any], seed: int, cell: Path, steps: int | None,
             device: str) -> dict[str, Any]:
    """Train (or resume) one cell and score it; the scores are saved as scores.json, which marks it done. A cell
    whose loss diverges is reported as {"diverged": why} (not saved: a re-run with other settings retries it)
    and the other cells go on."""
    from evaluation.synthetic import evaluate_synthetic
    from training.trainer import TrainingDiverged, train

    done = cell / "scores.json"
    if done.exists():
        return json.loads(done.read_text())
    tc = train_config(cfg, row, seed, steps, device)
    resume = (cell / "checkpoint.pt").exists()
    try:
        last = train(tc, cell, resume=resume, progress=False)
    except TrainingDiverged as exc:
        return {"diverged": str(exc).split(";")[0]}
    ev = cfg.get("evaluate") or {}
    scores = evaluate_synthetic(cell, n_fit=ev.get("n_fit", 10000), n_score=ev.get("n_score", 10000),
                                kernel=bool(ev.get("kernel", False)), device=device)
    rows = [json.loads(line) for line in (cell / "metrics.jsonl").read_text().splitlines() if line.strip()]
    scores["train_seconds"] = rows[-1].get("seconds", float("nan")) if rows else float("nan")
    scores["final_loss"] = float(last.get("loss", float("nan")))
    write_atomic(done, lambda p: p.write_text(json.dumps(scores, indent=1) + "\n"))
    return scores


def table_metrics(results: dict[tuple[str, int], dict[str, float]]) -> list[str]:
    """The table's columns: the headline metrics every cell has, then per-group ones, then training time."""
    scored = [set(r) for r in results.values() if "diverged" not in r]
    keys = set.intersection(*scored) if scored else set()
    head = [k for k in ("linear_r2", "mcc", "kernel_r2") if k in keys]
    groups = sorted(k for k in keys if k.startswith(("linear_r2/", "kernel_r2/")))
    extra = sorted(k for k in keys if k.startswith(("spectrum", "top_corr")))
    return head + groups + extra + ["train_seconds"]


def aggregate(cfg: dict[str, Any], results: dict[tuple[str, int], dict[str, float]]) -> dict[str, Any]:
    """{"columns": [...], "rows": {row: {metric: {mean, std, n}}, "expect": ..., "met": bool|None}}."""
    cols = table_metrics(results)
    table: dict[str, Any] = {"name": cfg["name"], "columns": cols, "rows": {}}
    for row in cfg["rows"]:
        done = [(s, results[(row["name"], s)]) for s in cfg.get("seeds", [0]) if (row["name"], s) in results]
        cells = [r for _, r in done if "diverged" not in r]
        diverged = {s: r["diverged"] for s, r in done if "diverged" in r}
        stats = {}
        for c in cols:
            vals = np.array([r.get(c, np.nan) for r in cells], float)
            stats[c] = {"mean": float(np.nanmean(vals)) if len(vals) else math.nan,
                        "std": float(np.nanstd(vals)) if len(vals) > 1 else math.nan, "n": int(len(vals))}
        expect = row.get("expect") or {}
        met = None
        if expect and cells and all(m in r for m in expect for r in cells):  # not scored: no verdict
            mean = {m: float(np.mean([r[m] for r in cells])) for m in expect}
            met = all(EXPECT_OPS[op](mean[m], t) for m, rule in expect.items() for op, t in rule.items())
        table["rows"][row["name"]] = {"stats": stats, "expect": expect, "met": met, "note": row.get("note", ""),
                                      "diverged": diverged}
    return table


def _fmt(s: dict[str, float], metric: str) -> str:
    if s["n"] == 0 or math.isnan(s["mean"]):
        return "-"
    if metric == "train_seconds":
        return f"{s['mean']:.0f}"
    return f"{s['mean']:.3f}" + (f" ± {s['std']:.3f}" if s["n"] > 1 else "")


def _expect_text(expect: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{m} {'>=' if op == 'min' else '<='} {t:g}"
                     for m, rule in expect.items() for op, t in rule.items())


def markdown(table: dict[str, Any], seeds: list[int]) -> str:
    """The table as markdown, with the paper's prediction per row and whether it was met."""
    cols = table["columns"]
    lines = ["| row | " + " | ".join(cols) + " | paper predicts | met |",
             "|---" * (len(cols) + 3) + "|"]
    for name, r in table["rows"].items():
        met = {True: "yes", False: "**no**", None: "-"}[r["met"]]
        if r.get("diverged"):
            met += "; " + ", ".join(f"seed {s} diverged ({why})" for s, why in r["diverged"].items())
        lines.append(f"| {name} | " + " | ".join(_fmt(r["stats"][c], c) for c in cols)
                     + f" | {_expect_text(r['expect']) or r['note'] or '-'} | {met} |")
    n = len(seeds)
    lines.append("")
    lines.append(f"Mean ± std over {n} seeds ({', '.join(map(str, seeds))})." if n > 1 else
                 f"One seed ({seeds[0]}): no spread is shown.")
    return "\n".join(lines) + "\n"


def write_csv(table: dict[str, Any], path: Path) -> None:
    """One line per row: mean, std and n of every metric, and whether the paper's prediction was met."""
    def write(p: Path) -> None:
        with p.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["row"] + [f"{c}_{k}" for c in table["columns"] for k in ("mean", "std", "n")] + ["met"])
            for name, r in table["rows"].items():
                w.writerow([name] + [r["stats"][c][k] for c in table["columns"] for k in ("mean", "std", "n")]
                           + [r["met"]])
    write_atomic(path, write)


def scatter_figure(cell: Path, path: Path, title: str, n: int = 2000) -> None:
    """True latents vs their linear read-out from the representation (held-out draw), up to 4 latents."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.linear_model import LinearRegression

    from evaluation.synthetic import encode_source

    h, z, source = encode_source(cell, n, 3)
    pred = LinearRegression().fit(h, z).predict(h)
    k = min(4, z.shape[1])
    fig, axes = plt.subplots(1, k, figsize=(2.6 * k, 2.6), squeeze=False)
    for j, ax in enumerate(axes[0]):
        ax.scatter(z[:, j], pred[:, j], s=2, alpha=0.4)
        ax.set_xlabel(f"true {source.latent_names[j]}")
        ax.set_ylabel("linear read-out" if j == 0 else "")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    write_atomic(path, lambda p: fig.savefig(p, dpi=90, format="png"))
    plt.close(fig)


def spectrum_figure(cell: Path, path: Path, title: str, n: int = 5000) -> None:
    """Paper 003's figure: the per-dimension std of the representation, sorted, on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from evaluation.spectrum import std_spectrum
    from evaluation.synthetic import encode_source

    h, _, _ = encode_source(cell, n, 3)
    stds, _ = std_spectrum(h)
    fig, ax = plt.subplots(figsize=(4, 2.8))
    ax.bar(range(1, len(stds) + 1), stds)
    ax.set(yscale="log", xlabel="output dimension (sorted)", ylabel="std", title=title)
    ax.title.set_fontsize(9)
    fig.tight_layout()
    write_atomic(path, lambda p: fig.savefig(p, dpi=90, format="png"))
    plt.close(fig)


def run_synthetic(cfg: dict[str, Any], out: Path, seeds: list[int] | None = None, steps: int | None = None,
                  device: str = "auto", rows: list[str] | None = None, progress: bool = True,
                  figures: bool = True) -> dict[str, Any]:
    """Run (or resume) every (row, seed) cell of ``cfg`` under ``out`` and write the table and figures there."""
    from training.trainer import pick_device

    device = pick_device(device).type
    if seeds is not None:
        cfg = {**cfg, "seeds": seeds}
    wanted = cfg["rows"] if not rows else [r for r in cfg["rows"] if r["name"] in rows or slug(r["name"]) in rows]
    if rows and len(wanted) != len(rows):
        raise UserError(f"--rows: no row named {sorted(set(rows) - {r['name'] for r in wanted})[0]!r}; "
                        f"rows: {', '.join(slug(r['name']) for r in cfg['rows'])}")
    out.mkdir(parents=True, exist_ok=True)
    cells = [(row, s) for row in wanted for s in cfg.get("seeds", [0])]
    from tqdm import tqdm

    results: dict[tuple[str, int], dict[str, float]] = {}
    for row, s in tqdm(cells, desc="synthetic", unit="cell", disable=not progress):
        results[(row["name"], s)] = run_cell(cfg, row, s, out / "cells" / slug(row["name"]) / f"seed_{s}", steps,
                                             device)
    for row in cfg["rows"]:  # cells finished earlier (other --rows runs) join the table
        for s in cfg.get("seeds", [0]):
            done = out / "cells" / slug(row["name"]) / f"seed_{s}" / "scores.json"
            if (row["name"], s) not in results and done.exists():
                results[(row["name"], s)] = json.loads(done.read_text())
    table = aggregate(cfg, results)
    table["seeds"] = cfg.get("seeds", [0])
    write_atomic(out / "table.json", lambda p: p.write_text(json.dumps(table, indent=1) + "\n"))
    write_atomic(out / "table.md", lambda p: p.write_text(f"# {cfg['name']}\n\n{cfg.get('description', '')}\n\n"
                                                          + markdown(table, table["seeds"])))
    write_csv(table, out / "table.csv")
    if figures:
        (out / "figures").mkdir(exist_ok=True)
        s0 = table["seeds"][0]
        for row in (r for r in wanted if "diverged" not in results[(r["name"], s0)]):
            cell, name = out / "cells" / slug(row["name"]) / f"seed_{s0}", slug(row["name"])
            scatter_figure(cell, out / "figures" / f"{name}.png", f"{row['name']} (seed {s0})")
            if "top_corr" in results[(row["name"], s0)]:
                spectrum_figure(cell, out / "figures" / f"{name}_spectrum.png", f"{row['name']} (seed {s0})")
    return table


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "synthetic", help="run a synthetic identifiability experiment (papers 000/001/003) from a config",
        description="Train and score every (row, seed) cell of a synthetic experiment: latents with known ground "
                    "truth, mixed by a random invertible map, learned back by a self-supervised objective. "
                    "Cells resume where they stopped; the table (markdown, CSV, JSON) and figures go to --out.",
        epilog="Examples: ident3d synthetic --config configs/synthetic/paper001.yaml --seeds 0 1 2\n"
               "          ident3d synthetic --config configs/synthetic/paper000.yaml --steps 500 --device cuda",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="experiment YAML (configs/synthetic/*.yaml)")
    p.add_argument("--out", help="folder for the cells, the table and figures (default: runs/synthetic/NAME)")
    p.add_argument("--seeds", type=int, nargs="+", help="seeds to run (default: the config's)")
    p.add_argument("--steps", type=int, help="training steps per cell (default: the config's; few for a smoke run)")
    p.add_argument("--rows", nargs="+", help="run only these rows (names or their slugs); others join the table "
                                             "if already done")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="training device")
    p.add_argument("--no-figures", action="store_true", help="skip the scatter figures")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    if args.steps is not None and args.steps < 1:
        raise UserError(f"--steps must be a whole number >= 1, got {args.steps}")
    if args.seeds is not None and any(s < 0 for s in args.seeds):
        raise UserError(f"--seeds must be whole numbers >= 0, got {args.seeds}")
    out = check_output_dir(args.out or Path("runs") / "synthetic" / slug(cfg["name"]))
    table = run_synthetic(cfg, out, seeds=args.seeds, steps=args.steps, device=args.device, rows=args.rows,
                          figures=not args.no_figures)
    print(markdown(table, table["seeds"]), end="")
    print(f"table: {out / 'table.md'} (and .csv, .json); figures: {out / 'figures'}")
    return 0
