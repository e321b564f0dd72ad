"""The cells of every experiment kind (``ident3d.pipelines.experiment`` runs them for compare, synthetic and scaling):
cells keyed by their settings, run one after another or on a Dask cluster, with one divergence policy.

A cell is one training run and its scores in its own folder, keyed twice: its training and its scoring apart.
``cell.json`` records a hash of the cell's resolved *training* settings (everything that shapes the trained weights:
the trainer config with defaults filled in and hyperparameters in their declared types, the training data); the done
marker (``report.json``, ``scores.json``) records the *scoring* key, a hash of what shapes the scores given the
weights (the evaluation settings, the test stores, the metrics with each one's ``version`` and the version of the
built-in scores). A cell folder is trained on, finished or to be resumed, only for the training settings that made
it; a folder made with other training settings (or before cells were keyed) is moved aside to ``NAME.stale-K``, never
deleted and never silently reused, and the cell trains again. A finished cell whose scoring key changed (another
metric, a metric's new version) is scored again from its trained weights, not trained again. Cells keyed before
the two keys were apart (one key over everything) keep their trained runs: their recorded settings give the same
training key.

Every cell trains and is scored with ``CELL_THREADS`` torch and BLAS threads, in this process or on a Dask worker
(a loaded 2-core machine ran paper 000's kernel R^2 17x slower with BLAS's default 2 threads): float sums on the CPU
depend on the thread count, so a fixed count makes a cell's weights and scores bit-identical however a grid is split,
and the count is part of the key (cells made before it was are run again once).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from ident3d.jobs.cluster import cluster_client, connect, dashboard_link
from ident3d.pipelines.files import write_atomic
from ident3d.training.config import ADDED_LATER

KEY_FILE = "cell.json"
CELL_THREADS = 1  # torch and BLAS threads of every cell wherever it runs (parallelism comes from --workers)
# trainer settings that say how a run is carried out, not what it computes: not part of a cell's key
RUN_ONLY = ("log_every", "checkpoint_every", "tensorboard", "device")


def run_settings(train_config: Any, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """A TrainConfig as the settings that shape its result: hyperparameters and encoder options checked and in
    their declared types (``tau: 1`` and ``tau: 1.0`` are one setting), without ``RUN_ONLY`` and ``drop``, and
    without a field added later while it has the value older cells had (``ident3d.training.config.ADDED_LATER``)."""
    from ident3d.training.parts import resolve_args  # torch: not for `ident3d KIND --help`

    resolve_args(train_config)
    settings = asdict(train_config)
    for key in (*RUN_ONLY, *drop):
        settings.pop(key, None)
    for key, old in ADDED_LATER.items():
        if key in settings and settings[key] == old:
            del settings[key]
    return settings


def canonical(settings: Mapping[str, Any]) -> str:
    """The settings as canonical JSON (sorted keys, no spaces): equal settings give equal text."""
    return json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)


def cell_key(settings: Mapping[str, Any]) -> str:
    """The sha256 of the canonical settings."""
    return hashlib.sha256(canonical(settings).encode()).hexdigest()


# a cell's top-level settings that shape only how its trained run is scored (with every store but ``stores.train``)
SCORING_SETTINGS = ("evaluate", "metrics", "da_style")
SCORING_KEY = "scoring_key"  # the done marker's entry that records the scoring key it was scored with


def split_settings(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(training settings, scoring settings) of a cell's full settings: ``SCORING_SETTINGS`` and the test stores
    (``stores`` other than ``train``) shape only its scores; the rest shapes its weights."""
    training = {k: v for k, v in settings.items() if k not in SCORING_SETTINGS}
    scoring = {k: settings[k] for k in SCORING_SETTINGS if k in settings}
    stores = settings.get("stores")
    if isinstance(stores, Mapping) and "train" in stores:
        training["stores"] = {"train": stores["train"]}
        scoring["stores"] = {k: v for k, v in stores.items() if k != "train"}
    return training, scoring


def scoring_key(settings: Mapping[str, Any]) -> str:
    """The scoring key of a cell's full settings: a hash of its scoring settings (``split_settings``) with the
    ``version`` of each metric named and of the built-in scores (``ident3d.evaluation.metric_base``), so a corrected
    metric re-scores finished cells."""
    # sklearn and torch: not for `ident3d synthetic --help` or `ident3d experiment --help`
    from ident3d.evaluation.metric_base import BUILTIN_SCORES_VERSION, METRICS
    from ident3d.evaluation.metric_suite import parse_metrics  # registers every metric

    scoring = split_settings(settings)[1]
    versions = [[name, METRICS.get(name).version] for name in parse_metrics(list(scoring.get("metrics") or []))]
    return cell_key({**scoring, "metrics": versions, "builtin_scores": BUILTIN_SCORES_VERSION})


def scored(marker: Mapping[str, Any] | None, key: str) -> bool:
    """Whether a done marker (a cell's report or scores) was scored with the scoring key ``key``."""
    return marker is not None and marker.get(SCORING_KEY) == key


def claim_cell(cell: Path, settings: Mapping[str, Any], say: Callable[[str], None] = print) -> Path | None:
    """Make ``cell`` the folder of ``settings`` (a cell's full settings; its training part is the key) before it is
    trained or read: kept when its recorded training key matches (a finished cell is reused or re-scored, an
    unfinished one resumed), else moved aside (``say`` tells where and which settings differ) and replaced by a
    folder set aside before with this key (a smoke run with ``--set train.steps=1`` into the same output leaves the
    real cells to come back), or started afresh. Returns where an old folder went, or None."""
    settings = keyed(split_settings(settings)[0])
    key = cell_key(settings)
    old = recorded(cell)
    if old is not None and old.get("key") == key:
        return None
    if old is not None and _legacy_key(old) == key:  # keyed over everything before training and scoring were apart
        write_marker(cell / KEY_FILE, {"key": key, "settings": json.loads(canonical(settings))})
        return None
    aside = None
    back = next((p for p in sorted(cell.parent.glob(f"{cell.name}.stale-*")) if (recorded(p) or {}).get("key") == key),
                None)
    if cell.is_dir() and any(cell.iterdir()):
        aside = _free_name(cell)
        cell.rename(aside)
        torn = (aside / KEY_FILE).exists()
        why = (changes(split_settings(old.get("settings") or {})[0], settings) if old
               else f"its {KEY_FILE} is torn" if torn else "made before cells were keyed by their settings")
        say(f"{cell}: {why}; moved it to {aside.name} and " + (f"took back {back.name}, made with these settings"
                                                             if back else "running the cell again"))
    elif cell.is_dir():
        cell.rmdir()
    if back is not None:
        back.rename(cell)
        return aside
    cell.mkdir(parents=True, exist_ok=True)
    write_marker(cell / KEY_FILE, {"key": key, "settings": json.loads(canonical(settings))})
    return aside


def _legacy_key(old: Mapping[str, Any]) -> str | None:
    """The training key of a ``cell.json`` written when one key covered training and scoring: its recorded
    settings' training part, keyed (None when it records no settings)."""
    settings = old.get("settings")
    return cell_key(keyed(split_settings(settings)[0])) if isinstance(settings, Mapping) else None


def matches(cell: Path, settings: Mapping[str, Any]) -> bool:
    """Whether ``cell`` was trained with the training part of ``settings`` (its recorded key is theirs)."""
    old = recorded(cell)
    return old is not None and old.get("key") == cell_key(keyed(split_settings(settings)[0]))


def keyed(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A cell's settings with what the engine adds to every cell: its torch thread count."""
    return {**settings, "torch_threads": CELL_THREADS}


def recorded(cell: Path) -> dict[str, Any] | None:
    """The cell's ``cell.json`` (None when missing or torn: the folder then counts as unkeyed)."""
    return read_marker(cell / KEY_FILE)


def read_marker(path: Path) -> dict[str, Any] | None:
    """A JSON marker that says something is done (a cell's ``cell.json``, ``report.json``, ``scores.json``, an
    output's ``NAME.json``): its mapping, or None when it is missing or torn (cut short by a kill before markers were
    written atomically, or garbled): a torn marker means "not done", never an error."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_marker(path: Path, data: Mapping[str, Any]) -> None:
    """Write a done marker atomically (whole or not at all: a kill leaves the previous state, never half a file)."""
    write_atomic(path, lambda p: p.write_text(json.dumps(data, indent=1, default=str) + "\n"))


def changes(old: Any, new: Mapping[str, Any], limit: int = 3) -> str:
    """'settings changed: train.steps 5 -> 10, ...' (the first ``limit`` differing keys, dotted)."""
    a, b = _flat(old if isinstance(old, Mapping) else {}), _flat(json.loads(canonical(new)))
    diff = [k for k in sorted(set(a) | set(b)) if a.get(k, "-") != b.get(k, "-")]
    text = ", ".join(f"{k} {_short(a.get(k, '-'))} -> {_short(b.get(k, '-'))}" for k in diff[:limit])
    more = f" and {len(diff) - limit} more" if len(diff) > limit else ""
    return f"settings changed: {text}{more}" if diff else "settings changed"


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _short(value: Any, width: int = 40) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= width else text[:width - 3] + "..."


def _free_name(cell: Path) -> Path:
    """``cell.stale-1``, ``cell.stale-2``, ...: the first that does not exist."""
    k = 1
    while (cell.parent / f"{cell.name}.stale-{k}").exists():
        k += 1
    return cell.parent / f"{cell.name}.stale-{k}"


# ----- running cells: one engine for every experiment kind ---------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One cell to run: its key in the table (row name, seed) and a top-level function with its arguments (plain
    data, so the call ships to a Dask worker)."""

    key: tuple[str, int]
    fn: Callable[..., dict[str, Any]]
    args: tuple[Any, ...]


def run_cells(cells: Sequence[Cell], workers: int = 1, scheduler: str | None = None,
              serial: Callable[[Cell, int, int], dict[str, Any]] | None = None,
              say: Callable[[str], None] = print, progress: bool = False) -> dict[tuple[str, int], dict[str, Any]]:
    """Every cell's result by key: one after another in this process (``serial(cell, i, n)`` wraps each call,
    e.g. to say where Ctrl-C stopped it; with ``progress`` a line says which cell runs), or in parallel on a local
    Dask cluster of ``workers`` single-thread processes or an existing cluster at ``scheduler``. A cell that
    diverges returns ``{"diverged": why}`` like any result (the caller reports it and goes on, ``split_diverged``)."""
    if not scheduler and workers <= 1:
        import torch  # not for `ident3d KIND --help`

        run = serial or (lambda cell, i, n: cell.fn(*cell.args))
        out = {}
        before = torch.get_num_threads()
        try:
            torch.set_num_threads(CELL_THREADS)
            with threadpool_limits(CELL_THREADS):  # BLAS too (scoring's kernel ridge), as on a Dask worker
                for i, cell in enumerate(cells):
                    if progress:
                        say(f"cell {i + 1}/{len(cells)}: {cell.key[0]}, seed {cell.key[1]}")
                    out[cell.key] = run(cell, i, len(cells))
        finally:
            torch.set_num_threads(before)
        return out
    remote = connect(scheduler) if scheduler else None
    try:
        with cluster_client(remote, workers) as (client, _):
            say(f"Dask dashboard: {dashboard_link(client)}")
            futures = {cell.key: client.submit(_cell_threads, cell.fn, *cell.args, pure=False) for cell in cells}
            return {key: fut.result() for key, fut in futures.items()}
    finally:
        if remote is not None:
            remote.close()


def _cell_threads(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Run a cell on a Dask worker with ``CELL_THREADS`` torch and BLAS threads (set, not inherited)."""
    import torch  # not for `ident3d KIND --help`

    torch.set_num_threads(CELL_THREADS)
    with threadpool_limits(CELL_THREADS):
        return fn(*args)


def split_diverged(results: Mapping[tuple[str, int], dict[str, Any]]
                   ) -> tuple[dict[tuple[str, int], dict[str, Any]], dict[tuple[str, int], str]]:
    """(finished cells, diverged cells -> why): the one divergence policy is to leave a diverged cell out of the
    table, name it, and go on (it saved no result, so running the command again retries it)."""
    diverged = {key: res["diverged"] for key, res in results.items() if "diverged" in res}
    return {key: res for key, res in results.items() if key not in diverged}, diverged
