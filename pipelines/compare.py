"""``ident3d compare``: paper 000's grid of view makers x seeds: render the train/test stores, train
and evaluate every cell (resumable; in parallel on a Dask cluster when given one), and write one
table in the paper's layout (mean +- std over seeds) as markdown, CSV, a heatmap and a
side-by-side with the paper's numbers. Each cell is kept with the settings that made it
(``ident3d.pipelines.cells``)."""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.evaluation.ceiling import CEILING_NAME, MATCH, ceiling_fractions, chance_levels, fraction_markdown, verdict
from ident3d.pipelines.cells import Cell, canonical, claim_cell, diverged_note, read_marker, run_settings, write_marker
from ident3d.pipelines.experiment import (
    ExperimentKind,
    cell_dir,
    check_eval,
    check_kind,
    check_metrics,
    check_seeds,
    over_seeds,
    run_experiment,
    write_tables,
)
from ident3d.pipelines.files import check_output_dir, read_yaml_config, write_atomic

# the table's columns are the evaluation report's (from the test store's latent groups); the paper's
# Causal3DIdent layout is evaluation.report.PAPER_COLUMNS
TOP_KEYS = {"kind", "name", "scene", "stores", "train", "seeds", "evaluate", "metrics", "rows", "da_style", "ceiling"}
KIND = "compare"
ROW_KEYS = {"name", "views", "paper", "train"}
STORE_KEYS = {"n", "resolution", "samples", "seed", "preset", "views", "view_seeds", "view_conditional"}
SEQUENCE_KEYS = {"sequences", "length", "scm", "resolution", "samples", "seed", "preset"}  # a sequence store's spec
EVAL_DEFAULTS = {"fit": 10240, "score": 20480, "kernel": True}  # test-store rows to fit and score the probes on
# the row `ceiling: true` (the default) adds: the same encoder, data and budget trained on the labels
CEILING_ROW = {"name": CEILING_NAME, "views": "labels", "train": {"objective": "supervised", "hp": {}}}


def load_config(path: str | Path) -> dict[str, Any]:
    """Read and check a compare config; every row's view maker is validated before anything runs."""
    return check_config(read_yaml_config(path, "configs/da_vs_lt_small.yaml"), str(path))


def check_config(cfg: Any, where: str) -> dict[str, Any]:
    """Validate the whole config before anything renders or trains: every section's keys and types, the stores,
    each row (views, train overrides) and the evaluation; one line naming the file and the key."""
    from ident3d.training.views import Normalize, make_view_maker

    check_kind(cfg, KIND, where)
    if not isinstance(cfg, dict) or set(cfg) - TOP_KEYS or not {"stores", "train", "rows"} <= set(cfg):
        raise UserError(f"config {where}: needs stores, train and rows (allowed keys: {', '.join(sorted(TOP_KEYS))})")
    for key in ("name", "scene"):
        if key in cfg and (not isinstance(cfg[key], str) or not cfg[key].strip()):
            raise UserError(f"config {where}: {key} must be text, got {cfg[key]!r}")
    check_metrics(cfg, where)
    check_stores(cfg, where)
    eval_settings(cfg, f"config {where}")
    check_rows(cfg, where)
    if not isinstance(cfg.get("ceiling", True), bool):
        raise UserError(f"config {where}: ceiling must be true or false, got {cfg['ceiling']!r}")
    if cfg.get("ceiling", True) and ceiling_name(cfg) is None:
        cfg = {**cfg, "rows": [*cfg["rows"], CEILING_ROW]}
    stored = {v.split(":")[0] for v in str(cfg["stores"]["train"].get("views", "")).split(",") if v}
    for row in cfg["rows"]:
        try:
            maker = make_view_maker(str(row.get("views", "")), Normalize((0.0,) * 3, (1.0,) * 3))
        except UserError as exc:
            raise UserError(f"config {where}: row {row.get('name')!r}: {exc}") from None
        for view in (k.split("/")[1] for k in maker.requires if k.startswith("views/")):
            if view not in stored:
                raise UserError(f"config {where}: row {row.get('name')!r} needs the stored view {view!r}; add it "
                                "to stores.train.views")
    from ident3d.evaluation.report import check_da_style

    check_da_style(cfg.get("da_style"), f"config {where}")  # names are checked against the SCM once rendered
    check_stores(cfg, where)
    check_train(cfg, where)
    plan_stores(cfg, f"config {where}")
    return cfg


def plan(cfg: dict[str, Any], out: Path) -> list[tuple[str, int, Path]]:
    """Every cell of a checked config as (row, seed, folder), the ceiling row included: what --dry-run lists."""
    return [(row["name"], s, cell_dir(out, row["name"], s)) for row in cfg["rows"] for s in cfg.get("seeds", [0])]


def check_stores(cfg: dict[str, Any], where: str) -> None:
    """Each store spec has a positive n (or, for a sequence store, sequences and length), resolution and samples and
    only known keys (checked before anything renders; ``plan_stores`` then checks them with the renderer)."""
    for key in ("train", "test"):
        spec = cfg["stores"].get(key) if isinstance(cfg["stores"], dict) else None
        if not isinstance(spec, dict):
            raise UserError(f"config {where}: stores.{key} is missing; give n, resolution and samples")
        allowed = SEQUENCE_KEYS if "sequences" in spec else STORE_KEYS
        if unknown := sorted(set(spec) - allowed):
            raise UserError(f"config {where}: stores.{key} has no setting {unknown[0]!r}"
                            + (" (a sequence store has sequences x length frames)" if "sequences" in spec else "")
                            + f"; allowed: {', '.join(sorted(allowed))}")
        for field_ in ("sequences", "length", "resolution", "samples") if "sequences" in spec else (
                "n", "resolution", "samples"):
            value = spec.get(field_)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UserError(f"config {where}: stores.{key}.{field_} must be a whole number >= 1, got {value!r}")
        seed = spec.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise UserError(f"config {where}: stores.{key}.seed must be a whole number >= 0, got {seed!r}")
        for field_ in ("preset", "views", "view_seeds", "view_conditional", "scm"):
            if field_ in spec and spec[field_] is not None and not isinstance(spec[field_], str):
                raise UserError(f"config {where}: stores.{key}.{field_} must be text, got {spec[field_]!r}")


def store_size(spec: dict[str, Any]) -> int:
    """The images of a store spec: n, or sequences x length frames."""
    return spec["n"] if "n" in spec else spec["sequences"] * spec["length"]


def check_rows(cfg: dict[str, Any], where: str) -> None:
    """rows: a non-empty list of {name, views, paper, train} with unique names, views text and paper numbers."""
    rows = cfg["rows"]
    if not isinstance(rows, list) or not rows:
        raise UserError(f"config {where}: rows must be a non-empty list of {{name, views, paper}}")
    names = set()
    for i, row in enumerate(rows):
        head = f"config {where}: rows[{i}]"
        if not isinstance(row, dict) or set(row) - ROW_KEYS or not {"name", "views"} <= set(row):
            raise UserError(f"{head}: needs name and views (allowed keys: {', '.join(sorted(ROW_KEYS))})")
        if not isinstance(row["name"], str) or not row["name"].strip() or row["name"] in names:
            raise UserError(f"{head}.name must be text used once, got {row['name']!r}")
        names.add(row["name"])
        if not isinstance(row["views"], str):
            raise UserError(f"{head} ({row['name']}): views must be text, e.g. colour, got {row['views']!r}")
        paper = row.get("paper")
        if paper is not None and (not isinstance(paper, list) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in paper)):
            raise UserError(f"{head} ({row['name']}): paper must be a list of numbers (paper 000's row), got {paper!r}")


def ceiling_name(cfg: dict[str, Any]) -> str | None:
    """The name of the row trained with the supervised objective (the ceiling), if the grid has one."""
    section = cfg.get("train") if isinstance(cfg.get("train"), dict) else {}
    for row in cfg["rows"]:
        own = row.get("train") if isinstance(row.get("train"), dict) else {}
        if {**section, **own}.get("objective") == "supervised":
            return row["name"]
    return None


def eval_settings(cfg: dict[str, Any], head: str = "config") -> dict[str, Any]:
    """The config's evaluation settings with defaults filled in, checked (``head`` starts an error's line)."""
    return check_eval(cfg, EVAL_DEFAULTS, "test-store rows", head)


def row_train(cfg: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """A row's training settings: the config's train section with the row's own ``train`` on top (e.g. another
    objective and encoder for a generative row; a row's ``hp`` replaces the section's)."""
    return {**cfg["train"], **(row.get("train") or {})}


def check_train(cfg: dict[str, Any], where: str) -> None:
    """``check_train_section`` for the config's train section as every row sees it (rows may override it)."""
    if not isinstance(cfg["train"], dict):
        raise UserError(f"config {where}: train must be a mapping of training settings (objective, encoder, ...)")
    seen = set()
    for row in cfg["rows"]:
        own = row.get("train") or {}
        if not isinstance(own, dict):
            raise UserError(f"config {where}: row {row.get('name')!r}: train must be a mapping, e.g. "
                            "train: {objective: simvae, encoder: resnet_vae}")
        merged = row_train(cfg, row)
        key = json.dumps(merged, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            check_train_section({**cfg, "train": merged}, f"{where} (row {row.get('name')!r})" if own else where)


def check_train_section(cfg: dict[str, Any], where: str) -> None:
    """Validate the train: section before rendering: build its TrainConfig and, once, its encoder and objective
    (names, hp keys and values, numbers), each row's view count against the objective, the batch vs store size
    and the seeds; rendering the stores takes minutes, a typo here should not wait for it."""
    from ident3d.training.objectives import OBJECTIVES
    from ident3d.training.parts import check_components, check_numbers
    from ident3d.training.trainer import TrainConfig

    train, head = cfg["train"], f"config {where}"
    if not isinstance(train, dict):
        raise UserError(f"{head}: train must be a mapping of training settings (objective, encoder, steps, ...)")
    args = {k: v for k, v in train.items() if k != "hp"}
    allowed = sorted({f.name for f in fields(TrainConfig)} - {"data", "views", "seed", "objective_args", "normalize"})
    unknown = [k for k in args if k not in allowed]
    if unknown:
        raise UserError(f"{head}: train has no setting {unknown[0]!r}; allowed: hp, {', '.join(allowed)}")
    if not isinstance(train.get("hp") or {}, dict):
        raise UserError(f"{head}: train.hp must be a mapping, e.g. hp: {{tau: 1.0}}")
    tc = TrainConfig(data="-", views="none", objective_args=dict(train.get("hp") or {}), **args)
    check_numbers(tc, flag=lambda key: f"{head}: train.{key}")
    try:
        check_components(tc, image_size=cfg["stores"]["train"]["resolution"])
    except UserError as exc:
        raise UserError(f"{head}: train: {exc}") from None
    need = OBJECTIVES.get(tc.objective).n_views
    n = store_size(cfg["stores"]["train"])
    if tc.batch_size > n:
        raise UserError(f"{head}: train.batch_size {tc.batch_size} is larger than the {n} images of stores.train; "
                        "lower the batch or render more")
    if need != 2 and OBJECTIVES.get(tc.objective).view_maker is None:  # every image view maker makes two views
        raise UserError(f"{head}: objective {tc.objective} needs {need} views; the rows' view makers make 2")
    check_seeds(cfg.get("seeds", [0]), head)


def store_args(spec: dict[str, Any], scene: str | None) -> dict[str, Any]:
    """The render API's arguments for one of the config's stores (``ident3d.render.render_store``, or for a sequence
    store ``ident3d.render.sequences.render_sequences``, whose scene is its SCM's unless the config names one)."""
    common = {"seed": spec.get("seed", 0), "preset": spec.get("preset", "fast"),
              "settings": {"resolution": spec["resolution"], "samples": spec["samples"]}}
    if "sequences" in spec:
        return {**common, "scm": spec.get("scm", "temporal_causal3dident"), "sequences": spec["sequences"],
                "length": spec["length"], "scene": scene}
    return {**common, "scene": scene or "causal3dident", "n": spec["n"], "views": spec.get("views") or None,
            "view_seeds": spec.get("view_seeds", "independent"), "view_conditional": spec.get("view_conditional")}


def plan_stores(cfg: dict[str, Any], head: str = "config") -> dict[str, str]:
    """Check both stores with the renderer before either renders (nothing is written; ``head`` starts an error's
    line); returns each store's fingerprint digest (what a cell's key records of its data, not its path)."""
    from ident3d.render import plan_render
    from ident3d.render.sequences import plan_sequences

    digests = {}
    for key in ("train", "test"):
        spec = cfg["stores"][key]
        try:
            plan = (plan_sequences if "sequences" in spec else plan_render)(
                f"{key}.zarr", **store_args(spec, cfg.get("scene")))
        except UserError as exc:
            raise UserError(f"{head}: stores.{key}: {exc}") from None
        digests[key] = hashlib.sha256(canonical(plan.attrs.fingerprint()).encode()).hexdigest()
    return digests


def render_store(spec: dict[str, Any], scene: str | None, out: Path, workers: int | None, scheduler: str | None,
                 progress: bool = False) -> None:
    """Render (or resume) one of the config's stores through the render API."""
    from ident3d.render import render_store as render
    from ident3d.render.sequences import render_sequences

    if progress:
        print(f"rendering {out}: {store_size(spec)} images at {spec['resolution']} px", flush=True)
    report = (render_sequences if "sequences" in spec else render)(
        out, **store_args(spec, scene), workers=workers, scheduler=scheduler, progress=progress)
    if not report.ok:
        raise UserError(f"rendering {out} failed for chunks {sorted(report.failed)}; re-run to retry them")


def cell_config(cfg: dict[str, Any], row: dict[str, Any], seed: int, train_store: str = "-") -> Any:
    """The TrainConfig of one (view maker, seed) cell."""
    from ident3d.training.trainer import TrainConfig

    train = row_train(cfg, row)
    args = {k: v for k, v in train.items() if k != "hp"}
    return TrainConfig(data=train_store, views=row["views"], seed=seed, objective_args=dict(train.get("hp") or {}),
                       **args)


def cell_settings(cfg: dict[str, Any], row: dict[str, Any], seed: int, stores: dict[str, str]) -> dict[str, Any]:
    """Everything that shapes a cell's report, resolved (``ident3d.pipelines.cells``): its trainer config, the stores'
    fingerprints (not their paths: a moved output keeps its cells), the evaluation and the DA style map."""
    settings = {"train": run_settings(cell_config(cfg, row, seed), drop=("data", "normalize")), "stores": stores,
                "evaluate": eval_settings(cfg), "da_style": cfg.get("da_style")}
    return {**settings, "metrics": cfg["metrics"]} if cfg.get("metrics") else settings


def run_cell(train_store: str, test_store: str, cell_dir: str, views: str, seed: int, train: dict[str, Any],
             evaluate: dict[str, Any], da_style: dict[str, Any] | None = None, metrics: tuple[str, ...] = (),
             progress: bool = False) -> dict[str, Any]:
    """Train one (view maker, seed) cell and evaluate it; skipped when its report already exists (the caller has
    claimed the folder for the cell's settings first, ``ident3d.pipelines.cells.claim_cell``). A cell whose loss
    diverges gives {"diverged": why} and saves no report, so a re-run retries it."""
    from ident3d.evaluation.run_report import evaluate_run
    from ident3d.training.run_dir import RunDir
    from ident3d.training.trainer import TrainingDiverged
    from ident3d.training.trainer import train as fit

    cell = Path(cell_dir)
    report_path = cell / "report.json"
    done = read_marker(report_path)  # a torn report (a kill mid-write, before reports were atomic) is not done
    if done is not None:
        return done
    cell.mkdir(parents=True, exist_ok=True)
    cfg = cell_config({"train": train}, {"views": views}, seed, train_store)
    run_dir = RunDir(cell)
    resume = run_dir.start(cfg, resume=run_dir.config_path.exists())  # the saved run must be this cell's
    try:
        fit(cfg, cell, resume=resume, progress=progress,
            say=(lambda text: print(text, flush=True)) if progress else None)
    except TrainingDiverged as exc:  # the one divergence policy (as in synthetic): report the cell, go on
        return {"diverged": str(exc).split(";")[0]}
    ev = {**EVAL_DEFAULTS, **evaluate}
    rep = evaluate_run(str(cell), test_store, ev["fit"], ev["score"], kernel=ev["kernel"], da_style=da_style,
                       metrics=metrics)
    write_marker(report_path, rep)
    return rep


def report_columns(report: dict[str, Any], layer: str) -> list[str]:
    """A cell report's column titles (derived from its test store; older reports: their table's keys), then, for the
    output layer, its metrics' columns (``NAME/COLUMN``)."""
    return [*(report.get("columns") or report["layers"][layer]["table"]), *metric_values(report, layer)]


def cell_values(report: dict[str, Any], layer: str) -> dict[str, float]:
    """A cell's numbers in the table: the report's columns of ``layer`` and its metrics' (output layer)."""
    return {**report["layers"][layer]["table"], **metric_values(report, layer)}


def metric_values(report: dict[str, Any], layer: str) -> dict[str, float]:
    """The report's metrics as table cells (they score the output layer; none for the inner one)."""
    from ident3d.evaluation.metric_suite import table_values

    return table_values(report.get("metrics") or {}) if layer == "output" else {}


def table_columns(reports: dict[tuple[str, int], dict[str, Any]], layer: str) -> list[str]:
    """The grid's columns: the first cell's; every cell must have the same (they share one test store)."""
    if not reports:
        raise UserError("no cell reports to tabulate")
    cols = report_columns(next(iter(reports.values())), layer)
    for (name, seed), rep in reports.items():
        if report_columns(rep, layer) != cols:
            raise UserError(f"cell {name!r} seed {seed} has columns {report_columns(rep, layer)}, the first cell "
                            f"{cols}; delete the stale cell's report.json and re-run")
    return cols


def aggregate(cfg: dict[str, Any], reports: dict[tuple[str, int], dict[str, Any]], layer: str) -> dict[str, Any]:
    """{row name: {column: (mean, std)}} over seeds, in the reports' column order (rows without a report
    are left out)."""
    cols = table_columns(reports, layer)
    table = {}
    for row in cfg["rows"]:
        cells = [cell_values(reports[(row["name"], s)], layer) for s in cfg.get("seeds", [0])
                 if (row["name"], s) in reports]
        vals = [[values.get(c, np.nan) for c in cols] for values in cells]
        if not vals:
            continue
        arr = np.array(vals, dtype=float)
        table[row["name"]] = {c: over_seeds(arr[:, j])[:2] for j, c in enumerate(cols)}
    return table


def metric_columns(cfg: dict[str, Any]) -> frozenset[str]:
    """The table columns the config's ``metrics`` add (``NAME/COLUMN``): not R^2s, and not paper 000's."""
    from ident3d.evaluation.metric_suite import columns

    return frozenset(columns(cfg.get("metrics") or []))


def without_metrics(cfg: dict[str, Any], table: dict[str, Any]) -> dict[str, Any]:
    """The aggregated table with the latents' columns only (the ceiling's fractions and the paper's side-by-side)."""
    extra = metric_columns(cfg)
    return {name: {c: v for c, v in row.items() if c not in extra} for name, row in table.items()}


def columns_of(table: dict[str, Any]) -> list[str]:
    """The column titles of an aggregated table (every row has the same, in order)."""
    if not table:
        raise UserError("the table has no rows")
    return list(next(iter(table.values())))


def seed_counts(cfg: dict[str, Any], reports: dict[tuple[str, int], dict[str, Any]]) -> dict[str, int]:
    """{row name: number of seeds with a report} (rows without one are left out, as in ``aggregate``)."""
    counts = {row["name"]: sum((row["name"], s) in reports for s in cfg.get("seeds", [0])) for row in cfg["rows"]}
    return {name: n for name, n in counts.items() if n}


def _cell(mean: float, std: float, n: int, marked: bool = True) -> str:
    """One table cell: the mean, with the spread only when there are two or more seeds to spread over; an R^2 or
    accuracy column (``marked``, not a metric's) bold at >= 0.5 and arrowed below 0.25, as the paper colours them."""
    text = f"{mean:.2f} ± {std:.2f}" if n >= 2 else f"{mean:.2f}"
    if not marked:
        return text
    return f"**{text}**" if mean >= 0.5 else (f"{text} ↓" if mean < 0.25 else text)


def seeds_note(counts: dict[str, int]) -> str:
    """What the cells are: 'mean ± std over n = 3 seeds', or 'n = 1 seed, no spread'."""
    ns = sorted(set(counts.values()))
    if ns == [1]:
        return "n = 1 seed: single values, no spread"
    if len(ns) == 1:
        return f"mean ± std over n = {ns[0]} seeds"
    return "mean ± std over each row's seeds (column n; n = 1: a single value, no spread)"


def markdown_table(table: dict[str, Any], counts: dict[str, int] | None = None,
                   plain: frozenset[str] = frozenset()) -> str:
    """The aggregated table as markdown, one column per report column; ``counts``: seeds per row (an n column
    is added when rows have different numbers of seeds; None: several seeds each, as before counts existed);
    ``plain``: columns printed without the R^2 marks (a metric's)."""
    cols = columns_of(table)
    if counts is None:
        return _markdown(table, cols, dict.fromkeys(table, 2), "mean ± std over seeds", plain)
    return _markdown(table, cols, counts, seeds_note(counts), plain)


def _markdown(table: dict[str, Any], cols: list[str], counts: dict[str, int], note: str,
              plain: frozenset[str] = frozenset()) -> str:
    """The markdown lines of ``markdown_table``."""
    uneven = len(set(counts.values())) > 1
    head = "| views generated by | " + " | ".join(cols) + (" | n |" if uneven else " |")
    lines = [head, "|---" * (len(cols) + 1 + uneven) + "|"]
    lines += [f"| {name} | " + " | ".join(_cell(*row[c], counts[name], c not in plain) for c in cols)
              + (f" | {counts[name]} |" if uneven else " |") for name, row in table.items()]
    marks = "bold: R^2 >= 0.5; ↓: R^2 < 0.25 (red in the paper" + (
        "; metric columns NAME/COLUMN unmarked); " if plain & set(cols) else "); ")
    return "\n".join(lines) + "\n\n" + marks + note


def side_by_side(cfg: dict[str, Any], table: dict[str, Any]) -> str:
    """Our means next to paper 000's (a row's ``paper`` list), only when the columns are the paper's."""
    from ident3d.evaluation.report import PAPER_COLUMNS, is_paper_layout

    cols = columns_of(table)
    if not is_paper_layout(cols):
        return (f"No side-by-side with paper 000: its table has the Causal3DIdent columns "
                f"({', '.join(PAPER_COLUMNS)}); this grid's test store gives {', '.join(cols)}.")
    head = "| views generated by | " + " | ".join(cols) + " |"
    lines = [head, "|---" * (len(cols) + 1) + "|"]
    top = table.get(ceiling_name(cfg) or "")
    for row in cfg["rows"]:
        if row["name"] not in table:
            continue
        ours = table[row["name"]]
        if ours is top:
            lines.append(f"| {row['name']} | " + " | ".join(f"{ours[c][0]:.2f}" for c in cols) + " |")
            continue
        paper = row.get("paper") or []
        paper = paper if len(paper) == len(cols) else [np.nan] * len(cols)
        lines.append(f"| {row['name']} | " + " | ".join(
            f"{ours[c][0]:.2f} / {p:.2f} {verdict(ours[c][0], p, top[c][0]) if top else ''}".rstrip()
            for c, p in zip(cols, paper, strict=True)) + " |")
    note = "ours / paper 000 (means; nan: the row gives no paper values for these columns)"
    if top is not None:
        note += (f"; =: within {MATCH} of the paper, +: above it; below it, *bounded*: the paper's value is above "
                 f"what the supervised ceiling reached here (the data's scale allows no more), *open*: the ceiling "
                 "allows it, so the gap is the method's (a defect or a real effect)")
    return "\n".join(lines) + "\n\n" + note


def heatmap(table: dict[str, Any], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, cols = list(table), columns_of(table)
    m = np.array([[table[n][c][0] for c in cols] for n in names])
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(cols) + 2), 0.45 * len(names) + 1.8))
    im = ax.imshow(m, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    for i in range(len(names)):
        for j in range(len(cols)):
            ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=7, color="w" if m[i, j] < 0.6 else "k")
    fig.colorbar(im, ax=ax, label="R^2 / accuracy")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    write_atomic(out, lambda p: fig.savefig(p, dpi=120, format="png"))
    plt.close(fig)


def write_csv(table: dict[str, Any], path: Path, counts: dict[str, int] | None = None) -> None:
    """The aggregated table as CSV: one row per view maker, "<column> mean" and "<column> std" per column and,
    with ``counts``, a last column ``n`` (seeds) and the std left empty for a single seed (no spread to report)."""
    cols = columns_of(table)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["views"] + [f"{c} {s}" for c in cols for s in ("mean", "std")] + (["n"] if counts else []))
        for name, row in table.items():
            n = counts[name] if counts else 2
            cells = [x for c in cols for x in (f"{row[c][0]:.4f}", f"{row[c][1]:.4f}" if n > 1 else "")]
            w.writerow([name, *cells] + ([n] if counts else []))


def _check_da_style_names(cfg: dict[str, Any], test_store: str) -> None:
    """Fail before any training when the config's ``da_style`` names latents the store's SCM lacks."""
    from ident3d.evaluation.report import check_da_style_names
    from ident3d.store.info import store_info

    if cfg.get("da_style"):
        check_da_style_names(cfg["da_style"], store_info(test_store, allow_partial=True).scm, "config da_style")


@dataclass
class Compare(ExperimentKind):
    """The compare kind (paper 000's grid): the config's train and test stores are rendered once, then one cell per
    (view maker, seed) is trained on the train store and evaluated on the test store; one table in the paper's
    layout with the fraction of the supervised ceiling and a side-by-side with the paper."""

    name = "compare"
    outputs = frozenset({"stores", "cells", "table.md", "table.csv", "table.png", "vs_paper.md", "table.json",
                         "compare.json"})
    layer: str = "output"

    def cells(self, cfg: dict[str, Any], out: Path, workers: int, scheduler: str | None,
              progress: bool) -> list[Cell]:
        where = out.expanduser().resolve()  # what cells record: config.json names its store by an absolute path
        stores = {k: where / "stores" / f"{k}.zarr" for k in ("train", "test")}
        digests = plan_stores(cfg)
        scene = cfg.get("scene")
        for key, path in stores.items():
            render_store(cfg["stores"][key], scene, path, None, scheduler, progress)
        _check_da_style_names(cfg, str(stores["test"]))
        cells = []
        for row in cfg["rows"]:
            for s in cfg.get("seeds", [0]):
                cell = cell_dir(where, row["name"], s)
                before = cell.parent / f"seed{s}"  # the cell's folder before every kind's were seed_N: kept
                if before.is_dir() and not cell.exists():
                    before.rename(cell)
                claim_cell(cell, cell_settings(cfg, row, s, digests))
                cells.append(Cell((row["name"], s), run_cell, (
                    str(stores["train"]), str(stores["test"]), str(cell), row["views"], s, row_train(cfg, row),
                    cfg.get("evaluate") or {}, cfg.get("da_style"), tuple(cfg.get("metrics") or ()))))
        return cells

    def tabulate(self, cfg: dict[str, Any], reports: dict[tuple[str, int], dict[str, Any]],
                 diverged: dict[tuple[str, int], str], out: Path) -> dict[str, Any]:
        layer = self.layer
        if not reports:
            raise UserError("every cell diverged (" + "; ".join(f"{n} seed {s}: {why}"
                                                               for (n, s), why in diverged.items())
                            + "); lower train.lr and run the command again")
        table = aggregate(cfg, reports, layer)
        counts = seed_counts(cfg, reports)
        md = f"# {cfg.get('name', 'compare')} ({layer} layer)\n\n" + markdown_table(table, counts,
                                                                                   metric_columns(cfg))
        if diverged:
            md += "\n\n" + diverged_note(diverged)
        summary = {"layer": layer, "columns": columns_of(table), "table": table, "n_seeds": counts,
                   "diverged": [{"row": n, "seed": s, "why": why} for (n, s), why in diverged.items()]}
        latents = without_metrics(cfg, table)
        top = ceiling_name(cfg)
        if top in table and len(table) > 1:
            from ident3d.store.info import store_info

            summary["ceiling"] = top
            classes = store_info(str(out / "stores" / "test.zarr"), allow_partial=True).class_names or []
            summary["fraction_of_ceiling"] = ceiling_fractions(latents, top, chance_levels(columns_of(latents),
                                                                                           len(classes)))
            md += "\n\n## Fraction of the supervised ceiling\n\n" + fraction_markdown(
                summary["fraction_of_ceiling"], latents[top])
        files = write_tables(out, {"table.md": md + "\n", "vs_paper.md": side_by_side(cfg, latents) + "\n",
                                   "table.json": json.dumps(summary, indent=2) + "\n",
                                   "table.csv": lambda p: write_csv(table, p, counts)})
        files["table.png"] = out / "table.png"
        heatmap(table, files["table.png"], f"{cfg.get('name', 'compare')}: {layer} layer, mean over seeds")
        names = {"markdown": "table.md", "csv": "table.csv", "heatmap": "table.png", "paper": "vs_paper.md",
                 "json": "table.json"}
        return {"table": table, "markdown": md, "files": {k: str(files[v]) for k, v in names.items()}}


def run_compare(cfg: dict[str, Any], out: Path, workers: int = 1, scheduler: str | None = None,
                layer: str = "output", progress: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """The whole grid; returns {"table", "markdown", "files"}. ``progress``: say what renders and trains, with
    the render and training progress bars and the training run-time estimate. Finished tables of another ``layer``
    are replaced only with ``overwrite`` (the cells are kept either way)."""
    check_layer(out / "table.json", layer, overwrite, "use another --out")
    return run_experiment(Compare(layer=layer), cfg, out, workers, scheduler, progress)


def check_layer(table: Path, layer: str, overwrite: bool, fix: str) -> None:
    """A finished table (``table``: its JSON) of another --layer is replaced only with --overwrite; outputs made
    before the layer was recorded hold the output layer (the only one tabulated then)."""
    try:
        held = json.loads(table.read_text()).get("layer", "output")
    except (OSError, ValueError, AttributeError):
        return  # no finished table there
    if held != layer and not overwrite:
        raise UserError(f"{table.parent} holds finished tables of the {held} layer; pass --overwrite to replace "
                        f"them with the {layer} layer's, or {fix}")




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
    add_grid_flags(p)
    p.set_defaults(run=run)


def add_grid_flags(p: argparse.ArgumentParser) -> None:
    """The flags of every command that runs compare grids (compare, scaling): where cells run, which layer is
    tabulated, and whether progress is shown."""
    p.add_argument("--workers", type=int, default=1, help="cells trained in parallel on a local cluster")
    p.add_argument("--scheduler", metavar="ADDR", help="run cells (and rendering) on an existing Dask cluster")
    p.add_argument("--layer", choices=("output", "inner"), default="output", help="representation to tabulate")
    p.add_argument("--overwrite", action="store_true",
                   help="replace finished tables made with another --layer (the cells are kept)")
    p.add_argument("--no-progress", action="store_true", help="no render/training progress bars or per-cell lines")


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    check_output_dir(args.out)
    result = run_compare(cfg, Path(args.out), args.workers, args.scheduler, args.layer, progress=not args.no_progress,
                         overwrite=args.overwrite)
    print(result["markdown"])
    print("files: " + ", ".join(result["files"].values()))
    return 0
