"""A run directory (``config.json`` + checkpoint): the one place that creates, resumes (with the compatibility
check) and loads a run, for ``ident3d train``, every grid cell and every evaluator; and the typed data a run
trains on (a store or a synthetic source), so nothing else tests ``TrainConfig.data`` against a sentinel."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ident3d.causal.errors import UserError
from ident3d.training.config import ADDED_LATER, SYNTHETIC, TrainConfig

CHECKPOINT = "checkpoint.pt"
# settings a resumed run may change (they do not change what it learns up to the saved step)
RESUMABLE_CHANGES = frozenset({"steps", "log_every", "checkpoint_every", "tensorboard", "device"})


# ----- what a run trains on --------------------------------------------------------------------------
@dataclass(frozen=True)
class StoreData:
    """A run on a Zarr store: its path (absolute, or a URL), the split and whether unfinished chunks may be used."""

    path: str
    split: str | None = None
    allow_partial: bool = False
    kind: str = field(default="store", init=False)


@dataclass(frozen=True)
class SyntheticData:
    """A run on a synthetic source (``ident3d.training.synthetic``): latents drawn and mixed on the training device."""

    source: dict[str, Any]
    kind: str = field(default="synthetic", init=False)


DataSpec = StoreData | SyntheticData


def data_spec(cfg: TrainConfig) -> DataSpec:
    """The typed data of a config; ``config.json`` keeps ``data`` as a string (a store path or ``synthetic``) so
    every run saved so far reads, and this is the one place that string is interpreted."""
    if cfg.data == SYNTHETIC:
        return SyntheticData(dict(cfg.source))
    return StoreData(cfg.data, cfg.split, cfg.allow_partial)


def store_path(data: str) -> str:
    """A local store as a resolved absolute path (URLs as given), so a run names its store the same way from any
    working directory."""
    return data if "://" in data or data == SYNTHETIC else str(Path(data).expanduser().resolve())


def same_store(saved: str, now: str) -> bool:
    """Whether a saved run's store and the given one are the same: equal resolved paths, or (a moved or copied
    store, or a run saved with a relative path elsewhere) two stores with identical attributes."""
    if store_path(saved) == store_path(now):
        return True
    from ident3d.store.attrs import read_attrs
    from ident3d.store.zarr_io import open_store

    try:
        return read_attrs(open_store(saved), saved) == read_attrs(open_store(now), now)
    except UserError:
        return False


def normalizer(cfg: TrainConfig) -> Any:
    """The ``ident3d.training.views.Normalize`` of a config's saved statistics: the one place they become a
    transform."""
    from ident3d.training.views import Normalize

    return Normalize(tuple(cfg.normalize["mean"]), tuple(cfg.normalize["std"]))


# ----- files -----------------------------------------------------------------------------------------
def write_config(run_dir: Path, cfg: TrainConfig) -> None:
    """config.json, written atomically (a temp file renamed into place)."""
    tmp = run_dir / ".config.json.tmp"
    tmp.write_text(json.dumps(asdict(cfg), indent=2) + "\n")
    os.replace(tmp, run_dir / "config.json")


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint; a damaged file is a one-line user error."""
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - any unpickling/zip error means the file is unusable
        raise UserError(f"checkpoint {path} is unreadable ({type(exc).__name__}); delete it to start over, "
                        "or restore it from a backup") from None


# ----- the run directory -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RunDir:
    """A run's folder. ``start`` decides (before anything is written) whether a training command makes a new run
    or resumes the saved one, ``load`` gives a finished or checkpointed run to evaluators."""

    path: Path

    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    @property
    def checkpoint_path(self) -> Path:
        return self.path / CHECKPOINT

    def saved(self, resume: bool, overwrite: bool) -> dict[str, Any] | None:
        """The saved config.json of a run to resume (None for a new run); refuses ``resume`` with nothing to
        resume and an existing run without ``resume`` or ``overwrite``. Writes nothing."""
        if overwrite or not self.config_path.exists():
            if resume and not overwrite:
                raise UserError(f"nothing to resume at {self.path} (no config.json); drop --resume to start it")
            return None
        if not resume:
            raise UserError(f"{self.path} already holds a run; pass --resume to continue it or --overwrite to "
                            "replace it")
        return self._read_config()

    def check_resume(self, cfg: TrainConfig, saved: dict[str, Any]) -> None:
        """A resumed run must be the saved one: only RESUMABLE_CHANGES may differ; the store is compared by
        identity (resolved path or attributes), not as typed. Takes over the saved store path and normalisation."""
        from ident3d.training.objectives import OBJECTIVES

        saved_args = saved.get("objective_args") or {}
        data_args = {k: saved_args[k] for k in OBJECTIVES.get(cfg.objective).data_args  # filled in from the data
                     if k in saved_args and k not in cfg.objective_args}
        cfg.objective_args = {**data_args, **cfg.objective_args}
        now = asdict(cfg)
        skip = RESUMABLE_CHANGES | {"normalize", "data"}
        diff = [k for k in now if k not in skip and saved.get(k, ADDED_LATER.get(k)) != now[k]]
        if "data" in saved and not same_store(saved["data"], cfg.data):
            diff.insert(0, "data")
        if diff:
            raise UserError(f"cannot resume {self.path}: {', '.join(diff)} differ from the saved run; "
                            "use another --out")
        cfg.data = saved.get("data", cfg.data)
        cfg.normalize = saved.get("normalize") or {}

    def start(self, cfg: TrainConfig, resume: bool, overwrite: bool = False) -> bool:
        """Check ``cfg`` against the folder and say whether training resumes from a checkpoint: a new run, or the
        saved one continued (after ``check_resume``). Grid cells call it with ``resume=True`` whenever the folder
        holds a run, so a cell resumes only a run made with its own settings."""
        saved = self.saved(resume, overwrite)
        if saved is None:
            return False
        self.check_resume(cfg, saved)
        return self.checkpoint_path.exists()

    def load(self) -> LoadedRun:
        """The saved config and checkpoint, for evaluation; one line if either is missing or unreadable."""
        if not self.config_path.is_file():
            raise UserError(f"{self.path} is not a run directory (no config.json); make one with `ident3d train`")
        if not self.checkpoint_path.is_file():
            raise UserError(f"{self.path} has no {CHECKPOINT} yet; train it (or let it reach its first checkpoint) "
                            "first")
        return LoadedRun(self.path, TrainConfig(**self._read_config()), load_checkpoint(self.checkpoint_path))

    def _read_config(self) -> dict[str, Any]:
        try:
            return json.loads(self.config_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"{self.config_path} is unreadable ({type(exc).__name__}); use --overwrite to start "
                            "over") from None


@dataclass(frozen=True)
class LoadedRun:
    """A run read back: its config, its checkpoint's state, and the typed data it was trained on."""

    path: Path
    cfg: TrainConfig
    state: dict[str, Any]

    @property
    def data(self) -> DataSpec:
        return data_spec(self.cfg)

    def normalize(self) -> Any:
        """The input normalisation the run was trained with (the train store's statistics)."""
        return normalizer(self.cfg)

    def objective(self, device: str = "cpu", image_size: int | None = None, in_dim: int | None = None) -> Any:
        """The run's objective (encoder and whatever the method adds) with its trained weights, in eval mode:
        built for ``image_size`` px images, or for ``in_dim``-d vectors (a synthetic run)."""
        from ident3d.training.parts import check_components

        if in_dim is not None:
            _, objective = check_components(self.cfg, image_size=0, input_kind="vector", in_dim=in_dim)
        else:
            _, objective = check_components(self.cfg, image_size=image_size)
        objective.load_state_dict(self.state["model"])
        return objective.to(device).eval()
