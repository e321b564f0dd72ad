"""Assemble a run from its config: store, normalisation, view maker, encoder, objective, loader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from causal.errors import UserError
from training.data import StoreBatches, StoreInfo, image_stats, make_loader, store_info
from training.encoders import Encoder, build_encoder
from training.objectives import OBJECTIVES
from training.objectives.base import Objective
from training.views import Normalize, ViewMaker, make_view_maker


@dataclass
class Run:
    """The parts the trainer drives."""

    info: StoreInfo
    views: ViewMaker
    objective: Objective
    loader: Any


def build_encoder_for(cfg: Any, info: StoreInfo) -> Encoder:
    return build_encoder(cfg.encoder, cfg.out_dim, info.image_size, cfg.constraint, **cfg.encoder_args)


def build_views(cfg: Any, info: StoreInfo) -> ViewMaker:
    """The view maker, checked against what the store holds."""
    if not cfg.normalize:
        mean, std = image_stats(info)
        cfg.normalize = {"mean": list(mean), "std": list(std)}
    views = make_view_maker(cfg.views, Normalize(tuple(cfg.normalize["mean"]), tuple(cfg.normalize["std"])))
    for key in views.requires:
        if key.startswith("views/") and key.split("/")[1] not in info.views:
            have = ", ".join(info.views) or "none"
            raise UserError(f"--views {cfg.views} needs the stored view '{key.split('/')[1]}' but {info.path} has "
                            f"{have}; render it with `ident3d render ... --views NAME:CHANGESET`")
    return views


def build_run(cfg: Any, start_batch: int = 0, rank: int = 0, world: int = 1) -> Run:
    """Everything the trainer needs, validated (one-line UserErrors for bad names and inputs)."""
    objective_cls = OBJECTIVES.get(cfg.objective)
    info = store_info(cfg.data, allow_partial=cfg.allow_partial, split=cfg.split)
    views = build_views(cfg, info)
    if views.n_views != objective_cls.n_views:
        raise UserError(f"objective {cfg.objective} needs {objective_cls.n_views} views, {cfg.views} makes "
                        f"{views.n_views}")
    encoder = build_encoder_for(cfg, info)
    if encoder.input_kind != "image":
        raise UserError(f"encoder {cfg.encoder} takes vectors, not images; use resnet18 or cnn for a store")
    try:
        objective = objective_cls(encoder, **cfg.objective_args)
    except TypeError as exc:
        raise UserError(f"objective {cfg.objective}: {exc}") from None
    keys = [k for k in views.requires if k.startswith("views/")]
    if keys:
        keys += [k.replace("/images", "/latents") for k in keys]
    dataset = StoreBatches(info, cfg.batch_size, cfg.seed, start_batch=start_batch, keys=keys, rank=rank, world=world,
                           lanes=cfg.num_workers)
    if "pair/images" in views.requires:
        from training.pairs import NearestNeighbourPairs

        dataset.pairing = NearestNeighbourPairs(dataset, views.change, cfg.seed)
    return Run(info, views, objective, make_loader(dataset, cfg.num_workers))
