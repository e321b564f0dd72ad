"""What a run is made of (``Run``) and the checks of a TrainConfig's settings and components before any data is
read (numbers, names, hyperparameter keys and types, view counts): shared by store runs
(``ident3d.training.components``) and synthetic runs (``ident3d.training.synthetic.run``), below both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ident3d.causal.errors import UserError
from ident3d.store.memory import available_memory, check_fits
from ident3d.training.config import TrainConfig
from ident3d.training.encoder_base import Encoder
from ident3d.training.encoders import build_encoder
from ident3d.training.hparams import check_keywords, coerce, declared, show
from ident3d.training.model_memory import check_model_memory
from ident3d.training.objective_parts.base import Objective
from ident3d.training.objectives import OBJECTIVES
from ident3d.training.registry import FIXED_ARGS
from ident3d.training.views.base import DEFAULT_VIEWS


@dataclass
class Run:
    """The parts the trainer drives."""

    info: Any  # the store's StoreInfo, or the synthetic source
    views: Any  # the ViewMaker
    objective: Objective
    loader: Any


# arguments the trainer passes itself: not settable through --hp / --encoder-arg
_FIXED_ARGS = {"self", *FIXED_ARGS}


EXAMPLES = {"lr": "1e-3", "steps": "300", "log_every": "10", "checkpoint_every": "100", "out_dim": "10", "seed": "0",
            "batch_size": "128", "grad_clip": "1.0", "warmup_steps": "100", "schedule": "cosine", "num_workers": "0",
            "n_views": "10"}  # what an error suggests for a setting


def check_numbers(cfg: Any, flag: Any = lambda key: "--" + key.replace("_", "-")) -> None:
    """Refuse settings that would crash or silently misbehave later (NaN/inf/negative learning rate, zero steps, a
    zero checkpoint or log interval, ...), each held to its declaration in ``TrainConfig``'s annotations;
    ``flag(key)`` names the setting in the message."""
    for key, param in declared(TrainConfig).items():
        if param.kind not in ("number", "whole", "bool", "choice"):
            continue
        value = getattr(cfg, key)
        try:
            param.convert(value)
        except ValueError:
            example = f"; e.g. {flag(key)} {EXAMPLES[key]}" if key in EXAMPLES else ""
            raise UserError(f"{flag(key)} must be {param.expected()}, got {show(value)}{example}") from None


def resolve_args(cfg: Any) -> tuple[type[Objective], type[Encoder]]:
    """Check ``cfg``'s objective and encoder names, then its hyperparameters and encoder options against what they
    declare (unknown keys, types, ranges: one line each), converting each value to its declared type in place (so
    ``tau: 1`` and ``tau: 1.0`` are one setting); returns the two classes."""
    from ident3d.training.encoders import ENCODERS

    objective_cls = OBJECTIVES.get(cfg.objective)
    check_keywords("objective", cfg.objective, objective_cls, cfg.objective_args, "hyperparameter", _FIXED_ARGS)
    encoder_cls = ENCODERS.get(cfg.encoder)
    check_keywords("encoder", cfg.encoder, encoder_cls, cfg.encoder_args, "option", _FIXED_ARGS)
    cfg.objective_args = coerce(objective_cls, cfg.objective_args, f"objective {cfg.objective}", "hyperparameter",
                                FIXED_ARGS)
    cfg.encoder_args = coerce(encoder_cls, cfg.encoder_args, f"encoder {cfg.encoder}", "option", FIXED_ARGS)
    return objective_cls, encoder_cls


def default_views(objective: str) -> str:
    """The view maker of a run that names none: the objective's own where it has one (supervised: labels, the
    temporal VAEs: next_frame_targets, CRL-TAC: learned_crop), else TrainConfig's DA default."""
    from ident3d.training.config import TrainConfig

    return getattr(OBJECTIVES.get(objective), "view_maker", None) or TrainConfig.views


def with_data_args(cfg: Any, from_data: dict[str, Any], where: str) -> dict[str, Any]:
    """The objective's arguments with those its data determines (``store_args``: the supervised ceiling's class count
    and latent statistics) filled in. A value the user gave must agree with the data (a class count, a list's length):
    a mismatch would fail only at the first step."""
    given = cfg.objective_args
    for key, value in from_data.items():
        if key not in given or given[key] is None:
            continue
        if isinstance(value, list) and (not isinstance(given[key], list) or len(given[key]) != len(value)):
            raise UserError(f"--hp {key} must have one value per latent of {where} ({len(value)}); leave it out to "
                            "take it from the data")
        if not isinstance(value, list) and given[key] != value:
            raise UserError(f"--hp {key}={given[key]} does not match {where}, which gives {key}={value}; leave {key} "
                            "out to take it from the data")
    return {**from_data, **given}


def check_view_count(cfg: Any, objective_cls: type) -> None:
    """Refuse ``--n-views J`` != 2 for an objective whose loss is written for its fixed views (a pair, mostly),
    naming the objectives that take J views."""
    if cfg.n_views != DEFAULT_VIEWS and not getattr(objective_cls, "any_views", False):
        takes = ", ".join(n for n in OBJECTIVES.names() if getattr(OBJECTIVES.get(n), "any_views", False))
        raise UserError(f"--n-views {cfg.n_views}: objective {cfg.objective} takes {objective_cls.n_views} views "
                        f"(use --n-views {DEFAULT_VIEWS}); objectives that take J views: {takes}")


# bytes per value (channel x pixel) of one view image in a training step: the float32 view and about three more
# copies (the view maker's output, the objective's stacked targets, a reconstruction). The smallest model measured,
# mlp_vae at 28 px, took 12 B per value for each view added; conv encoders take far more (cnn at 64 px: 354), so the
# bound refuses only view batches that no encoder could hold
VIEW_BYTES_PER_VALUE = 16


def check_view_batch(cfg: Any, objective_cls: type, image_size: int, device: Any = "cpu", world: int = 1,
                     available: int | None = None) -> None:
    """Refuse a step's views that cannot fit in memory (``ident3d.store.memory.check_fits``) before the run folder is
    made: each rank's batch_size / world anchors x J views x 3 x image_size^2 values x ``VIEW_BYTES_PER_VALUE``, against
    the free memory of the device that makes them (``available``: given, for tests)."""
    views = cfg.n_views if getattr(objective_cls, "any_views", False) else objective_cls.n_views
    images = max(1, cfg.batch_size // max(1, world)) * views
    what = f"--batch-size {cfg.batch_size} x {views} views ({images:,} images of {image_size} px" + \
        (f" on each of {world} ranks) need" if world > 1 else ") need")
    lower = "lower --batch-size or --n-views" if getattr(objective_cls, "any_views", False) else "lower --batch-size"
    have = _device_memory(device) if available is None else available
    check_fits(images * 3 * image_size * image_size * VIEW_BYTES_PER_VALUE, what, lower, have)


def _device_memory(device: Any) -> int | None:
    """Free memory where a step's views are made: the GPU's for a CUDA device, else this machine's (None: unknown)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    return available_memory()


def _training_device(device: str) -> str:
    """Where a run's model and steps live: cuda when asked (or auto) and present, else cpu."""
    import torch

    return "cuda" if device in ("cuda", "auto") and torch.cuda.is_available() else "cpu"


def check_components(cfg: Any, image_size: int, input_kind: str = "image", in_dim: int | None = None,
                     steps_memory: bool = True) -> tuple[Encoder, Objective]:
    """Build the encoder and objective of ``cfg`` once (on no data) to check names, keys and values early:
    a bad --hp or --encoder-arg fails here, before a store is read or a run directory is made. Vector encoders
    (``input_kind="vector"``, synthetic data) get ``in_dim`` unless the config sets it; image runs also check
    ``n_views`` against the objective (a synthetic source decides its own view count). The model and, unless
    ``steps_memory`` is False (``image_size`` then only a stand-in), one training step must fit in memory
    (``ident3d.training.model_memory``), checked before the real model is built."""
    objective_cls, encoder_cls = resolve_args(cfg)
    if input_kind == "image":
        check_view_count(cfg, objective_cls)
    if encoder_cls.input_kind != input_kind:
        use = "cnn or resnet18 for a store" if input_kind == "image" else "mlp (or gin) for synthetic data"
        raise UserError(f"encoder {cfg.encoder} takes {encoder_cls.input_kind}s, not {input_kind}s; use {use}")
    options = dict(cfg.encoder_args)
    if in_dim is not None:
        options.setdefault("in_dim", in_dim)

    def build() -> tuple[Objective, Encoder]:
        encoder = build_encoder(cfg.encoder, cfg.out_dim, image_size, cfg.constraint, **options)
        try:
            return objective_cls(encoder, **cfg.objective_args), encoder
        except UserError:
            raise
        except (TypeError, ValueError) as exc:
            raise UserError(f"objective {cfg.objective}: {exc}") from None

    views = cfg.n_views if getattr(objective_cls, "any_views", False) else objective_cls.n_views
    steps = input_kind == "image" and steps_memory  # False: before the store is read, at a stand-in image size
    check_model_memory(cfg.objective, build, cfg.batch_size, image_size if steps else 0, views,
                       _device_memory(_training_device(cfg.device)))
    objective, encoder = build()
    return encoder, objective
