"""``ident3d compare``: paper 000's grid of view makers x seeds: render the train/test stores, train
and evaluate every cell (resumable; in parallel on a Dask cluster when given one), and write one
table in the paper's layout (mean +- std over seeds) as markdown, CSV, a heatmap and a
side-by-side with the paper's numbers. Each cell is kept with the settings that made it
(``ident3d.pipelines.cells``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.evaluation.ceiling import CEILING_NAME, MATCH, ceiling_fractions, chance_levels, fraction_markdown, verdict
from ident3d.pipelines.cells import (
    SCORING_KEY,
    Cell,
    claim_cell,
    read_marker,
    run_settings,
    scored,
    scoring_key,
    write_marker,
)
from ident3d.pipelines.experiment import (
    EvalRows,
    ExperimentKind,
    Seeds,
    Text,
    cell_dir,
    check_grid,
    check_kind,
    run_experiment,
    write_tables,
)
from ident3d.pipelines.files import check_output_dir, read_yaml_config
from ident3d.pipelines.overrides import add_set_flag
from ident3d.pipelines.results_table import Format, ResultsTable, Stat, heatmap, plain_format, tabulate, write_csv
from ident3d.pipelines.results_table import markdown as results_markdown
from ident3d.pipelines.store_specs import Store, check_dataset_rows
from ident3d.training.config import TrainConfig
from ident3d.training.hparams import ConfigError, PartialOf, parse_config

# the table's columns are the evaluation report's (from the test store's latent groups); the paper's
# Causal3DIdent layout is evaluation.report.PAPER_COLUMNS
KIND = "compare"
# a train section: TrainConfig's settings (those a grid does not fill in itself) and the objective's hp; a row's
# own train section overrides it key by key (its hp replaces the section's)
TrainSection = Annotated[dict[str, Any], PartialOf(TrainConfig, frozenset(
    {"data", "views", "seed", "objective_args", "normalize"}), (("hp", dict[str, Any]),))]


@dataclass(frozen=True)
class Evaluate:
    """Test-store rows to fit and score the probes on, and whether a kernel ridge probe is fitted beside."""

    fit: EvalRows = 10240
    score: EvalRows = 20480
    kernel: bool = True


@dataclass(frozen=True)
class Row:
    """One row of the grid: its view maker (``ident3d train --views``), paper 000's numbers for it, and training
    settings of its own over the config's."""

    name: Text
    views: str
    paper: tuple[float, ...] | None = None
    train: TrainSection = field(default_factory=dict)


# the row `ceiling: true` (the default) adds: the same encoder, data and budget trained on the labels
CEILING_ROW = Row(name=CEILING_NAME, views="labels", train={"objective": "supervised", "hp": {}})


@dataclass(frozen=True)
class CompareConfig:
    """A compare config: the stores (train, test and further test stores), the train section, the rows (view
    makers) and seeds, the evaluation and metrics, and the table's options (``docs/experiments.md``)."""

    stores: dict[str, Store]
    train: TrainSection
    rows: tuple[Row, ...]
    kind: str | None = None
    name: Text | None = None
    scene: Text | None = None
    seeds: Seeds = (0,)
    evaluate: Evaluate = Evaluate()
    metrics: tuple[str, ...] | None = None
    da_style: Any = None
    ceiling: bool = True
    latent_columns: bool = True

    def __post_init__(self) -> None:
        """The rules across fields (each problem one line at its key path)."""
        check_grid([row.name for row in self.rows], self.seeds, self.metrics, "{name, views, paper}")
        for key in ("train", "test"):
            if key not in self.stores:
                raise ConfigError(f"stores.{key}", "is missing; give n, resolution and samples (or a dataset: "
                                                   "{dataset: mnist5k, split: train})")
        for key, spec in self.stores.items():
            if not key.isidentifier():
                raise ConfigError("stores", f"key {key!r} must be a plain name (letters, digits, _), e.g. ood")
            check_dataset_rows(spec, key)
        if extra_test_stores(self) and not self.metrics:
            raise ConfigError(f"stores.{extra_test_stores(self)[0]}", "is scored by the config's metrics; add "
                                                                      "metrics: [...] or drop the store")
        if not self.latent_columns and not self.metrics:
            raise ConfigError("latent_columns", "false leaves the table only the metrics' columns; name some under "
                                                "metrics (e.g. metrics: [probe])")
        from ident3d.evaluation.report import check_da_style

        check_da_style(self.da_style, "da_style")  # names are checked against the SCM once rendered


def load_config(path: str | Path, overrides: Sequence[str] = (), missing: list[str] | None = None) -> CompareConfig:
    """Read and check a compare config (with ``--set`` ``overrides``); every row's view maker is validated before
    anything runs (``missing``: unused, a compare config's data are its stores)."""
    return check_config(read_yaml_config(path, "configs/da_vs_lt_small.yaml", overrides), str(path))


def stored_views(views: str | Mapping[str, Any] | None) -> set[str]:
    """The names of the views a store spec renders: the keys of its mapping form, or each ``NAME[@KNOB=VALUE...]
    [:CHANGESET]`` item of its text (``ident3d render --views``)."""
    if isinstance(views, Mapping):
        return set(views)
    return {item.split(":")[0].split("@")[0].strip() for item in str(views or "").split(",") if item.strip()}


def check_config(raw: Any, where: str) -> CompareConfig:
    """Parse the whole config into its types (``ident3d.training.hparams.parse``: one line naming the file and the
    key path), then check what needs the registries and the renderer before anything renders or trains: each row's
    view maker and the stored views it reads, each train section's encoder and objective, and the stores."""
    from ident3d.training.views import Normalize, make_view_maker

    check_kind(raw, KIND, where)
    cfg = parse_config(CompareConfig, raw, f"config {where}")
    if cfg.ceiling and ceiling_name(cfg) is None:
        cfg = replace(cfg, rows=(*cfg.rows, CEILING_ROW))
    stored = stored_views(getattr(cfg.stores["train"], "views", None))
    for i, row in enumerate(cfg.rows):
        try:
            maker = make_view_maker(row.views, Normalize((0.0,) * 3, (1.0,) * 3))
        except UserError as exc:
            raise UserError(f"config {where}: rows[{i}].views ({row.name}): {exc}") from None
        for view in (k.split("/")[1] for k in maker.requires if k.startswith("views/")):
            if view not in stored:
                raise UserError(f"config {where}: rows[{i}].views ({row.name}) needs the stored view {view!r}; add "
                                "it to stores.train.views")
    check_train(cfg, where)
    plan_stores(cfg, f"config {where}")
    return cfg


def plan(cfg: CompareConfig, out: Path) -> list[tuple[str, int, Path]]:
    """Every cell of a checked config as (row, seed, folder), the ceiling row included: what --dry-run lists."""
    return [(row.name, s, cell_dir(out, row.name, s)) for row in cfg.rows for s in cfg.seeds]


def cell_settings_of(cfg: CompareConfig) -> dict[str, dict[str, Any]]:
    """Every cell as ``"ROW/seed_S"`` -> the settings it is keyed by (``cell_settings``; the stores planned once):
    what ``Compare.cells`` claims and the goldens record."""
    digests = plan_stores(cfg)
    return {f"{row.name}/seed_{s}": cell_settings(cfg, row, s, digests) for row in cfg.rows for s in cfg.seeds}


def store_keys(cfg: CompareConfig) -> list[str]:
    """The config's stores: train, test, then any further test stores (e.g. ``ood``: a compositional split's unseen
    combinations), each cell scored on every test store."""
    return ["train", "test", *(k for k in cfg.stores if k not in ("train", "test"))]


def extra_test_stores(cfg: CompareConfig) -> list[str]:
    """The further test stores (beyond ``test``): their metrics' columns are prefixed ``KEY:``."""
    return store_keys(cfg)[2:]


def ceiling_name(cfg: CompareConfig) -> str | None:
    """The name of the row trained with the supervised objective (the ceiling), if the grid has one."""
    return next((row.name for row in cfg.rows if row_train(cfg, row).get("objective") == "supervised"), None)


def row_train(cfg: CompareConfig, row: Row) -> dict[str, Any]:
    """A row's training settings: the config's train section with the row's own ``train`` on top (e.g. another
    objective and encoder for a generative row; a row's ``hp`` replaces the section's)."""
    return {**cfg.train, **row.train}


def check_train(cfg: CompareConfig, where: str) -> None:
    """Build each distinct train section the rows see (rows may override it) once, before rendering: its encoder
    and objective (names, hp keys and values), each row's view count against the objective, the batch vs store
    size; rendering the stores takes minutes, a typo here should not wait for it."""
    from ident3d.pipelines.store_specs import image_size, store_size
    from ident3d.training.objectives import OBJECTIVES
    from ident3d.training.parts import check_components, check_numbers

    seen = set()
    for i, row in enumerate(cfg.rows):
        train = row_train(cfg, row)
        if (key := json.dumps(train, sort_keys=True, default=str)) in seen:
            continue
        seen.add(key)
        head = f"config {where}: " + (f"rows[{i}].train ({row.name})" if row.train else "train")
        tc = cell_config(cfg, row, seed=0)
        check_numbers(tc, flag=lambda k, head=head: f"{head}.{k}")
        try:
            # the model's parameters here; a step's memory where the cell trains (a farm's worker, a GPU), at its start
            check_components(tc, image_size=image_size(cfg.stores["train"]), steps_memory=False)
        except UserError as exc:
            raise UserError(f"{head}: {exc}") from None
        n = store_size(cfg.stores["train"])
        if tc.batch_size > n:
            raise UserError(f"{head}.batch_size: {tc.batch_size} is larger than the {n} images of stores.train; "
                            "lower the batch or render more")
        objective = OBJECTIVES.get(tc.objective)
        if objective.n_views != 2 and objective.view_maker is None:  # every image view maker makes two views
            raise UserError(f"{head}: objective {tc.objective} needs {objective.n_views} views; the rows' view "
                            "makers make 2")


def plan_stores(cfg: CompareConfig, head: str = "config") -> dict[str, str]:
    """Check every store (rendered ones with the renderer) before any is made, and that each store gives what the
    rows' view makers (train store) and the metrics (test stores) declare they need (nothing is written; ``head``
    starts an error's line); returns each store's fingerprint digest (what a cell's key records of its data)."""
    from ident3d.evaluation.metric_suite import METRICS
    from ident3d.pipelines.store_specs import DATA_WORDS, plan_store
    from ident3d.training.views import Normalize, make_view_maker

    planned = {key: plan_store(cfg.stores[key], key, cfg.scene, head) for key in store_keys(cfg)}
    blank = Normalize((0.0,) * 3, (1.0,) * 3)
    needs = [(f"row {row.name!r} (views {row.views})", ["train"], make_view_maker(row.views, blank).data_needs,
              "the row's views") for row in cfg.rows]
    needs += [(f"metric {name}", store_keys(cfg)[1:], METRICS.get(name).data_needs, "the metric")
              for name in cfg.metrics or ()]
    for who, keys, wants, other in needs:
        for key in keys:
            if missing := sorted(wants - planned[key].provides):
                raise UserError(f"{head}: {who} needs {DATA_WORDS[missing[0]]}, which stores.{key} is not; "
                                f"change stores.{key} or {other}")
    return {key: p.digest for key, p in planned.items()}


def cell_config(cfg: CompareConfig, row: Row, seed: int, train_store: str = "-") -> TrainConfig:
    """The TrainConfig of one (view maker, seed) cell."""
    return train_config(row_train(cfg, row), row.views, seed, train_store)


def train_config(train: dict[str, Any], views: str, seed: int, train_store: str = "-") -> TrainConfig:
    """The TrainConfig of a train section (its ``hp`` the objective's arguments) for ``views`` and ``seed``."""
    args = {k: v for k, v in train.items() if k != "hp"}
    return TrainConfig(data=train_store, views=views, seed=seed, objective_args=dict(train.get("hp") or {}), **args)


def cell_settings(cfg: CompareConfig, row: Row, seed: int, stores: dict[str, str]) -> dict[str, Any]:
    """Everything that shapes a cell's report, resolved (``ident3d.pipelines.cells``): its trainer config, the stores'
    fingerprints (not their paths: a moved output keeps its cells), the evaluation and the DA style map."""
    settings = {"train": run_settings(cell_config(cfg, row, seed), drop=("data", "normalize")), "stores": stores,
                "evaluate": asdict(cfg.evaluate), "da_style": cfg.da_style}
    return {**settings, "metrics": list(cfg.metrics)} if cfg.metrics else settings


def run_cell(train_store: str, test_store: str, cell_dir: str, train: dict[str, Any], settings: dict[str, Any],
             also: dict[str, str] | None = None, progress: bool = False) -> dict[str, Any]:
    """Train one (view maker, seed) cell and evaluate it, from ``settings``, the cell's settings that its folder was
    claimed for (``cell_settings``; ``ident3d.pipelines.cells.claim_cell``) and its scoring key is made of, and
    ``train``, its train section (which also holds how the run is carried out: device, log and checkpoint intervals;
    its trainer config must resolve to ``settings["train"]``). Skipped when its report exists with the scoring key,
    scored again from the trained run (not trained again) when the report's key is another. A cell whose loss
    diverges gives {"diverged": why} and saves no report, so a re-run retries it. ``also``: further test stores
    ({key: path}) whose metrics the report keeps under ``also``."""
    from ident3d.evaluation.run_report import evaluate_run
    from ident3d.training.run_dir import RunDir
    from ident3d.training.trainer import TrainingDiverged
    from ident3d.training.trainer import train as fit

    cell, scoring = Path(cell_dir), scoring_key(settings)
    report_path = cell / "report.json"
    done = read_marker(report_path)  # a torn report (a kill mid-write, before reports were atomic) is not done
    if scored(done, scoring):
        return done
    keyed = settings["train"]
    cfg = train_config(train, keyed["views"], keyed["seed"], train_store)
    if run_settings(replace(cfg), drop=("data", "normalize")) != keyed:
        raise RuntimeError(f"cell {cell}: its train section does not resolve to the settings it is keyed by")
    cell.mkdir(parents=True, exist_ok=True)
    run_dir = RunDir(cell)
    resume = run_dir.start(cfg, resume=run_dir.config_path.exists())  # the saved run must be this cell's
    try:
        fit(cfg, cell, resume=resume, progress=progress,  # a finished run resumes at its last step: no step is run
            say=(lambda text: print(text, flush=True)) if progress else None)
    except TrainingDiverged as exc:  # the one divergence policy (as in synthetic): report the cell, go on
        return {"diverged": str(exc).split(";")[0]}
    ev, da_style, metrics = settings["evaluate"], settings["da_style"], tuple(settings.get("metrics") or ())
    rep = evaluate_run(str(cell), test_store, ev["fit"], ev["score"], kernel=ev["kernel"], da_style=da_style,
                       metrics=metrics)
    if also:
        rep["also"] = {key: evaluate_run(str(cell), path, ev["fit"], ev["score"], kernel=ev["kernel"],
                                         da_style=da_style, metrics=metrics).get("metrics", {})
                       for key, path in also.items()}
    rep[SCORING_KEY] = scoring
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
    """The report's metrics as table cells (they score the output layer; none for the inner one), then those of each
    further test store as ``KEY:NAME/COLUMN``."""
    from ident3d.evaluation.metric_suite import table_values

    if layer != "output":
        return {}
    also = {f"{key}:{col}": v for key, scores in (report.get("also") or {}).items()
            for col, v in table_values(scores).items()}
    return {**table_values(report.get("metrics") or {}), **also}


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


def aggregate(cfg: CompareConfig, reports: dict[tuple[str, int], dict[str, Any]], layer: str,
              diverged: dict[tuple[str, int], str] | None = None) -> ResultsTable:
    """The grid's results table (``ident3d.pipelines.results_table``): rows in the config's order, the reports'
    columns (with ``latent_columns: false`` the metrics' only: a dataset store's labels are no latents to score)."""
    cols = table_columns(reports, layer)
    if not cfg.latent_columns:
        cols = [c for c in cols if c in metric_columns(cfg)]
    return tabulate(cfg.name or "compare", [row.name for row in cfg.rows], list(cfg.seeds),
                    {key: cell_values(rep, layer) for key, rep in reports.items()}, cols, diverged)


def metric_columns(cfg: CompareConfig) -> frozenset[str]:
    """The table columns the config's ``metrics`` add (``NAME/COLUMN``, and ``KEY:NAME/COLUMN`` for each further test
    store): not R^2s, and not paper 000's."""
    from ident3d.evaluation.metric_suite import columns

    cols = columns(list(cfg.metrics or ()))
    return frozenset([*cols, *(f"{key}:{c}" for key in extra_test_stores(cfg) for c in cols)])


def without_metrics(cfg: CompareConfig, table: dict[str, Any]) -> dict[str, Any]:
    """The aggregated table with the latents' columns only (the ceiling's fractions and the paper's side-by-side)."""
    extra = metric_columns(cfg)
    return {name: {c: v for c, v in row.items() if c not in extra} for name, row in table.items()}


def columns_of(table: dict[str, Any]) -> list[str]:
    """The column titles of an aggregated table (every row has the same, in order)."""
    if not table:
        raise UserError("the table has no rows")
    return list(next(iter(table.values())))


def r2_format(plain: frozenset[str] = frozenset()) -> Format:
    """Compare's numbers: an R^2 or accuracy column with 2 decimals, bold at >= 0.5 and arrowed below 0.25, as the
    paper colours them; a metric's column (in ``plain``) with 3 decimals, unmarked (an MSE or entropy is no R^2);
    the spread only over two or more seeds."""
    two, three = plain_format(2), plain_format(3)

    def fmt(column: str, s: Stat) -> str:
        if column in plain:
            return three(column, s)
        text = two(column, s)
        if text == "-":
            return text
        return f"**{text}**" if s.mean >= 0.5 else (f"{text} ↓" if s.mean < 0.25 else text)
    return fmt


def markdown_table(table: ResultsTable, plain: frozenset[str] = frozenset()) -> str:
    """The grid's table as markdown (``plain``: a metric's columns, printed without the R^2 marks)."""
    marked = [c for c in table.columns if c not in plain]
    marks = "" if not marked else "bold: R^2 >= 0.5; ↓: R^2 < 0.25 (red in the paper" + (
        "; metric columns NAME/COLUMN unmarked)" if plain & set(table.columns) else ")")
    return results_markdown(table, r2_format(plain), first="views generated by", note=marks)


def side_by_side(cfg: CompareConfig, table: dict[str, Any]) -> str:
    """Our means next to paper 000's (a row's ``paper`` list), only when the columns are the paper's."""
    from ident3d.evaluation.report import PAPER_COLUMNS, is_paper_layout

    cols = columns_of(table)
    if not is_paper_layout(cols):
        return (f"No side-by-side with paper 000: its table has the Causal3DIdent columns "
                f"({', '.join(PAPER_COLUMNS)}); this grid's test store gives {', '.join(cols)}.")
    head = "| views generated by | " + " | ".join(cols) + " |"
    lines = [head, "|---" * (len(cols) + 1) + "|"]
    top = table.get(ceiling_name(cfg) or "")
    for row in cfg.rows:
        if row.name not in table:
            continue
        ours = table[row.name]
        if ours is top:
            lines.append(f"| {row.name} | " + " | ".join(f"{ours[c][0]:.2f}" for c in cols) + " |")
            continue
        paper = row.paper or []
        paper = paper if len(paper) == len(cols) else [np.nan] * len(cols)
        lines.append(f"| {row.name} | " + " | ".join(
            f"{ours[c][0]:.2f} / {p:.2f} {verdict(ours[c][0], p, top[c][0]) if top else ''}".rstrip()
            for c, p in zip(cols, paper, strict=True)) + " |")
    note = "ours / paper 000 (means; nan: the row gives no paper values for these columns)"
    if top is not None:
        note += (f"; =: within {MATCH} of the paper, +: above it; below it, *bounded*: the paper's value is above "
                 f"what the supervised ceiling reached here (the data's scale allows no more), *open*: the ceiling "
                 "allows it, so the gap is the method's (a defect or a real effect)")
    return "\n".join(lines) + "\n\n" + note


def _check_da_style_names(cfg: CompareConfig, test_store: str) -> None:
    """Fail before any training when the config's ``da_style`` names latents the store's SCM lacks."""
    from ident3d.evaluation.report import check_da_style_names
    from ident3d.store.info import store_info

    if cfg.da_style:
        check_da_style_names(cfg.da_style, store_info(test_store, allow_partial=True).scm, "config da_style")


@dataclass
class Compare(ExperimentKind):
    """The compare kind (paper 000's grid): the config's train and test stores are rendered once, then one cell per
    (view maker, seed) is trained on the train store and evaluated on the test store; one table in the paper's
    layout with the fraction of the supervised ceiling and a side-by-side with the paper."""

    name = "compare"
    outputs = frozenset({"stores", "cells", "table.md", "table.csv", "table.png", "vs_paper.md", "table.json",
                         "compare.json"})
    layer: str = "output"

    def cells(self, cfg: CompareConfig, out: Path, workers: int, scheduler: str | None,
              progress: bool) -> list[Cell]:
        where = out.expanduser().resolve()  # what cells record: config.json names its store by an absolute path
        stores = {k: where / "stores" / f"{k}.zarr" for k in store_keys(cfg)}
        from ident3d.pipelines.store_specs import make_store

        specs = cell_settings_of(cfg)  # every store checked before any is made
        for key, path in stores.items():
            make_store(cfg.stores[key], key, cfg.scene, path, scheduler, progress)
        _check_da_style_names(cfg, str(stores["test"]))
        cells = []
        for row in cfg.rows:
            for s in cfg.seeds:
                cell = cell_dir(where, row.name, s)
                before = cell.parent / f"seed{s}"  # the cell's folder before every kind's were seed_N: kept
                if before.is_dir() and not cell.exists():
                    before.rename(cell)
                settings = specs[f"{row.name}/seed_{s}"]
                claim_cell(cell, settings)
                cells.append(Cell((row.name, s), run_cell, (
                    str(stores["train"]), str(stores["test"]), str(cell), row_train(cfg, row), settings,
                    {k: str(stores[k]) for k in extra_test_stores(cfg)})))
        return cells

    def tabulate(self, cfg: CompareConfig, reports: dict[tuple[str, int], dict[str, Any]],
                 diverged: dict[tuple[str, int], str], out: Path) -> dict[str, Any]:
        layer = self.layer
        if not reports:
            raise UserError("every cell diverged (" + "; ".join(f"{n} seed {s}: {why}"
                                                               for (n, s), why in diverged.items())
                            + "); lower train.lr and run the command again")
        table = aggregate(cfg, reports, layer, diverged)
        means = table.means()
        md = f"# {cfg.name or 'compare'} ({layer} layer)\n\n" + markdown_table(table, metric_columns(cfg))
        summary: dict[str, Any] = {"layer": layer}
        latents = without_metrics(cfg, means)
        top = ceiling_name(cfg)
        if top in means and len(means) > 1:
            from ident3d.store.info import store_info

            summary["ceiling"] = top
            classes = store_info(str(out / "stores" / "test.zarr"), allow_partial=True).class_names or []
            summary["fraction_of_ceiling"] = ceiling_fractions(latents, top, chance_levels(columns_of(latents),
                                                                                           len(classes)))
            md += "\n\n## Fraction of the supervised ceiling\n\n" + fraction_markdown(
                summary["fraction_of_ceiling"], latents[top])
        files = write_tables(out, {"table.md": md + "\n", "vs_paper.md": side_by_side(cfg, latents) + "\n",
                                   "table.json": json.dumps(table.as_json(**summary), indent=2) + "\n",
                                   "table.csv": lambda p: write_csv(table, p)})
        files["table.png"] = out / "table.png"
        heatmap(table, files["table.png"], f"{cfg.name or 'compare'}: {layer} layer, mean over seeds",
                "R^2 / accuracy")
        names = {"markdown": "table.md", "csv": "table.csv", "heatmap": "table.png", "paper": "vs_paper.md",
                 "json": "table.json"}
        return {"table": means, "markdown": md, "files": {k: str(files[v]) for k, v in names.items()}}


def run_compare(cfg: CompareConfig, out: Path, workers: int = 1, scheduler: str | None = None,
                layer: str = "output", progress: bool = False, overwrite: bool = False,
                overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The whole grid; returns {"table", "markdown", "files"}. ``progress``: say what renders and trains, with
    the render and training progress bars and the training run-time estimate. Finished tables of another ``layer``
    are replaced only with ``overwrite`` (the cells are kept either way). ``overrides``: the ``--set`` texts the
    config was read with, recorded in the output's marker."""
    check_layer(out / "table.json", layer, overwrite, "use another --out")
    return run_experiment(Compare(layer=layer), cfg, out, workers, scheduler, progress, overrides)


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
    add_set_flag(p)


def run(args: argparse.Namespace) -> int:
    overrides = tuple(args.set)
    cfg = load_config(args.config, overrides)
    check_output_dir(args.out)
    result = run_compare(cfg, Path(args.out), args.workers, args.scheduler, args.layer, progress=not args.no_progress,
                         overwrite=args.overwrite, overrides=overrides)
    print(result["markdown"])
    print("files: " + ", ".join(result["files"].values()))
    return 0
