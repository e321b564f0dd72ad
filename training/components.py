"""Assemble a run from its config: store, normalisation, view maker, encoder, objective, loader."""

from __future__ import annotations

import warnings
from typing import Any

from ident3d.causal.errors import Note, UserError
from ident3d.store.info import StoreInfo, image_stats, store_info, store_latents, store_text
from ident3d.training.data import StoreBatches, make_loader
from ident3d.training.objectives import OBJECTIVES
from ident3d.training.parts import (
    Run,
    check_components,
    check_numbers,
    check_view_batch,
    check_view_count,
    with_data_args,
)
from ident3d.training.run_dir import StoreData, SyntheticData, data_spec, normalizer
from ident3d.training.views import ViewMaker, make_view_maker


def build_views(cfg: Any, info: StoreInfo) -> ViewMaker:
    """The view maker, checked against what the store holds."""
    if not cfg.normalize:
        mean, std = image_stats(info)
        cfg.normalize = {"mean": list(mean), "std": list(std)}
    views = make_view_maker(cfg.views, normalizer(cfg), n_views=cfg.n_views)
    for key in views.requires:
        if key.startswith("views/") and key.split("/")[1] not in info.views:
            have = ", ".join(info.views) or "none"
            raise UserError(f"--views {cfg.views} needs the stored view '{key.split('/')[1]}' but {info.path} has "
                            f"{have}; render it with `ident3d render ... --views NAME:CHANGESET`")
    return views


def check_pairing(cfg: Any, objective_cls: type, views: ViewMaker) -> None:
    """Refuse an objective that needs its own view maker with another one, and the reverse (CRL-TAC's channel
    lives in the objective, so ``learned_crop`` hands over whole images that only ``crl_tac`` can use)."""
    needs = getattr(objective_cls, "view_maker", None)
    if needs is not None and getattr(views, "registry_name", None) != needs:
        raise UserError(f"objective {cfg.objective} picks its own views: use --views {needs}, not {cfg.views}")
    feeds = getattr(views, "objective", None)
    if feeds is not None and cfg.objective != feeds:
        raise UserError(f"--views {cfg.views} feeds only --objective {feeds} (the objective that picks the crops), "
                        f"not {cfg.objective}")


def build_run(cfg: Any, start_batch: int = 0, rank: int = 0, world: int = 1, device: Any = "cpu") -> Run:
    """Everything the trainer needs, validated (one-line UserErrors for bad names and inputs), built by the
    builder of the config's data kind (``ident3d.training.run_dir.data_spec``)."""
    check_numbers(cfg)
    spec = data_spec(cfg)
    return RUN_BUILDERS[spec.kind](cfg, spec, start_batch, rank, world, device)


def build_synthetic(cfg: Any, spec: SyntheticData, start_batch: int, rank: int, world: int, device: Any) -> Run:
    """A run on a synthetic source: batches generated on ``device`` (``ident3d.training.synthetic.run``)."""
    from ident3d.training.synthetic.run import build_synthetic_run

    return build_synthetic_run(cfg, start_batch, rank, world, device)


def build_store_run(cfg: Any, spec: StoreData, start_batch: int, rank: int, world: int, device: Any) -> Run:
    """A run on a Zarr store: its rows, normalisation, view maker (bound to the data) and loader."""
    objective_cls = OBJECTIVES.get(cfg.objective)
    check_view_count(cfg, objective_cls)
    info = store_info(spec.path, allow_partial=spec.allow_partial, split=spec.split)
    check_view_batch(cfg, objective_cls, info.image_size, device, world)
    views = build_views(cfg, info)
    check_pairing(cfg, objective_cls, views)
    need = cfg.n_views if objective_cls.any_views else objective_cls.n_views
    if views.n_views != need:
        raise UserError(f"objective {cfg.objective} needs {need} views, {cfg.views} makes {views.n_views}")
    if hasattr(objective_cls, "store_args"):  # what the objective takes from the data (the supervised ceiling)
        cfg.objective_args = with_data_args(cfg, objective_cls.store_args(
            store_latents(info), len(info.class_names or [])), info.path)
    if hasattr(objective_cls, "caption_args"):  # the image/text objectives: the training captions' vocabulary
        cfg.objective_args = with_data_args(cfg, objective_cls.caption_args(
            store_text(info, f"objective {cfg.objective}")), info.path)
    _, objective = check_components(cfg, info.image_size)
    note = getattr(objective_cls, "store_note", None)
    if note is not None and (text := note(info)):
        warnings.warn(Note(text), stacklevel=2)
    keys = [k for k in views.requires if k.startswith("views/")]
    if keys:
        keys += [k.replace("/images", "/latents") for k in keys]
    keys += [k for k in views.requires if k == "text"]
    dataset = StoreBatches(info, cfg.batch_size, cfg.seed, start_batch=start_batch, keys=keys, rank=rank, world=world,
                           lanes=cfg.num_workers)
    views.bind(dataset, objective, cfg.seed)  # e.g. LT-NN's partner search, CRL-TAC's draws per image
    return Run(info, views, objective, make_loader(dataset, cfg.num_workers))


# one builder per data kind (``ident3d.training.run_dir.DataSpec.kind``)
RUN_BUILDERS = {"store": build_store_run, "synthetic": build_synthetic}
