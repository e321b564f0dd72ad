"""``ident3d synthetic``: the numerical identifiability experiments of papers 000, 001 and 003 as configs: every
(row, seed) cell is one trainer run on a synthetic source, scored on held-out draws; cells are keyed by their
settings (``ident3d.pipelines.cells``) and resume after a kill or Ctrl-C; the table (mean +- std over seeds, next to
what the paper predicts) is written as markdown, CSV and JSON with figures."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

from ident3d.causal.errors import MissingData, UserError
from ident3d.pipelines.cells import (
    SCORING_KEY,
    Cell,
    claim_cell,
    matches,
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
    slug,
    write_tables,
)
from ident3d.pipelines.files import check_output_dir, read_yaml_config, write_atomic
from ident3d.pipelines.overrides import add_set_flag
from ident3d.pipelines.results_table import ResultsTable, Stat, plain_format, tabulate, write_csv
from ident3d.pipelines.results_table import markdown as results_markdown
from ident3d.training.config import SYNTHETIC_CELL_FILLS, TrainConfig
from ident3d.training.hparams import ConfigError, PartialOf, parse_config

KIND = "synthetic"
RENAMED = {"n_fit": "fit", "n_score": "score"}  # the evaluate keys before every kind shared compare's
EXPECT_OPS = {"min": lambda v, t: v >= t, "max": lambda v, t: v <= t}
MIN_CHECKPOINTS = 10  # a cell checkpoints at least this often, so a killed cell loses at most a tenth of its steps
# a synthetic train section: TrainConfig's settings but those a cell fills in (its source, seed, device, ...)
TrainSection = Annotated[dict[str, Any], PartialOf(TrainConfig, SYNTHETIC_CELL_FILLS)]


@dataclass(frozen=True)
class Evaluate:
    """Held-out draws to fit and score the probes on, and whether a kernel ridge probe is fitted beside."""

    fit: EvalRows = 10000
    score: EvalRows = 10000
    kernel: bool = False


@dataclass(frozen=True)
class Expect:
    """What the paper predicts of a metric's mean over seeds: at least ``min`` and/or at most ``max``."""

    min: float | None = None
    max: float | None = None

    def __post_init__(self) -> None:
        if self.min is None and self.max is None:
            raise ConfigError("", "must be {min: X} or {max: X} with a number X")

    def rules(self) -> dict[str, float]:
        """{op: threshold} of the bounds given."""
        return {op: t for op, t in (("min", self.min), ("max", self.max)) if t is not None}


@dataclass(frozen=True)
class SyntheticRow:
    """One row: its synthetic source (``ident3d.training.synthetic``), the objective's hp, training settings over
    the config's, what the paper predicts (``expect``) and a note for the table."""

    name: Text
    source: dict[str, Any]
    hp: dict[str, Any] | None = None
    train: TrainSection | None = None
    expect: dict[str, Expect] | None = None
    note: str = ""


@dataclass(frozen=True)
class SyntheticConfig:
    """A synthetic config: its rows (sources and objectives), seeds, train section, evaluation and metrics."""

    name: Text | int
    rows: tuple[SyntheticRow, ...]
    kind: str | None = None
    description: Text | int | None = None
    paper: Text | int | None = None
    train: TrainSection | None = None
    evaluate: Evaluate = Evaluate()
    metrics: tuple[str, ...] | None = None
    seeds: Seeds = (0,)

    def __post_init__(self) -> None:
        """The rules across fields (each problem one line at its key path)."""
        check_grid([row.name for row in self.rows], self.seeds, self.metrics, "{name, source, hp, ...}")


def load_config(path: str | Path, overrides: Sequence[str] = (),
                missing: list[str] | None = None) -> SyntheticConfig:
    """Read and check a synthetic config (with ``--set`` ``overrides``); every row's source, encoder and objective are
    built once (on no data)."""
    return check_config(read_yaml_config(path, "configs/synthetic/", overrides), str(path), missing)


def check_config(raw: Any, where: str, missing: list[str] | None = None) -> SyntheticConfig:
    """Parse the whole config into its types (``ident3d.training.hparams.parse``: one line naming the file and the
    key path), then build every row's trainer config once (source, encoder, objective and their values). A row whose
    source's data are not on this machine is refused too, or, given a ``missing`` list (a dry run), noted there (its
    source cannot be built without them)."""
    head = f"config {where}"
    check_kind(raw, KIND, where)
    evaluate = raw.get("evaluate") if isinstance(raw, dict) else None
    if isinstance(evaluate, dict) and (old := sorted(set(evaluate) & set(RENAMED))):
        raise UserError(f"{head}: evaluate.{old[0]} is now evaluate.{RENAMED[old[0]]}, the name every experiment "
                        "kind uses; rename it")
    cfg = parse_config(SyntheticConfig, raw, head)
    for i, row in enumerate(cfg.rows):
        where_row = f"{head}: rows[{i}] ({row.name})"
        try:
            check_cell(train_config(cfg, row, seed=0, steps=None, device="cpu"))
        except MissingData as exc:
            if missing is None:
                raise UserError(f"{where_row}: {exc}") from None
            missing.append(f"{where_row}: {exc}")
        except UserError as exc:
            raise UserError(f"{where_row}: {exc}") from None
    return cfg


def keyed_eval(cfg: SyntheticConfig) -> dict[str, Any]:
    """The evaluation settings as cells record them in their key (the names they had when the first cells were
    keyed: a renamed config key must not make every finished cell stale)."""
    return {"n_fit": cfg.evaluate.fit, "n_score": cfg.evaluate.score, "kernel": cfg.evaluate.kernel}


def train_config(cfg: SyntheticConfig, row: SyntheticRow, seed: int, steps: int | None, device: str) -> TrainConfig:
    """The TrainConfig of one cell: the config's train section with the row's on top, the row's source and hp
    (``ident3d.training.synthetic.run.train_config``; torch is imported on first use)."""
    from ident3d.training.synthetic.run import train_config as cell_train_config

    return cell_train_config({**(cfg.train or {}), **(row.train or {})}, row.source, row.hp or {}, seed, steps,
                             device)


def check_cell(tc: Any) -> None:
    """Build the cell's source, encoder and objective once on the CPU (a tiny batch), to fail before training."""
    from ident3d.training.parts import check_numbers
    from ident3d.training.synthetic.run import build_synthetic_run

    check_numbers(tc, flag=lambda key: f"train.{key}")
    small = replace(tc, batch_size=2, device="cpu")
    build_synthetic_run(small, device="cpu")


def cell_settings_of(cfg: SyntheticConfig) -> dict[str, dict[str, Any]]:
    """Every cell as ``"ROW/seed_S"`` -> the settings it is keyed by (at the config's steps)."""
    return {f"{row.name}/seed_{s}": cell_settings(cfg, row, s, None) for row in cfg.rows for s in cfg.seeds}


def cell_settings(cfg: SyntheticConfig, row: SyntheticRow, seed: int, steps: int | None) -> dict[str, Any]:
    """Everything that shapes a cell's scores, resolved (``ident3d.pipelines.cells``): its trainer config and
    evaluation."""
    settings = {"train": run_settings(train_config(cfg, row, seed, steps, "cpu")), "evaluate": keyed_eval(cfg)}
    return {**settings, "metrics": list(cfg.metrics)} if cfg.metrics else settings


def run_cell(cfg: SyntheticConfig, row: SyntheticRow, seed: int, cell: Path, steps: int | None,
             device: str, progress: bool = False) -> dict[str, Any]:
    """Train (or resume) one cell and score it; the scores are saved as scores.json, which marks it done. The
    folder is the cell's only for its settings (``ident3d.pipelines.cells.claim_cell``: one made with others is moved
    aside). A cell whose loss diverges is reported as {"diverged": why} (not saved: a re-run retries it) and the
    other cells go on; Ctrl-C checkpoints the step it stopped at (``ident3d.training.trainer.TrainingInterrupted``)."""
    from ident3d.evaluation.synthetic import evaluate_synthetic
    from ident3d.training.run_dir import RunDir
    from ident3d.training.trainer import TrainingDiverged, read_metrics, train

    tc = train_config(cfg, row, seed, steps, device)
    settings = cell_settings(cfg, row, seed, steps)
    claim_cell(cell, settings)
    done, scoring = cell / "scores.json", scoring_key(settings)
    finished = read_marker(done)  # a torn marker is not done
    if scored(finished, scoring):
        return finished  # else (another scoring key) the trained run is scored again: resuming it runs no step
    tc.checkpoint_every = min(tc.checkpoint_every, max(1, tc.steps // MIN_CHECKPOINTS))
    run_dir = RunDir(cell)
    resume = run_dir.start(tc, resume=run_dir.config_path.exists())  # the saved run must be this cell's
    try:
        train(tc, cell, resume=resume, progress=progress, say=(lambda text: print(text, flush=True)) if progress
              else None)
    except TrainingDiverged as exc:
        return {"diverged": str(exc).split(";")[0]}
    ev = cfg.evaluate
    scores = evaluate_synthetic(cell, n_fit=ev.fit, n_score=ev.score, kernel=ev.kernel, device=device,
                                metrics=cfg.metrics or ())
    rows = read_metrics(cell)
    scores["train_seconds"] = rows[-1].get("seconds", float("nan")) if rows else float("nan")  # all runs of the cell
    scores["final_loss"] = float(rows[-1].get("loss", float("nan"))) if rows else float("nan")
    scores[SCORING_KEY] = scoring
    write_marker(done, scores)
    return scores


def table_metrics(results: dict[tuple[str, int], dict[str, float]], metrics: list[str] | None = None) -> list[str]:
    """The table's columns: the headline metrics every cell has, then per-group ones, the config's ``metrics``
    (``NAME/COLUMN``), then training time."""
    from ident3d.evaluation.metric_suite import columns

    scored = [set(r) for r in results.values() if "diverged" not in r]
    keys = set.intersection(*scored) if scored else set()
    head = [k for k in ("linear_r2", "mcc", "mcc_content", "kernel_r2") if k in keys]
    groups = sorted(k for k in keys if k.startswith(("linear_r2/", "kernel_r2/")))
    extra = sorted(k for k in keys if k.startswith(("spectrum", "top_corr")))
    return head + groups + extra + [c for c in columns(metrics or []) if c in keys] + ["train_seconds"]


def aggregate(cfg: SyntheticConfig, results: dict[tuple[str, int], dict[str, Any]]) -> ResultsTable:
    """The experiment's results table (``ident3d.pipelines.results_table``), each row with what the paper predicts
    (``expect``, ``note``) and whether the mean over its finished seeds met it (``met``; None: nothing to judge)."""
    scores = {key: r for key, r in results.items() if "diverged" not in r}
    diverged = {key: r["diverged"] for key, r in results.items() if "diverged" in r}
    table = tabulate(str(cfg.name), [row.name for row in cfg.rows], list(cfg.seeds), scores,
                     table_metrics(results, list(cfg.metrics or ())), diverged)
    for row in cfg.rows:
        if row.name not in table.rows:
            continue
        cells = [scores[(row.name, s)] for s in table.seeds if (row.name, s) in scores]
        expect = {metric: rule.rules() for metric, rule in (row.expect or {}).items()}
        met = None
        if expect and cells and all(m in r for m in expect for r in cells):  # not scored: no verdict
            mean = {m: Stat.of([r[m] for r in cells]).mean for m in expect}
            met = all(EXPECT_OPS[op](mean[m], t) for m, rule in expect.items() for op, t in rule.items())
        table.extras[row.name] = {"expect": expect, "met": met, "note": row.note}
    return table


def score_format(column: str, s: Stat) -> str:
    """Synthetic's numbers: 3 decimals and the spread over seeds; training time in whole seconds."""
    if column == "train_seconds" and s.n and math.isfinite(s.mean):
        return f"{s.mean:.0f}"
    return plain_format(3)(column, s)


def _expect_text(expect: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{m} {'>=' if op == 'min' else '<='} {t:g}"
                     for m, rule in expect.items() for op, t in rule.items())


def markdown(table: ResultsTable) -> str:
    """The table as markdown, with the paper's prediction per row and whether it was met."""
    def predicts(row: str) -> str:
        extras = table.extras[row]
        return _expect_text(extras["expect"]) or extras["note"] or "-"

    def met(row: str) -> str:
        return {True: "yes", False: "**no**", None: "-"}[table.extras[row]["met"]]

    return results_markdown(table, score_format, extra=[("paper predicts", predicts), ("met", met)]) + "\n"


def plan(cfg: SyntheticConfig, out: Path) -> list[tuple[str, int, Path]]:
    """Every cell of a checked config as (row, seed, folder): what --dry-run lists."""
    return [(row.name, s, cell_dir(out, row.name, s)) for row in cfg.rows for s in cfg.seeds]


def scatter_figure(cell: Path, path: Path, title: str, n: int = 2000) -> None:
    """True latents vs their linear read-out from the representation (held-out draw), up to 4 latents."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.linear_model import LinearRegression

    from ident3d.evaluation.synthetic import encode_source

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

    from ident3d.evaluation.spectrum import std_spectrum
    from ident3d.evaluation.synthetic import encode_source

    h, _, _ = encode_source(cell, n, 3)
    stds, _ = std_spectrum(h)
    fig, ax = plt.subplots(figsize=(4, 2.8))
    ax.bar(range(1, len(stds) + 1), stds)
    ax.set(yscale="log", xlabel="output dimension (sorted)", ylabel="std", title=title)
    ax.title.set_fontsize(9)
    fig.tight_layout()
    write_atomic(path, lambda p: fig.savefig(p, dpi=90, format="png"))
    plt.close(fig)


@dataclass
class Synthetic(ExperimentKind):
    """The synthetic experiment kind: one cell per (row, seed), a trainer run on the row's synthetic source scored
    on held-out draws; the table holds mean +- std over seeds next to what the paper predicts, with figures."""

    name = "synthetic"
    outputs = frozenset({"cells", "figures", "table.md", "table.csv", "table.json", "synthetic.json"})
    steps: int | None = None  # training steps per cell (None: the config's)
    device: str = "cpu"
    rows: list[str] | None = None  # run only these rows (names or slugs); others join the table if already done
    figures: bool = True

    def wanted(self, cfg: SyntheticConfig) -> list[SyntheticRow]:
        """The config's rows to run: all, or those named by ``rows``."""
        if not self.rows:
            return list(cfg.rows)
        wanted = [r for r in cfg.rows if r.name in self.rows or slug(r.name) in self.rows]
        if len(wanted) != len(self.rows):
            raise UserError(f"--rows: no row named {sorted(set(self.rows) - {r.name for r in wanted})[0]!r}; "
                            f"rows: {', '.join(slug(r.name) for r in cfg.rows)}")
        return wanted

    def cells(self, cfg: SyntheticConfig, out: Path, workers: int, scheduler: str | None,
              progress: bool) -> list[Cell]:
        return [Cell((row.name, s), run_cell, (cfg, row, s, cell_dir(out, row.name, s), self.steps, self.device))
                for row in self.wanted(cfg) for s in cfg.seeds]

    def tabulate(self, cfg: SyntheticConfig, results: dict[tuple[str, int], dict[str, Any]],
                 diverged: dict[tuple[str, int], str], out: Path) -> dict[str, Any]:
        results = {**results, **{key: {"diverged": why} for key, why in diverged.items()}}
        for row in cfg.rows:  # cells finished earlier with these settings (other --rows runs) join the table
            for s in cfg.seeds:
                cell = cell_dir(out, row.name, s)
                scores, settings = read_marker(cell / "scores.json"), cell_settings(cfg, row, s, self.steps)
                if (row.name, s) not in results and scored(scores, scoring_key(settings)) and matches(
                        cell, settings):
                    results[(row.name, s)] = scores
        table = aggregate(cfg, results)
        write_tables(out, {"table.json": json.dumps(table.as_json(), indent=1) + "\n",
                           "table.md": f"# {cfg.name}\n\n{cfg.description or ''}\n\n" + markdown(table),
                           "table.csv": lambda p: write_csv(table, p, extra=("met",))})
        if self.figures:
            from ident3d.training.run_dir import CHECKPOINT

            (out / "figures").mkdir(exist_ok=True)
            s0 = table.seeds[0]
            for row in (r for r in self.wanted(cfg) if "diverged" not in results[(r.name, s0)]):
                cell, name = cell_dir(out, row.name, s0), slug(row.name)
                if not (cell / CHECKPOINT).exists():  # e.g. results kept without their weights
                    print(f"figures: {row.name} kept as it was ({cell} has no {CHECKPOINT} to draw from)")
                    continue
                scatter_figure(cell, out / "figures" / f"{name}.png", f"{row.name} (seed {s0})")
                if "top_corr" in results[(row.name, s0)]:
                    spectrum_figure(cell, out / "figures" / f"{name}_spectrum.png", f"{row.name} (seed {s0})")
        return {**table.as_json(), "markdown": markdown(table)}


def run_synthetic(cfg: SyntheticConfig, out: Path, seeds: list[int] | None = None, steps: int | None = None,
                  device: str = "auto", rows: list[str] | None = None, progress: bool = True,
                  figures: bool = True, workers: int = 1, scheduler: str | None = None,
                  overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Run (or resume) every (row, seed) cell of ``cfg`` under ``out`` and write the table and figures there:
    one after another, or on ``workers`` local single-thread processes or an existing cluster (``scheduler``).
    Ctrl-C stops with a KeyboardInterrupt whose message says where it stopped and how to resume. ``overrides``: the
    ``--set`` texts the config was read with, recorded in the output's marker."""
    from ident3d.training.trainer import pick_device

    if seeds is not None:
        cfg = replace(cfg, seeds=tuple(seeds))
    kind = Synthetic(steps=steps, device=pick_device(device).type, rows=rows, figures=figures)
    kind.wanted(cfg)  # an unknown --rows name is refused before the folder is touched
    return run_experiment(kind, cfg, out, workers, scheduler, progress, overrides)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "synthetic", help="run a synthetic identifiability experiment (papers 000/001/003) from a config",
        description="Train and score every (row, seed) cell of a synthetic experiment: latents with known ground "
                    "truth, mixed by a random invertible map, learned back by a self-supervised objective. "
                    "Each cell is kept with the settings that made it: a re-run reuses finished cells, resumes "
                    "interrupted ones (after a kill or Ctrl-C) and runs a cell again (the old one moved aside) when "
                    "a setting changed. The table (markdown, CSV, JSON) and figures go to --out.",
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
    p.add_argument("--workers", type=int, default=1, help="cells trained in parallel on a local Dask cluster of this "
                                                          "many single-thread processes (default 1: in this process)")
    p.add_argument("--scheduler", metavar="ADDR", help="run the cells on an existing Dask cluster")
    p.add_argument("--no-figures", action="store_true", help="skip the scatter figures")
    p.add_argument("--no-progress", action="store_true", help="no per-cell lines and training progress bars")
    add_set_flag(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    overrides = tuple(args.set)
    cfg = load_config(args.config, overrides=overrides)
    if args.steps is not None and args.steps < 1:
        raise UserError(f"--steps must be a whole number >= 1, got {args.steps}")
    if args.seeds is not None and any(s < 0 for s in args.seeds):
        raise UserError(f"--seeds must be whole numbers >= 0, got {args.seeds}")
    out = check_output_dir(args.out or Path("runs") / "synthetic" / slug(str(cfg.name)))
    table = run_synthetic(cfg, out, seeds=args.seeds, steps=args.steps, device=args.device, rows=args.rows,
                          figures=not args.no_figures, progress=not args.no_progress, workers=args.workers,
                          scheduler=args.scheduler, overrides=overrides)
    print(table["markdown"], end="")
    print(f"table: {out / 'table.md'} (and .csv, .json)" + ("" if args.no_figures else
                                                            f"; figures: {out / 'figures'}"))
    return 0
