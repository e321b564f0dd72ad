"""A trainer run on a synthetic source: the same ``ident3d.training.trainer`` loop, objectives and checkpoints as the
image runs, with batches generated on the training device and a view maker that hands over the source's views."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import fields
from typing import Any

import torch

from ident3d.causal.errors import UserError
from ident3d.training.objectives import OBJECTIVES
from ident3d.training.parts import Run, check_components, with_data_args
from ident3d.training.synthetic.base import VectorSource
from ident3d.training.synthetic.sources import make_source
from ident3d.training.views.labels import labels_of


class VectorViews:
    """The views of a synthetic batch as the objective sees them: [x0, x1, ...] (already on the device)."""

    requires: tuple[str, ...] = ()

    def __init__(self, n_views: int):
        self.n_views = n_views
        self.last_params: dict[str, torch.Tensor] = {}

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        return [batch[f"x{i}"] for i in range(self.n_views)]


class VectorLabels(VectorViews):
    """The supervised ceiling's views of a synthetic batch: [x0, latents, classes (zeros)]."""

    def __init__(self) -> None:
        super().__init__(1)

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        return [batch["x0"], *labels_of(batch)]


def source_of(cfg: Any, device: torch.device | str = "cpu", batch_size: int | None = None) -> VectorSource:
    """The run's source, rebuilt from its config (evaluation rebuilds it the same way to draw held-out data)."""
    if not cfg.source:
        raise UserError("a synthetic run needs a source, e.g. {kind: latent_pairs, space: box, conditional: normal}")
    return make_source(cfg.source, batch_size or cfg.batch_size, cfg.seed, device)


def batches(source: VectorSource, start: int, rank: int = 0, world: int = 1) -> Iterator[dict[str, torch.Tensor]]:
    """Batch b, b + 1, ... of the source; under DDP rank r takes slice r of each global batch."""
    b = start
    while True:
        batch = source.batch(b)
        if world > 1:
            n = source.batch_size // world
            batch = {k: v[rank * n:(rank + 1) * n] for k, v in batch.items()}
        yield batch
        b += 1


def train_config(train: Mapping[str, Any], source: Mapping[str, Any], hp: Mapping[str, Any], seed: int,
                 steps: int | None, device: str) -> Any:
    """The TrainConfig of one cell of a synthetic experiment: its training settings (a config's train section with a
    row's on top), the row's source and hp (what ``ident3d synthetic`` trains, and what
    benchmarks/synthetic_step.py times)."""
    from ident3d.training.config import SYNTHETIC, SYNTHETIC_CELL_FILLS, TrainConfig

    settings = dict(train)
    allowed = {f.name for f in fields(TrainConfig)} - SYNTHETIC_CELL_FILLS
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise UserError(f"train has no setting {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    if steps is not None:
        settings["steps"] = steps
    return TrainConfig(data=SYNTHETIC, views="synthetic", source=dict(source), objective_args=dict(hp), seed=seed,
                       device=device, **settings)


def build_synthetic_run(cfg: Any, start_batch: int = 0, rank: int = 0, world: int = 1,
                        device: torch.device | str = "cpu") -> Run:
    """Source, views, encoder (input size = the source's) and objective of a synthetic run, validated."""
    source = source_of(cfg, device)
    if cfg.n_views not in (2, source.n_views):  # 2: the default, whatever the source makes
        raise UserError(f"n_views {cfg.n_views}: the synthetic source {cfg.source['kind']} makes {source.n_views} "
                        "views per anchor; its own settings (e.g. set_size) decide the count")
    if cfg.batch_size % world:
        raise UserError(f"--batch-size {cfg.batch_size} must be divisible by the {world} processes")
    objective_cls = OBJECTIVES.get(cfg.objective)
    if hasattr(objective_cls, "store_args"):  # the supervised ceiling: latents' statistics from the source
        cfg.objective_args = with_data_args(cfg, objective_cls.store_args(
            source.batch(0)["latents"].cpu().numpy(), 0), f"the synthetic source {cfg.source['kind']}")
    _, objective = check_components(cfg, image_size=0, input_kind="vector", in_dim=source.obs_dim)
    if getattr(objective_cls, "view_maker", None) == "labels":
        return Run(info=source, views=VectorLabels(), objective=objective,
                   loader=batches(source, start_batch, rank, world))
    need = type(objective).n_views
    if need != source.n_views and not getattr(type(objective), "any_views", False):
        raise UserError(f"objective {cfg.objective} needs {need} views; the source {cfg.source['kind']} makes "
                        f"{source.n_views}")
    return Run(info=source, views=VectorViews(source.n_views), objective=objective,
               loader=batches(source, start_batch, rank, world))
