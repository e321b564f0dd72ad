"""Assemble a run from its config: store, normalisation, view maker, encoder, objective, loader."""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any

from causal.errors import UserError
from training.data import StoreBatches, StoreInfo, image_stats, make_loader, store_info, store_latents
from training.encoders import Encoder, build_encoder
from training.objectives import OBJECTIVES
from training.objectives.base import Objective
from training.registry import FIXED_ARGS
from training.views import Normalize, ViewMaker, make_view_maker
from training.views.base import DEFAULT_VIEWS


@dataclass
class Run:
    """The parts the trainer drives."""

    info: StoreInfo
    views: ViewMaker
    objective: Objective
    loader: Any


SYNTHETIC = "synthetic"  # TrainConfig.data of runs on a synthetic source (TrainConfig.source) instead of a store

# arguments the trainer passes itself: not settable through --hp / --encoder-arg
_FIXED_ARGS = {"self", *FIXED_ARGS}


def keyword_names(cls: Any, fixed: frozenset[str] | set[str] = _FIXED_ARGS) -> list[str] | None:
    """The keyword arguments ``cls(...)`` (a class or a function) accepts besides the ``fixed`` ones the caller
    fills in; None if it takes **kwargs."""
    params = inspect.signature(cls if inspect.isfunction(cls) else cls.__init__).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.name not in fixed
            and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]


def check_keywords(kind: str, name: str, cls: Any, given: dict[str, Any], flag: str,
                   fixed: frozenset[str] | set[str] = _FIXED_ARGS) -> None:
    """Refuse keys ``cls`` does not take, in our words (not Python's "unexpected keyword argument"),
    listing the ones it does take."""
    allowed = keyword_names(cls, fixed)
    if allowed is None:
        return
    unknown = [k for k in given if k not in allowed]
    if unknown:
        takes = ", ".join(allowed) or "none"
        raise UserError(f"{kind} {name} has no {flag} {unknown[0]!r}; it takes: {takes}")


def check_numbers(cfg: Any, flag: Any = lambda key: "--" + key.replace("_", "-")) -> None:
    """Refuse numeric settings that would crash or silently misbehave later (NaN/inf/negative learning rate,
    zero steps, a zero checkpoint or log interval, ...); ``flag(key)`` names the setting in the message."""
    def bad(key: str, want: str, example: str) -> UserError:
        value = getattr(cfg, key)
        return UserError(f"{flag(key)} must be {want}, got {value!r}; e.g. {flag(key)} {example}")

    if not _finite(cfg.lr) or cfg.lr <= 0:
        raise bad("lr", "a positive finite number", "1e-3")
    for key, example in (("steps", "300"), ("log_every", "10"), ("checkpoint_every", "100"), ("out_dim", "10")):
        if not isinstance(getattr(cfg, key), int) or getattr(cfg, key) < 1:
            raise bad(key, "a whole number >= 1", example)
    if not isinstance(cfg.batch_size, int) or cfg.batch_size < 2:
        raise bad("batch_size", "a whole number >= 2", "128")
    if not _finite(cfg.grad_clip) or cfg.grad_clip < 0:
        raise bad("grad_clip", "a finite number >= 0 (0: off)", "1.0")
    if not isinstance(cfg.warmup_steps, int) or isinstance(cfg.warmup_steps, bool) or cfg.warmup_steps < 0:
        raise bad("warmup_steps", "a whole number >= 0 (0: no warm-up)", "100")
    from training.trainer import SCHEDULES

    if cfg.schedule not in SCHEDULES:
        raise bad("schedule", f"one of {', '.join(SCHEDULES)}", "cosine")
    if not isinstance(cfg.num_workers, int) or cfg.num_workers < 0:
        raise bad("num_workers", "a whole number >= 0", "0")
    if not isinstance(cfg.n_views, int) or isinstance(cfg.n_views, bool) or cfg.n_views < 2:
        raise bad("n_views", "a whole number >= 2", "10")
    for key in ("amp", "allow_partial", "tensorboard"):
        if not isinstance(getattr(cfg, key), bool):
            raise UserError(f"{flag(key)} must be true or false, got {getattr(cfg, key)!r}")


def _finite(x: Any) -> bool:
    """True for a real finite number (not a bool, string or NaN/inf)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def resolve_args(cfg: Any) -> tuple[type[Objective], type[Encoder]]:
    """Check ``cfg``'s objective and encoder names, then its hyperparameters and encoder options against what they
    declare (unknown keys, types, ranges: one line each), converting each value to its declared type in place (so
    ``tau: 1`` and ``tau: 1.0`` are one setting); returns the two classes."""
    from training.encoders import ENCODERS
    from training.hparams import coerce

    objective_cls = OBJECTIVES.get(cfg.objective)
    check_keywords("objective", cfg.objective, objective_cls, cfg.objective_args, "hyperparameter")
    encoder_cls = ENCODERS.get(cfg.encoder)
    check_keywords("encoder", cfg.encoder, encoder_cls, cfg.encoder_args, "option")
    cfg.objective_args = coerce(objective_cls, cfg.objective_args, f"objective {cfg.objective}", "hyperparameter",
                                FIXED_ARGS)
    cfg.encoder_args = coerce(encoder_cls, cfg.encoder_args, f"encoder {cfg.encoder}", "option", FIXED_ARGS)
    return objective_cls, encoder_cls


def check_view_count(cfg: Any, objective_cls: type) -> None:
    """Refuse ``--n-views J`` != 2 for an objective whose loss is written for its fixed views (a pair, mostly),
    naming the objectives that take J views."""
    if cfg.n_views != DEFAULT_VIEWS and not getattr(objective_cls, "any_views", False):
        takes = ", ".join(n for n in OBJECTIVES.names() if getattr(OBJECTIVES.get(n), "any_views", False))
        raise UserError(f"--n-views {cfg.n_views}: objective {cfg.objective} takes {objective_cls.n_views} views "
                        f"(use --n-views {DEFAULT_VIEWS}); objectives that take J views: {takes}")


def check_components(cfg: Any, image_size: int, input_kind: str = "image",
                     in_dim: int | None = None) -> tuple[Encoder, Objective]:
    """Build the encoder and objective of ``cfg`` once (on no data) to check names, keys and values early:
    a bad --hp or --encoder-arg fails here, before a store is read or a run directory is made. Vector encoders
    (``input_kind="vector"``, synthetic data) get ``in_dim`` unless the config sets it; image runs also check
    ``n_views`` against the objective (a synthetic source decides its own view count)."""
    objective_cls, encoder_cls = resolve_args(cfg)
    if input_kind == "image":
        check_view_count(cfg, objective_cls)
    if encoder_cls.input_kind != input_kind:
        use = "cnn or resnet18 for a store" if input_kind == "image" else "mlp (or gin) for synthetic data"
        raise UserError(f"encoder {cfg.encoder} takes {encoder_cls.input_kind}s, not {input_kind}s; use {use}")
    options = dict(cfg.encoder_args)
    if in_dim is not None:
        options.setdefault("in_dim", in_dim)
    encoder = build_encoder(cfg.encoder, cfg.out_dim, image_size, cfg.constraint, **options)
    try:
        objective = objective_cls(encoder, **cfg.objective_args)
    except UserError:
        raise
    except (TypeError, ValueError) as exc:
        raise UserError(f"objective {cfg.objective}: {exc}") from None
    return encoder, objective


def build_encoder_for(cfg: Any, info: StoreInfo) -> Encoder:
    """The run's encoder for the store's image size."""
    return build_encoder(cfg.encoder, cfg.out_dim, info.image_size, cfg.constraint, **cfg.encoder_args)


def build_views(cfg: Any, info: StoreInfo) -> ViewMaker:
    """The view maker, checked against what the store holds."""
    if not cfg.normalize:
        mean, std = image_stats(info)
        cfg.normalize = {"mean": list(mean), "std": list(std)}
    views = make_view_maker(cfg.views, Normalize(tuple(cfg.normalize["mean"]), tuple(cfg.normalize["std"])),
                            n_views=cfg.n_views)
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
    """Everything the trainer needs, validated (one-line UserErrors for bad names and inputs); synthetic data
    (``cfg.data == "synthetic"``) is generated on ``device``."""
    check_numbers(cfg)
    if cfg.data == SYNTHETIC:
        from training.synthetic.run import build_synthetic_run

        return build_synthetic_run(cfg, start_batch, rank, world, device)
    objective_cls = OBJECTIVES.get(cfg.objective)
    check_view_count(cfg, objective_cls)
    info = store_info(cfg.data, allow_partial=cfg.allow_partial, split=cfg.split)
    views = build_views(cfg, info)
    check_pairing(cfg, objective_cls, views)
    need = cfg.n_views if objective_cls.any_views else objective_cls.n_views
    if views.n_views != need:
        raise UserError(f"objective {cfg.objective} needs {need} views, {cfg.views} makes {views.n_views}")
    if hasattr(objective_cls, "store_args"):  # what the objective takes from the data (the supervised ceiling)
        cfg.objective_args = {**objective_cls.store_args(store_latents(info), len(info.class_names or [])),
                              **cfg.objective_args}
    _, objective = check_components(cfg, info.image_size)
    if hasattr(views, "draws"):  # learned_crop: as many uniforms per image as the objective samples crops with
        views.draws = objective.draws_per_image
    keys = [k for k in views.requires if k.startswith("views/")]
    if keys:
        keys += [k.replace("/images", "/latents") for k in keys]
    dataset = StoreBatches(info, cfg.batch_size, cfg.seed, start_batch=start_batch, keys=keys, rank=rank, world=world,
                           lanes=cfg.num_workers)
    if "pair/images" in views.requires:
        from training.pairs import NearestNeighbourPairs

        dataset.pairing = NearestNeighbourPairs(dataset, views.change, cfg.seed)
    return Run(info, views, objective, make_loader(dataset, cfg.num_workers))
