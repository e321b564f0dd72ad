"""``ident3d compare``: paper 000's grid of view makers x seeds: render the train/test stores, train
and evaluate every cell (resumable; in parallel on a Dask cluster when given one), and write one
table in the paper's layout (mean +- std over seeds) as markdown, CSV, a heatmap and a
side-by-side with the paper's numbers."""

from __future__ import annotations

import argparse
import csv
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from causal.errors import UserError
from pipelines.files import write_atomic

COLUMNS = ["Class", "positions: object", "positions: spotlight", "hues: object", "hues: spotlight",
           "hues: background", "rotations: object"]
TOP_KEYS = {"name", "scene", "stores", "train", "seeds", "evaluate", "rows"}


def load_config(path: str | Path) -> dict[str, Any]:
    """Read and check a compare config; every row's view maker is validated before anything runs."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"config {path} not found; see configs/da_vs_lt_small.yaml for an example")
    try:
        cfg = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"config {path}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    return check_config(cfg, str(path))


def check_config(cfg: Any, where: str) -> dict[str, Any]:
    from training.views import Normalize, make_view_maker

    if not isinstance(cfg, dict) or set(cfg) - TOP_KEYS or not {"stores", "train", "rows"} <= set(cfg):
        raise UserError(f"config {where}: needs stores, train and rows (allowed keys: {', '.join(sorted(TOP_KEYS))})")
    stored = {v.split(":")[0] for v in str(cfg["stores"]["train"].get("views", "")).split(",") if v}
    for row in cfg["rows"]:
        views = str(row.get("views", ""))
        try:
            make_view_maker(views, Normalize((0.0,) * 3, (1.0,) * 3))
        except UserError as exc:
            raise UserError(f"config {where}: row {row.get('name')!r}: {exc}") from None
        if views.startswith("lt_exact:") and views.split(":", 1)[1] not in stored:
            raise UserError(f"config {where}: row {row.get('name')!r} needs the stored view "
                            f"{views.split(':', 1)[1]!r}; add it to stores.train.views")
    return cfg


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def render_store(spec: dict[str, Any], scene: str, out: Path, workers: int | None, scheduler: str | None) -> None:
    """Render (or resume) one of the config's stores through the render pipeline."""
    from pipelines import render as render_cmd
    from pipelines.cli import build_parser
    from render import driver

    argv = ["render", "--scene", scene, "--out", str(out), "--n", str(spec["n"]), "--seed", str(spec.get("seed", 0)),
            "--resolution", str(spec["resolution"]), "--samples", str(spec["samples"]), "--no-progress"]
    argv += ["--preset", spec["preset"]] if "preset" in spec else []
    argv += ["--views", spec["views"]] if spec.get("views") else []
    args = build_parser().parse_args(argv)
    job, attrs, layout = render_cmd.plan(args)
    report = driver.run(job, attrs, layout, workers=workers or render_cmd.default_workers(spec["resolution"]),
                        scheduler=scheduler, progress=False)
    if not report.ok:
        raise UserError(f"rendering {out} failed for chunks {sorted(report.failed)}; re-run to retry them")


def run_cell(train_store: str, test_store: str, cell_dir: str, views: str, seed: int, train: dict[str, Any],
             evaluate: dict[str, Any]) -> dict[str, Any]:
    """Train one (view maker, seed) cell and evaluate it; skipped when its report already exists."""
    from pipelines.evaluate import evaluate_run
    from training.trainer import TrainConfig
    from training.trainer import train as fit

    cell = Path(cell_dir)
    report_path = cell / "report.json"
    if report_path.exists():
        return json.loads(report_path.read_text())
    cell.mkdir(parents=True, exist_ok=True)
    hp = dict(train.get("hp") or {})
    args = {k: v for k, v in train.items() if k != "hp"}
    cfg = TrainConfig(data=train_store, views=views, seed=seed, objective_args=hp, **args)
    fit(cfg, cell, resume=(cell / "checkpoint.pt").exists(), progress=False)
    rep = evaluate_run(str(cell), test_store, evaluate.get("fit", 10240), evaluate.get("score", 20480),
                       kernel=evaluate.get("kernel", True))
    report_path.write_text(json.dumps(rep, indent=2, default=str) + "\n")
    return rep


def aggregate(cfg: dict[str, Any], reports: dict[tuple[str, int], dict[str, Any]], layer: str) -> dict[str, Any]:
    """{row name: {column: (mean, std)}} over seeds."""
    table = {}
    for row in cfg["rows"]:
        vals = [[reports[(row["name"], s)]["layers"][layer]["table"].get(c, np.nan) for c in COLUMNS]
                for s in cfg.get("seeds", [0]) if (row["name"], s) in reports]
        arr = np.array(vals, dtype=float)
        table[row["name"]] = {c: (float(np.nanmean(arr[:, j])), float(np.nanstd(arr[:, j]))) for j, c in
                              enumerate(COLUMNS)}
    return table


def _cell(mean: float, std: float) -> str:
    text = f"{mean:.2f} ± {std:.2f}"
    return f"**{text}**" if mean >= 0.5 else (f"{text} ↓" if mean < 0.25 else text)


def markdown_table(table: dict[str, Any]) -> str:
    head = "| views generated by | " + " | ".join(COLUMNS) + " |"
    lines = [head, "|---" * (len(COLUMNS) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(_cell(*row[c]) for c in COLUMNS) + " |" for name, row in table.items()]
    return "\n".join(lines) + "\n\nbold: R^2 >= 0.5; ↓: R^2 < 0.25 (red in the paper); mean ± std over seeds"


def side_by_side(cfg: dict[str, Any], table: dict[str, Any]) -> str:
    head = "| views generated by | " + " | ".join(COLUMNS) + " |"
    lines = [head, "|---" * (len(COLUMNS) + 1) + "|"]
    for row in cfg["rows"]:
        paper = row.get("paper") or [np.nan] * len(COLUMNS)
        ours = table[row["name"]]
        lines.append(f"| {row['name']} | " + " | ".join(f"{ours[c][0]:.2f} / {p:.2f}" for c, p in
                                                         zip(COLUMNS, paper, strict=True)) + " |")
    return "\n".join(lines) + "\n\nours / paper 000 (means)"


def heatmap(table: dict[str, Any], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(table)
    m = np.array([[table[n][c][0] for c in COLUMNS] for n in names])
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(names) + 1.8))
    im = ax.imshow(m, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(COLUMNS)), COLUMNS, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    for i in range(len(names)):
        for j in range(len(COLUMNS)):
            ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=7, color="w" if m[i, j] < 0.6 else "k")
    fig.colorbar(im, ax=ax, label="R^2 / accuracy")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    write_atomic(out, lambda p: fig.savefig(p, dpi=120, format="png"))
    plt.close(fig)


def run_compare(cfg: dict[str, Any], out: Path, workers: int = 1, scheduler: str | None = None,
                layer: str = "output") -> dict[str, Any]:
    """The whole grid; returns {"table", "markdown", "files"}."""
    out.mkdir(parents=True, exist_ok=True)
    scene = cfg.get("scene", "causal3dident")
    stores = {k: out / "stores" / f"{k}.zarr" for k in ("train", "test")}
    for key, path in stores.items():
        render_store(cfg["stores"][key], scene, path, None, scheduler)
    cells = [(row["name"], s, str(out / "cells" / _slug(row["name"]) / f"seed{s}"), row["views"])
             for row in cfg["rows"] for s in cfg.get("seeds", [0])]
    args = (str(stores["train"]), str(stores["test"]))
    reports: dict[tuple[str, int], dict[str, Any]] = {}
    if scheduler or workers > 1:
        from dask.distributed import Client, LocalCluster

        cluster = None if scheduler else LocalCluster(n_workers=workers, threads_per_worker=1,
                                                      dashboard_address=":0", silence_logs=40)
        with Client(scheduler or cluster) as client:
            futs = {client.submit(run_cell, *args, d, v, s, cfg["train"], cfg.get("evaluate", {}), pure=False): (n, s)
                    for n, s, d, v in cells}
            for fut, key in futs.items():
                reports[key] = fut.result()
        if cluster is not None:
            cluster.close()
    else:
        from tqdm import tqdm

        for n, s, d, v in tqdm(cells, desc="compare", unit="cell"):
            reports[(n, s)] = run_cell(*args, d, v, s, cfg["train"], cfg.get("evaluate", {}))
    table = aggregate(cfg, reports, layer)
    md = f"# {cfg.get('name', 'compare')} ({layer} layer)\n\n" + markdown_table(table)
    files = {"markdown": out / "table.md", "csv": out / "table.csv", "heatmap": out / "table.png",
             "paper": out / "vs_paper.md", "json": out / "table.json"}
    files["markdown"].write_text(md + "\n")
    files["paper"].write_text(side_by_side(cfg, table) + "\n")
    files["json"].write_text(json.dumps({"layer": layer, "table": table}, indent=2) + "\n")
    with files["csv"].open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["views"] + [f"{c} {s}" for c in COLUMNS for s in ("mean", "std")])
        for name, row in table.items():
            w.writerow([name] + [f"{v:.4f}" for c in COLUMNS for v in row[c]])
    heatmap(table, files["heatmap"], f"{cfg.get('name', 'compare')}: {layer} layer, mean over seeds")
    return {"table": table, "markdown": md, "files": {k: str(v) for k, v in files.items()}}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="run paper 000's DA-vs-LT grid (render, train, evaluate, one table)",
        description="Render the config's train/test stores, train and evaluate every (view maker, seed) cell "
                    "(resumable: finished cells are skipped; in parallel with --workers or --scheduler), and "
                    "write the table in paper 000's layout (markdown, CSV, heatmap, side-by-side with the paper).",
        epilog="examples:\n  ident3d compare --config configs/da_vs_lt_small.yaml --out runs/da_vs_lt_small\n"
               "  ident3d compare --config configs/da_vs_lt.yaml --out runs/da_vs_lt --scheduler tcp://HOST:8786",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="a compare config (see configs/)")
    p.add_argument("--out", required=True, help="output folder (stores, cells, tables)")
    p.add_argument("--workers", type=int, default=1, help="cells trained in parallel on a local cluster")
    p.add_argument("--scheduler", metavar="ADDR", help="run cells (and rendering) on an existing Dask cluster")
    p.add_argument("--layer", choices=("output", "inner"), default="output", help="representation to tabulate")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.workers <= 0:
        raise UserError("--workers must be positive")
    cfg = load_config(args.config)
    result = run_compare(cfg, Path(args.out), args.workers, args.scheduler, args.layer)
    print(result["markdown"])
    print("files: " + ", ".join(result["files"].values()))
    return 0
