"""What defines a training run (``TrainConfig``, saved as the run's ``config.json``) and the fields added after
runs were first saved; plain data, below the trainer, the run directory and every grid."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from ident3d.training.hparams import Count, NonNegative, Positive, Range

SEED_MAX = 2**63 - 1  # torch.manual_seed's largest seed (it refuses 2**64 and above, wraps the signed range)
SCHEDULES = ("constant", "cosine", "step")  # the learning rate after warm-up (ident3d.training.schedule)
AtLeast2 = Annotated[int, Range(ge=2)]
Whole = Annotated[int, Range(ge=0)]
# TrainConfig fields a synthetic cell fills in itself: not settings of a synthetic config's train section
SYNTHETIC_CELL_FILLS = frozenset({"data", "source", "seed", "objective_args", "normalize", "device", "views"})
SYNTHETIC = "synthetic"  # TrainConfig.data of a run on a synthetic source (TrainConfig.source); read by data_spec


@dataclass
class TrainConfig:
    """Everything that defines a run; saved as ``config.json`` in the run directory. The annotations declare each
    setting's values (``ident3d.training.hparams``): what an experiment config's train section is held to."""

    data: str
    objective: str = "infonce"
    views: str = "crop_large+colour"
    n_views: AtLeast2 = 2  # views per anchor (J): DA view makers make any J >= 2 for objectives with ``any_views``
    encoder: str = "resnet18"
    out_dim: Count = 10
    constraint: str = "none"
    steps: Count = 1000
    batch_size: AtLeast2 = 256
    lr: Positive = 1e-4
    seed: Annotated[int, Range(ge=0, le=SEED_MAX)] = 0
    device: str = "auto"
    amp: bool = True
    grad_clip: NonNegative = 0.0  # 0: off
    split: str | None = None
    allow_partial: bool = False
    num_workers: Whole = 0
    log_every: Count = 10
    checkpoint_every: Count = 100
    tensorboard: bool = False
    objective_args: dict[str, Any] = field(default_factory=dict)
    encoder_args: dict[str, Any] = field(default_factory=dict)
    normalize: dict[str, list[float]] = field(default_factory=dict)  # filled from the store
    schedule: Literal[SCHEDULES] = "constant"  # lr after warm-up: constant, cosine (to 0 at the last step) or step
    warmup_steps: Whole = 0  # linear warm-up from lr / warmup_steps to lr
    source: dict[str, Any] = field(default_factory=dict)  # data == "synthetic": the source spec (training.synthetic)


# TrainConfig fields added after runs and grid cells were first saved, with the value a saved config without one
# had: a resumed run compares against it, and a cell's key leaves the field out while it has it (old cells stay valid)
ADDED_LATER: dict[str, Any] = {"n_views": 2}
