"""What defines a training run (``TrainConfig``, saved as the run's ``config.json``) and the fields added after
runs were first saved; plain data, below the trainer, the run directory and every grid."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SYNTHETIC = "synthetic"  # TrainConfig.data of a run on a synthetic source (TrainConfig.source); read by data_spec


@dataclass
class TrainConfig:
    """Everything that defines a run; saved as ``config.json`` in the run directory."""

    data: str
    objective: str = "infonce"
    views: str = "crop_large+colour"
    n_views: int = 2  # views per anchor (J): DA view makers make any J >= 2 for objectives with ``any_views``
    encoder: str = "resnet18"
    out_dim: int = 10
    constraint: str = "none"
    steps: int = 1000
    batch_size: int = 256
    lr: float = 1e-4
    seed: int = 0
    device: str = "auto"
    amp: bool = True
    grad_clip: float = 0.0
    split: str | None = None
    allow_partial: bool = False
    num_workers: int = 0
    log_every: int = 10
    checkpoint_every: int = 100
    tensorboard: bool = False
    objective_args: dict[str, Any] = field(default_factory=dict)
    encoder_args: dict[str, Any] = field(default_factory=dict)
    normalize: dict[str, list[float]] = field(default_factory=dict)  # filled from the store
    schedule: str = "constant"  # learning rate after warm-up: constant, cosine (to 0 at the last step) or step
    warmup_steps: int = 0  # linear warm-up from lr / warmup_steps to lr
    source: dict[str, Any] = field(default_factory=dict)  # data == "synthetic": the source spec (training.synthetic)


# TrainConfig fields added after runs and grid cells were first saved, with the value a saved config without one
# had: a resumed run compares against it, and a cell's key leaves the field out while it has it (old cells stay valid)
ADDED_LATER: dict[str, Any] = {"n_views": 2}
