"""The experiment engine: every experiment kind (``compare``, ``synthetic``, ``scaling``) is a small class that says
which cells its config has and how their results become tables; the engine owns the rest, once for all kinds: the
output folder (which experiment it holds), the cells (``ident3d.pipelines.cells``: keyed by their settings, run one
after another or on a Dask cluster), what Ctrl-C says, the divergence policy, the per-row statistics over seeds and the
atomic writing of the tables.

To add a kind: subclass ``ExperimentKind`` in one module of ``pipelines/`` (its config checks, ``cells`` and
``tabulate``), and give it a subcommand that calls ``run_experiment`` (docs/extending.md)."""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar

from ident3d.causal.errors import UserError
from ident3d.pipelines.cells import Cell, run_cells, split_diverged
from ident3d.pipelines.files import check_output_dir, write_atomic
from ident3d.training.hparams import ConfigError, NonBlank, Range

MIN_EVAL_ROWS = 10  # fewer rows cannot be cross-validated (kernel ridge) or scored
# the types every kind's config shares (``ident3d.training.hparams.parse`` reads them)
Text = Annotated[str, NonBlank()]  # a name: text that is not blank
EvalRows = Annotated[int, Range(ge=MIN_EVAL_ROWS)]  # rows or draws to fit or score a probe on
Seeds = tuple[Annotated[int, Range(ge=0)], ...]


class ExperimentKind(ABC):
    """One kind of experiment: its cells and its tables (the engine, ``run_experiment``, does everything else)."""

    name: ClassVar[str]  # the subcommand, and the marker file ``NAME.json`` in its output folder
    outputs: ClassVar[frozenset[str]]  # what its output folder holds (older outputs without a marker are these)

    @abstractmethod
    def cells(self, cfg: Any, out: Path, workers: int, scheduler: str | None,
              progress: bool) -> list[Cell]:
        """Prepare what the cells share (e.g. render the stores), claim every cell's folder for its settings
        (``ident3d.pipelines.cells.claim_cell``) and return the cells to run, each a call ``fn(*args, progress)``."""

    @abstractmethod
    def tabulate(self, cfg: Any, results: dict[tuple[str, int], dict[str, Any]],
                 diverged: dict[tuple[str, int], str], out: Path) -> dict[str, Any]:
        """Write the tables of the finished cells (``diverged``: the cells left out, to be named) under ``out``."""

    def marker(self, out: Path) -> Path:
        return out / f"{self.name}.json"


def run_experiment(kind: ExperimentKind, cfg: Any, out: Path, workers: int = 1,
                   scheduler: str | None = None, progress: bool = False,
                   overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Run (or resume) every cell of ``cfg`` and write its tables under ``out``: the one path of every experiment.
    ``out`` must be new, empty, or this experiment's own output; cells run one after another (``workers`` 1), on a
    local cluster of ``workers`` single-thread processes, or on the cluster at ``scheduler``. A diverged cell is
    named in the tables and left out; Ctrl-C stops with a message that says where and how to resume."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UserError(f"--workers must be a whole number >= 1, got {workers!r}")
    check_output_dir(out)
    name = str(cfg.name or kind.name)
    claim_output(kind, out, name, overrides)
    cells = kind.cells(cfg, out, workers, scheduler, progress)
    results = run_cells(cells, workers, scheduler, serial=lambda cell, i, n: _run_or_say_where(cell, progress, i, n),
                        say=lambda text: print(text, flush=True), progress=progress)
    finished, diverged = split_diverged(results)
    return kind.tabulate(cfg, finished, diverged, out)


def claim_output(kind: ExperimentKind, out: Path, name: str, overrides: Sequence[str] = ()) -> None:
    """Make ``out`` the output of the experiment ``name`` of ``kind`` (its marker file, which records the ``--set``
    ``overrides`` of this run): a new or empty folder, or one that already holds it; another experiment's output or
    any other folder is refused, untouched."""
    check_claim(kind, out, name)
    out.mkdir(parents=True, exist_ok=True)
    marker = {"name": name, "overrides": list(overrides)}
    write_atomic(kind.marker(out), lambda p: p.write_text(json.dumps(marker) + "\n"))


def check_claim(kind: ExperimentKind, out: Path, name: str) -> None:
    """Refuse (nothing written) an ``out`` that ``claim_output`` could not claim for the experiment ``name``: so a
    kind can check every folder it will claim before it writes to any of them."""
    if out.is_dir() and any(out.iterdir()):
        held = held_experiment(kind, out)
        if held is not None and held != name:
            raise UserError(f"{out} holds the {kind.name} experiment {held!r}, not {name!r}; choose another --out")
        entries = sorted(p.name for p in out.iterdir())
        if held is None and not set(entries) <= kind.outputs:  # a torn marker: this kind's output, to claim again
            raise UserError(f"{out} is not empty and not an ident3d {kind.name} output (it holds "
                            f"{', '.join(entries[:4])}{', ...' if len(entries) > 4 else ''}); choose a new or empty "
                            "folder for --out")


def held_experiment(kind: ExperimentKind, out: Path) -> str | None:
    """The name of the experiment ``out`` holds: from its marker, or the table of an output made before markers."""
    for path in (kind.marker(out), out / "table.json"):
        try:
            name = json.loads(path.read_text()).get("name")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(name, str):
            return name
    return None


def _run_or_say_where(cell: Cell, progress: bool, i: int, n: int) -> dict[str, Any]:
    """A cell run in this process (cell i of n); Ctrl-C becomes a KeyboardInterrupt that says where it stopped
    and how to go on."""
    from ident3d.training.trainer import TrainingInterrupted  # torch: not for `ident3d KIND --help`

    where = f"cell {cell.key[0]!r} seed {cell.key[1]}"
    resume = f"{i} of {n} cells done; re-run the same command to resume"
    try:
        return cell.fn(*cell.args, progress)
    except TrainingInterrupted as stop:
        kept = f"its checkpoint of step {stop.checkpoint} is kept" if stop.checkpoint else "no checkpoint yet"
        raise KeyboardInterrupt(f"interrupted in {where} at step {stop.step}; {kept}; {resume}") from None
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"interrupted while scoring {where} (its training is kept); {resume}") from None


# ----- what every kind's config and tables share ---------------------------------------------------------
def slug(text: str) -> str:
    """A folder name for a row."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def check_grid(names: Sequence[str], seeds: Sequence[int], metrics: Sequence[str] | None, rows_are: str) -> None:
    """The rules of every kind's grid, as ``ConfigError`` at their key path: rows (``rows_are`` says what a row
    holds) with names used once, seeds, and registered metrics."""
    if not names:
        raise ConfigError("rows", f"must be a non-empty list of {rows_are}")
    if dup := next((i for i, n in enumerate(names) if n in names[:i]), None):
        raise ConfigError(f"rows[{dup}].name", f"{names[dup]!r} is used twice")
    if not seeds:
        raise ConfigError("seeds", "must be a non-empty list of whole numbers >= 0, e.g. [0, 1, 2]")
    if metrics is not None:
        from ident3d.evaluation.metric_suite import parse_metrics  # sklearn, torch: not for `ident3d KIND --help`

        if not metrics:
            raise ConfigError("metrics", "must be a list of metric names, e.g. [dci, mig], got []")
        parse_metrics(list(metrics), "metrics")


def cell_dir(out: Path, row: str, seed: int) -> Path:
    """Where the cell of (row, seed) lives, for every kind: ``OUT/cells/ROW/seed_N`` (ROW: the row's name, slugged)."""
    return out / "cells" / slug(row) / f"seed_{seed}"


def check_kind(cfg: Mapping[str, Any], kind: str, where: str) -> None:
    """A config's ``kind`` (required by ``ident3d experiment``, optional for the kind's own command) is ``kind``."""
    if isinstance(cfg, Mapping) and cfg.get("kind", kind) != kind:
        raise UserError(f"config {where}: kind is {cfg['kind']!r}, not {kind}; run it with `ident3d experiment "
                        f"{where}`")


def write_tables(out: Path, files: Mapping[str, str | Callable[[Path], object]]) -> dict[str, Path]:
    """Write each named output under ``out`` atomically (text, or a function that writes the given path); a
    reader never sees half a table."""
    written = {}
    for name, content in files.items():
        path = out / name
        write_atomic(path, (lambda p, text=content: p.write_text(text)) if isinstance(content, str) else content)
        written[name] = path
    return written
