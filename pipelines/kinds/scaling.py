"""``ident3d scaling``: how image results grow with images x resolution x steps. A scaling experiment is a list of
compare configs (its points, smallest first); every point's cells run on the one cell engine as one pool, each point
keeps its own compare output (stores, cells, tables), and the experiment adds the curves: per paper fact the value at
each point, its fraction of the supervised ceiling, a verdict at the largest point and a labelled log-linear
extrapolation of where the curve would reach the paper's value. A paper-001 experiment also writes paper 001's
3DIdent table (per-latent R^2, MCC, fraction of the ceiling, NN snap distance) for every point."""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ident3d.causal.errors import UserError
from ident3d.evaluation.ceiling import CEILING_NAME, MATCH
from ident3d.evaluation.verdicts import PAPER001_MEAN_R2, paper000_facts, paper001_facts
from ident3d.pipelines.cells import Cell
from ident3d.pipelines.experiment import (
    ExperimentKind,
    Text,
    cell_dir,
    check_claim,
    check_kind,
    claim_output,
    run_experiment,
    slug,
    write_tables,
)
from ident3d.pipelines.files import check_output_dir, read_yaml_config, write_atomic
from ident3d.pipelines.kinds.compare import (
    Compare,
    CompareConfig,
    add_grid_flags,
    check_layer,
    columns_of,
    without_metrics,
)
from ident3d.pipelines.kinds.compare import cell_settings_of as compare_settings_of
from ident3d.pipelines.kinds.compare import load_config as load_compare
from ident3d.pipelines.kinds.compare import plan as plan_compare
from ident3d.pipelines.store_specs import image_size, render_args, store_size
from ident3d.training.hparams import ConfigError, parse_config

KIND = "scaling"
PAPERS = ("000", "001")
PAPER000_ROWS = ("LT: change hues", "DA: crop (large) + colour distortion", "LT: change positions + hues")
SEP = " / "  # a cell's key in the pool: "POINT / ROW"
EXAMPLE = "configs/scaling/paper001.yaml"


@dataclass(frozen=True)
class PointSpec:
    """A point as the config gives it: its compare config and, optionally, its output folder (both relative to the
    scaling config's folder)."""

    config: Text
    out: Text | None = None


@dataclass(frozen=True)
class ScalingConfig:
    """A scaling config as written: its name, the paper whose facts the curves check and the points."""

    name: Text
    paper: str | int
    points: tuple[PointSpec, ...]
    kind: str | None = None
    description: Text | None = None

    def __post_init__(self) -> None:
        if str(self.paper).zfill(3) not in PAPERS:
            raise ConfigError("paper", f"must be one of {', '.join(PAPERS)} (whose facts the curves check), got "
                                       f"{self.paper!r}")
        if not self.points:
            raise ConfigError("points", "must be a non-empty list of {config: a compare config, out: folder}")


@dataclass(frozen=True)
class Point:
    """A checked point: its name (its compare config's), config file, output folder (None: OUT/points/NAME) and
    compare config."""

    name: str
    config: Path
    out: Path | None
    compare: CompareConfig


@dataclass(frozen=True)
class ScalingPlan:
    """A checked scaling config: every point's compare config loaded."""

    name: str
    paper: str
    points: tuple[Point, ...]


def load_config(path: str | Path, overrides: Sequence[str] = (), missing: list[str] | None = None) -> ScalingPlan:
    """Read and check a scaling config and every point's compare config (before anything renders); the points'
    paths are taken from the config file's folder, so the config works from any working folder (``missing``:
    unused)."""
    return check_config(read_yaml_config(path, EXAMPLE, overrides), str(path), Path(path).parent)


def check_config(raw: Any, where: str, base: Path = Path(".")) -> ScalingPlan:
    """name, paper ("000" or "001") and points: a list of {config: compare config, out: its folder (optional)},
    relative paths taken from ``base`` (the config file's folder); every point is checked (``check_point``), point
    names and folders are unique, and a paper-000 experiment's points give the columns its paper values need."""
    head = f"config {where}"
    check_kind(raw, KIND, where)
    cfg = parse_config(ScalingConfig, raw, head)
    loaded = [check_point(point, f"{head}: points[{i}]", base) for i, point in enumerate(cfg.points)]
    names: set[str] = set()
    for i, point in enumerate(loaded):
        if point.name in names:
            raise UserError(f"{head}: points[{i}]: the point name {point.name!r} is used twice; give the compare "
                            "configs different names")
        names.add(point.name)
    paper = str(cfg.paper).zfill(3)
    if paper == "000":
        check_paper000_columns(loaded, head)
    return ScalingPlan(cfg.name, paper, tuple(loaded))


def check_point(point: PointSpec, head: str, base: Path) -> Point:
    """One point: its compare config found and checked, with the steps and batch size the curves' x axis is made
    of (paths resolved)."""
    config = resolve(point.config, base)
    try:
        compare = load_compare(shown(config))
    except UserError as exc:
        raise UserError(f"{head}: {exc}") from None
    name = compare.name or config.stem
    for key in ("steps", "batch_size"):
        if key not in compare.train:
            raise UserError(f"{head} ({name}): config {shown(config)}: train.{key} must be given (the curves' x "
                            "axis, pixels seen, is steps x batch x px^2)")
    return Point(name, config, resolve(point.out, base) if point.out is not None else None, compare)


def resolve(text: str, base: Path) -> Path:
    """A path written in a config: ``~`` expanded, a relative one taken from ``base`` (the config file's folder),
    made absolute."""
    path = Path(text).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


def shown(path: Path) -> str:
    """A path as records and messages show it: relative to the working folder when it lies inside it (as the
    shipped configs' points are run from the repository root), else as it is."""
    if not path.is_absolute():
        return str(path)
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def point_columns(compare: CompareConfig) -> list[str]:
    """The table columns a compare config's test store will give, from its render plan (nothing renders)."""
    from ident3d.evaluation.report import columns, titles
    from ident3d.render import plan_render

    plan = plan_render("test.zarr", **render_args(compare.stores["test"], compare.scene or "causal3dident"))
    return titles(columns(plan.attrs.latent_names, plan.attrs.latent_groups), plan.layout["has_classes"])


def check_paper000_columns(points: list[Point], head: str) -> None:
    """Paper 000's curves compare each point's columns with its rows' ``paper`` values: every point must give the
    same columns, and each paper-000 row's ``paper`` list one value per column (checked before anything renders)."""
    first = None
    for i, point in enumerate(points):
        cols = point_columns(point.compare)
        first = first or (i, cols)
        if cols != first[1]:
            raise UserError(f"{head}: points[{i}] ({point.name}): its test store gives the columns "
                            f"{', '.join(cols)}, points[{first[0]}] gives {', '.join(first[1])}; paper 000's "
                            "curves need the same columns at every point")
        for row in point.compare.rows:
            paper = row.paper
            if row.name in PAPER000_ROWS and paper and len(paper) != len(cols):
                raise UserError(f"{head}: points[{i}] ({point.name}): row {row.name!r}: paper has "
                                f"{len(paper)} values but the test store gives {len(cols)} columns "
                                f"({', '.join(cols)}); give one value per column")


def check_outputs(cfg: ScalingPlan, out: Path, layer: str, overwrite: bool) -> None:
    """Refuse, before anything is written, what would stop the run part-way or replace a finished table: --out and
    every point's compare output must be claimable, no two points may share (or nest) a folder nor a point's own
    out overlap --out, and tables of another --layer are replaced only with --overwrite."""
    check_output_dir(out)
    check_claim(Scaling(), out, cfg.name)
    check_layer(out / "curves.json", layer, overwrite, "use another --out")
    top, seen = out.resolve(), {}
    for point in cfg.points:
        where = Path(shown(point_out(out, point)))  # the same folder, named as messages name it
        head = f"points: {point.name}: out"
        check_output_dir(where, head)
        here = where.resolve()
        if overlaps(here, top) and top / "points" not in here.parents:
            raise UserError(f"{head} {where} overlaps --out {out}; give the point a folder outside --out "
                            "(or no out: it then gets OUT/points/NAME)")
        if other := next((name for name, there in seen.items() if overlaps(here, there)), None):
            raise UserError(f"{head} {where} overlaps the out of point {other!r} ({shown(seen[other])}); "
                            "give each point a folder of its own")
        seen[point.name] = here
        try:
            check_claim(Compare(), where, point.compare.name or "compare")
        except UserError as exc:
            raise UserError(f"{head}: {exc}") from None
        fix = "give the point another out in the config" if point.out else "use another --out"
        check_layer(where / "table.json", layer, overwrite, fix)


def overlaps(a: Path, b: Path) -> bool:
    """Whether two (resolved) folders are one, or one lies inside the other."""
    return a == b or a in b.parents or b in a.parents


def plan(cfg: ScalingPlan, out: Path) -> list[tuple[str, int, Path]]:
    """Every cell of every point as ("POINT / ROW", seed, folder): what --dry-run lists."""
    return [(f"{point.name}{SEP}{row}", seed, Path(shown(folder))) for point in cfg.points
            for row, seed, folder in plan_compare(point.compare, point_out(out, point))]


def cell_settings_of(cfg: ScalingPlan) -> dict[str, dict[str, Any]]:
    """Every cell of every point as ``"POINT/ROW/seed_S"`` -> the settings it is keyed by (its compare grid's)."""
    return {f"{point.name}/{cell}": settings for point in cfg.points
            for cell, settings in compare_settings_of(point.compare).items()}


def point_out(out: Path, point: Point) -> Path:
    """A point's compare output: its ``out`` if the config gives one, else ``OUT/points/NAME``."""
    return point.out or out / "points" / slug(point.name)


@dataclass
class Scaling(ExperimentKind):
    """The scaling kind: the cells of every point's compare grid in one pool, then each point's tables and the
    curves over the points."""

    name = "scaling"
    outputs = frozenset({"points", "tables", "curves.json", "curves.png", "experiment.json"})
    layer: str = "output"

    def marker(self, out: Path) -> Path:
        return out / "experiment.json"

    def cells(self, cfg: ScalingPlan, out: Path, workers: int, scheduler: str | None,
              progress: bool) -> list[Cell]:
        cells = []
        for point in cfg.points:
            where = point_out(out, point)
            claim_output(Compare(), where, point.compare.name or "compare")
            for cell in Compare(layer=self.layer).cells(point.compare, where, workers, scheduler, progress):
                cells.append(Cell((f"{point.name}{SEP}{cell.key[0]}", cell.key[1]), cell.fn, cell.args))
        return cells

    def tabulate(self, cfg: ScalingPlan, results: dict[tuple[str, int], dict[str, Any]],
                 diverged: dict[tuple[str, int], str], out: Path) -> dict[str, Any]:
        points = []
        for point in cfg.points:
            prefix = point.name + SEP
            mine = {(k[len(prefix):], s): r for (k, s), r in results.items() if k.startswith(prefix)}
            lost = {(k[len(prefix):], s): r for (k, s), r in diverged.items() if k.startswith(prefix)}
            where = point_out(out, point)
            table = Compare(layer=self.layer).tabulate(point.compare, mine, lost, where)["table"]
            points.append((point, where, mine, table))
        curves: dict[str, Any] = {"name": cfg.name, "paper": cfg.paper, "layer": self.layer, "match": MATCH}
        files: dict[str, Any] = {}
        if cfg.paper == "001":
            data = paper001_points(points, self.layer)
            curves["paper001"] = {**data, "facts": paper001_facts(data)}
            for p in data["points"]:
                files[f"tables/{slug(p['name'])}.md"] = p.pop("markdown") + "\n"
        else:
            data = paper000_points(points)
            curves["paper000"] = {**data, "facts": paper000_facts(data)}
        (out / "tables").mkdir(exist_ok=True)
        write_tables(out, {**files, "curves.json": json.dumps(curves, indent=2) + "\n"})
        figure(curves.get("paper001"), curves.get("paper000"), out / "curves.png")
        return curves


def run_scaling(cfg: ScalingPlan, out: Path, workers: int = 1, scheduler: str | None = None,
                layer: str = "output", progress: bool = False, overwrite: bool = False,
                overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Run (or resume) every point's grid and write the points' tables and the curves; returns the curves. Every
    refusal comes before anything is written (``check_outputs``); ``overwrite`` lets another ``layer`` replace
    finished tables; ``overrides``: the ``--set`` texts, recorded in the marker."""
    check_outputs(cfg, out, layer, overwrite)
    return run_experiment(Scaling(layer=layer), cfg, out, workers, scheduler, progress, overrides)


# ----- the points' numbers -------------------------------------------------------------------------------
def scale_of(cfg: CompareConfig) -> dict[str, Any]:
    """A point's scale: training images, resolution, steps, batch and the pixels the encoder saw (the x axis)."""
    store, train = cfg.stores["train"], cfg.train
    n, px, steps, batch = store_size(store), image_size(store), train["steps"], train["batch_size"]
    return {"images": n, "resolution": px, "steps": steps, "batch_size": batch, "seeds": len(cfg.seeds),
            "pixels_seen": steps * batch * px * px, "label": f"{n / 1024:g}k img / {px} px / {steps} steps"}


def cell_scores(report: dict[str, Any], cell: Path, layer: str = "output") -> dict[str, Any]:
    """Per-latent linear R^2, their mean, MCC and (NN rows) the mean logged snap distance of one compare cell (its
    report, and its folder for the training log)."""
    from ident3d.training.trainer import read_metrics

    rep = report["layers"][layer]
    r2 = rep["r2_linear"]
    snaps = [r["views/snap_distance"] for r in read_metrics(cell) if "views/snap_distance" in r]
    defined = [v for v in r2.values() if v == v]  # a latent constant in the test rows has no R^2 (NaN): left out
    return {"r2": r2, "mean": statistics.fmean(defined) if defined else float("nan"),
            "mcc": rep.get("mcc_pearson_out_of_sample"),  # None unless the codes are as wide as the latents
            "snap": statistics.fmean(snaps) if snaps else None}


def _ms(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {statistics.pstdev(values):.2f}"


def paper001_table(cfg: CompareConfig, reports: dict[tuple[str, int], dict[str, Any]], out: Path,
                   layer: str = "output") -> tuple[str, dict[str, Any]]:
    """Paper 001's 3DIdent table of one point (its compare config ``cfg``, the engine's cell ``reports`` and its
    output ``out``, where the cells' training logs are): markdown and numbers, the config's rows only."""
    rows = {}
    for row in cfg.rows:
        cells = [cell_scores(reports[(row.name, s)], cell_dir(out, row.name, s), layer)
                 for s in cfg.seeds if (row.name, s) in reports]
        if cells:
            rows[slug(row.name)] = cells
    if not rows:
        raise UserError(f"{out} has no finished cells to tabulate")
    names = list(next(iter(rows.values()))[0]["r2"])
    ceiling = next((k for k in rows if k.startswith("supervised")), None)
    top = statistics.fmean(c["mean"] for c in rows[ceiling]) if ceiling else None
    head = ["row", "seeds", *names, "mean R^2", "MCC", "x ceiling", "snap distance"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    summary = {}
    for name, cells in rows.items():
        mean = [c["mean"] for c in cells]
        snaps = [c["snap"] for c in cells if c["snap"] is not None]
        summary[name] = {"n_seeds": len(cells), "mean_r2": statistics.fmean(mean),
                         "mcc": statistics.fmean(mccs) if (mccs := [c["mcc"] for c in cells
                                                                    if c["mcc"] is not None]) else None,
                         "r2": {k: statistics.fmean(c["r2"][k] for c in cells) for k in names},
                         "fraction_of_ceiling": statistics.fmean(mean) / top if top else None,
                         "snap_distance": statistics.fmean(snaps) if snaps else None}
        lines.append("| " + " | ".join([name, str(len(cells)), *(_ms([c["r2"][k] for c in cells]) for k in names),
                                        _ms(mean), _ms(mccs) if mccs else "-",
                                        f"{summary[name]['fraction_of_ceiling']:.2f}" if top else "-",
                                        f"{statistics.fmean(snaps):.3f}" if snaps else "-"]) + " |")
    note = (f"\n\nlinear R^2 per latent on held-out images (mean ± std over seeds); MCC: out-of-sample Pearson "
            f"(cl-ica's, for codes as wide as the latents; '-' otherwise); "
            f"x ceiling: the row's mean R^2 over the supervised ceiling's; snap distance: mean L2 distance in latent "
            f"space between the drawn z~ and the stored latents it was snapped to (NN positives only; exact "
            f"positives have none). The paper's figure (quoted, 250k images at 224 px, ResNet-18, 30k steps): mean "
            f"linear R^2 about {PAPER001_MEAN_R2}.")
    return "\n".join(lines) + note, summary


def paper001_points(points: list[tuple[dict[str, Any], Path, dict, dict]], layer: str = "output") -> dict[str, Any]:
    """Per point, each row's mean linear R^2, per-latent R^2, MCC, fraction of the ceiling and snap distance (and
    the point's paper-001 table as markdown)."""
    out = []
    for point, where, reports, _ in points:
        md, rows = paper001_table(point.compare, reports, where, layer)
        out.append({"name": point.name, "config": shown(point.config), "run": shown(where),
                    "scale": scale_of(point.compare), "rows": rows, "markdown": md})
    return {"points": out}


def paper000_points(points: list[tuple[dict[str, Any], Path, dict, dict]]) -> dict[str, Any]:
    """Per point, the three rows' and the ceiling's column means (the point's table as the engine made it) and the
    paper's values."""
    out, paper = [], {}
    for point, where, _, table in points:
        cfg = point.compare
        latents = without_metrics(cfg, table)  # the paper's columns (a config's metrics add others it has no value for)
        columns = columns_of(latents)
        rows = {name: {c: latents[name][c][0] for c in columns}
                for name in (*PAPER000_ROWS, CEILING_NAME) if name in latents}
        paper.update({r.name: dict(zip(columns, r.paper, strict=True))
                      for r in cfg.rows if r.name in PAPER000_ROWS and r.paper})
        out.append({"name": point.name, "config": shown(point.config), "run": shown(where),
                    "scale": scale_of(cfg), "columns": columns, "rows": rows})
    return {"points": out, "paper": paper}


def figure(p001: dict[str, Any] | None, p000: dict[str, Any] | None, path: Path) -> None:
    """Scores and fractions of the ceiling against pixels seen (log axis), one panel per row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    panels = (1 if p001 else 0) + (len(PAPER000_ROWS) + 1 if p000 else 0)
    fig, axes = plt.subplots(2, panels, figsize=(3.6 * panels, 6.4), squeeze=False)
    k = 0
    if p001:
        xs = [p["scale"]["pixels_seen"] for p in p001["points"]]
        ax, fx = axes[0][k], axes[1][k]
        for row in p001["points"][-1]["rows"]:
            ys = [p["rows"].get(row, {}).get("mean_r2", math.nan) for p in p001["points"]]
            ax.plot(xs, ys, "o-", label=row[:38])
            fr = [p["rows"].get(row, {}).get("fraction_of_ceiling") or math.nan for p in p001["points"]]
            if not row.startswith("supervised"):
                fx.plot(xs, fr, "o-", label=row[:38])
        ax.axhline(PAPER001_MEAN_R2, ls="--", c="k", lw=0.8, label="paper 001 (250k, 224 px)")
        ax.set_title("paper 001, 3DIdent: mean linear R^2", fontsize=9)
        fx.set_title("paper 001: fraction of the ceiling", fontsize=9)
        ax.legend(fontsize=6)
        k += 1
    if p000:
        xs = [p["scale"]["pixels_seen"] for p in p000["points"]]
        cols = p000["points"][-1]["columns"]
        for row in (CEILING_NAME, *PAPER000_ROWS):
            ax, fx = axes[0][k], axes[1][k]
            for col in cols:
                ys = [p["rows"].get(row, {}).get(col, math.nan) for p in p000["points"]]
                line, = ax.plot(xs, ys, "o-", label=col, lw=1)
                if row in p000["paper"]:
                    ax.plot([xs[-1] * 1.6], [p000["paper"][row][col]], "_", c=line.get_color(), ms=12, mew=2)
                    top = [p["rows"].get(CEILING_NAME, {}).get(col, math.nan) for p in p000["points"]]
                    fx.plot(xs, [y / t if t > 0 else math.nan for y, t in zip(ys, top, strict=True)], "o-", lw=1,
                            c=line.get_color())
            ax.set_title(f"paper 000: {row}" + (" (dash: paper)" if row in p000["paper"] else ""), fontsize=8)
            fx.set_title(f"{row}: fraction of the ceiling" if row in p000["paper"] else "", fontsize=8)
            if row == CEILING_NAME:
                ax.legend(fontsize=6)
                fx.axis("off")
            k += 1
    spans = [p["scale"]["pixels_seen"] for part in (p001, p000) if part for p in part["points"]]
    for ax in axes.flat:
        if ax.axison:
            ax.set_xlim(min(spans) / 1.5, max(spans) * 2.5)  # fixed, so a panel whose scores are all NaN still draws
            ax.set_xscale("log")
            ax.set_xlabel("pixels seen (steps x batch x px^2)", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_ylim(-0.1, 1.1) if ax in axes[0] else ax.set_ylim(-0.1, 1.3)
    fig.tight_layout()
    write_atomic(path, lambda p: fig.savefig(p, dpi=120, format="png"))
    plt.close(fig)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scaling", help="run a scaling experiment: several compare grids (its points) and the curves over them",
        description="Run (or resume) every point of a scaling config (each a compare config: its stores, cells and "
                    "tables in its own folder), on one cell engine, then write the curves of each paper fact over "
                    "the points (curves.json, curves.png) and, for paper 001, its 3DIdent table per point.",
        epilog="example:\n  ident3d scaling --config configs/scaling/paper001.yaml --out results/scaling/paper001",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="a scaling config (configs/scaling/paper000.yaml, paper001.yaml); "
                   "its points' paths are relative to its folder")
    p.add_argument("--out", required=True, help="folder for the curves, the tables and the points without an out")
    add_grid_flags(p)  # its --overwrite also replaces the curves of another --layer
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    overrides = tuple(args.set)
    cfg = load_config(args.config, overrides)
    out = Path(args.out)
    curves = run_scaling(cfg, out, args.workers, args.scheduler, args.layer, progress=not args.no_progress,
                         overwrite=args.overwrite, overrides=overrides)
    facts = (curves.get("paper001") or curves.get("paper000") or {}).get("facts", [])
    for f in facts:
        col = f" / {f['column']}" if "column" in f else ""
        print(f"{f['row']}{col}: ours {f['ours']:.2f}, paper {f['paper']:.2f}, {f['verdict'] or '-'}")
    print(f"curves: {out / 'curves.json'}, {out / 'curves.png'}; tables: {out / 'tables'}")
    return 0
