"""``ident3d train``: fit a self-supervised model on a store; the run directory holds the config,
the checkpoint and the metrics, which is all ``ident3d evaluate`` needs."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from ident3d.causal.errors import UserError
from ident3d.causal.yamlnum import parse_value
from ident3d.pipelines.files import check_output_dir
from ident3d.pipelines.notes import notes_printed

# ident3d.training (torch, +1.2 s) and store.info (zarr) are imported in the functions below that use them: `ident3d
# train --help` (and `ident3d --help`) import this module and need neither

# options a resumed run may change; not num_workers: batch contents depend on the number of loader lanes

AUTO = "auto"
# what --encoder/--steps/--batch-size/--lr auto mean per device: on a CPU a run that finishes in minutes on
# 2 cores (the small CNN), on CUDA the papers' ResNet-18 setup
DEVICE_DEFAULTS = {
    "cpu": {"encoder": "cnn", "steps": 500, "batch_size": 128, "lr": 1e-3},
    "cuda": {"encoder": "resnet18", "steps": 1000, "batch_size": 256, "lr": 1e-4},
}
AUTO_KEYS = tuple(DEVICE_DEFAULTS["cpu"])


def _defaults_text(device: str) -> str:
    d = DEVICE_DEFAULTS[device]
    return f"{d['encoder']}, {d['steps']} steps, batch {d['batch_size']}, lr {d['lr']:g}"


def auto_or(cast: type, what: str) -> Callable[[str], Any]:
    """An argparse type: 'auto' or a value of ``cast`` (int: a whole number, float: a number)."""

    def parse(text: str) -> Any:
        if text == AUTO:
            return AUTO
        try:
            return cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what} or 'auto', got {text!r}") from None

    return parse


auto_int = auto_or(int, "a whole number")
auto_float = auto_or(float, "a number")


def resolve_defaults(values: dict[str, Any], device: str, saved: dict[str, Any] | None) -> list[str]:
    """Replace 'auto' values in place: a resumed run keeps its saved values, a new one takes the device's
    defaults. Returns the keys that were auto (for the start line)."""
    auto = [k for k in AUTO_KEYS if values.get(k) == AUTO]
    for key in auto:
        values[key] = saved[key] if saved and key in saved else DEVICE_DEFAULTS[device][key]
    return auto


def parse_kv(items: list[str] | None, flag: str) -> dict[str, Any]:
    """KEY=VALUE items -> dict, values read by ``ident3d.causal.yamlnum.parse_value`` (numbers as written, e.g. 5e-2;
    true/false, null, lists); the objective or encoder then checks each against its declaration."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"{flag}: expected KEY=VALUE, got {item!r}")
        out[key] = parse_value(value)
    return out


def list_components() -> str:
    """One line per objective, view maker and encoder (``ident3d train --list``), and under each objective and
    encoder what its ``--hp`` / ``--encoder-arg`` settings take (from their one declaration)."""
    from ident3d.training.encoders import ENCODERS  # torch: not for --help
    from ident3d.training.objectives import OBJECTIVES
    from ident3d.training.views import VIEWS

    lines = []
    for title, reg, flag in (("objectives", OBJECTIVES, "--hp"), ("views", VIEWS, ""),
                             ("encoders", ENCODERS, "--encoder-arg")):
        lines.append(f"{title}:")
        for name, doc in reg.describe():
            lines.append(f"  {name:14s} {doc}")
            if settings := reg.settings(name):
                lines.append(f"  {'':14s} {flag}: {settings}")
    from ident3d.training.views.augment import DA_RECIPES  # torch: not for --help

    lines.append("  (DA recipes combine with '+', e.g. crop_large+colour, rotation+colour; settings go in parentheses, "
                 "e.g. crop_small(scale_min=0.2)+colour(strength=0.5))")
    lines.append("DA recipe settings:")
    lines += [f"  {name:14s} {recipe.settings() or '(no settings)'}" for name, recipe in DA_RECIPES.items()]
    return "\n".join(lines)


def config_from_args(args: argparse.Namespace, saved: dict[str, Any] | None = None) -> tuple[Any, list[str]]:
    """The TrainConfig of the command line, 'auto' defaults resolved for the device; (config, auto keys).
    Every value is checked here, before a store is read or a file written."""
    from ident3d.training.parts import check_numbers, default_views  # torch: not for --help
    from ident3d.training.run_dir import store_path
    from ident3d.training.trainer import TrainConfig, pick_device

    known = {f.name for f in fields(TrainConfig)}
    values = {k: getattr(args, k) for k in known if hasattr(args, k) and getattr(args, k) is not None}
    values["views"] = args.views or (saved or {}).get("views") or default_views(args.objective)
    values["data"] = store_path(args.data)  # absolute, so the run names its store from any working directory
    values["objective_args"] = parse_kv(args.hp, "--hp")
    values["encoder_args"] = parse_kv(args.encoder_arg, "--encoder-arg")
    values["amp"] = not args.no_amp
    auto = resolve_defaults(values, pick_device(args.device).type, saved)
    cfg = TrainConfig(**values)
    check_numbers(cfg)
    if "batch_size" in auto and saved is None:
        cfg.batch_size = fit_batch(cfg)
    return cfg, auto


def fit_batch(cfg: Any) -> int:
    """The auto batch size, capped at the images the store holds (a small store is no error for a default)."""
    from ident3d.store.info import store_info  # zarr: not for --help

    return min(cfg.batch_size, int(store_info(cfg.data, cfg.allow_partial, cfg.split).rows.size))


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train a self-supervised model on a store",
        description="Train an encoder with a self-supervised objective on a Zarr store, with views made by "
                    "image augmentations (DA) or latent transformations (LT). The run directory gets "
                    "config.json, checkpoint.pt and metrics.jsonl/csv; --resume continues exactly (also after "
                    "Ctrl-C). Defaults follow the device (auto): on a CPU " + _defaults_text("cpu") +
                    " (a few minutes on 2 cores); on CUDA the papers' " + _defaults_text("cuda") + ".",
        epilog="examples:\n"
               "  ident3d train --list\n"
               "  ident3d train --data stores/c3d.zarr --objective infonce --views crop_large+colour "
               "--encoder resnet18 --steps 1000 --batch-size 256 --out runs/da_crop\n"
               "  ident3d train --data stores/c3d.zarr --objective infonce --views lt_exact:hues --out runs/lt_hues\n"
               "  ident3d train --data stores/c3d.zarr --objective infonce --views lt_nn:positions --out runs/lt_nn\n"
               "  ident3d train --data stores/canvas.zarr --objective crl_tac --views learned_crop --encoder tac_cnn "
               "--out-dim 50 --out runs/crl_tac  # paper 002 (ident3d dataset digits_canvas)\n"
               "  ident3d train --data stores/digits.zarr --objective simvae --views paper004_grey --n-views 10 "
               "--encoder mlp_vae --encoder-arg channels=1 --out runs/simvae_j10  # paper 004's J = 10",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list", action="store_true", help="list objectives, view makers and encoders, then exit")
    p.add_argument("--data", metavar="STORE", help="training store (from ident3d render)")
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (config, checkpoint, metrics)")
    p.add_argument("--objective", default="infonce", help="objective name (default infonce)")
    p.add_argument("--views", default=None,
                   help="view maker: DA recipe(s) like crop_large+colour, lt_exact:VIEW or lt_nn:CHANGE (default: the "
                        "objective's own where it has one, e.g. labels for supervised, else crop_large+colour)")
    p.add_argument("--n-views", type=int, default=2, metavar="J",
                   help="views per image (default 2): J >= 2 independently augmented views from a DA view maker, "
                        "for the objectives that take J views (simvae, vae, beta_vae; paper 004 uses J = 10)")
    p.add_argument("--encoder", default=AUTO,
                   help=f"encoder name (default auto: {DEVICE_DEFAULTS['cpu']['encoder']} on a CPU, "
                        f"{DEVICE_DEFAULTS['cuda']['encoder']} on CUDA)")
    p.add_argument("--out-dim", type=int, default=10, help="representation size (default 10)")
    p.add_argument("--constraint", default="none", choices=("none", "sphere", "box"), help="output constraint")
    p.add_argument("--steps", type=auto_int, default=AUTO,
                   help=f"optimiser steps (default auto: {DEVICE_DEFAULTS['cpu']['steps']} on a CPU, "
                        f"{DEVICE_DEFAULTS['cuda']['steps']} on CUDA)")
    p.add_argument("--batch-size", type=auto_int, default=AUTO,
                   help="anchors per step, the GLOBAL batch across all processes/GPUs under torchrun (each "
                        "rank takes batch-size/N of the same rows one process would; must be divisible by N), "
                        "losses use the whole global batch; per-sample view parameters are drawn per rank and "
                        "BatchNorm is synchronised only on GPU (default auto: "
                        f"{DEVICE_DEFAULTS['cpu']['batch_size']} on a CPU, {DEVICE_DEFAULTS['cuda']['batch_size']} "
                        "on CUDA)")
    p.add_argument("--lr", type=auto_float, default=AUTO,
                   help=f"Adam learning rate (default auto: {DEVICE_DEFAULTS['cpu']['lr']:g} on a CPU, "
                        f"{DEVICE_DEFAULTS['cuda']['lr']:g} on CUDA)")
    p.add_argument("--seed", type=int, default=0, help="seed for weights, batches and views (default 0)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    p.add_argument("--split", help="use part of the store: train:0.9 (first 90%% of rows) or test:0.9")
    p.add_argument("--allow-partial", action="store_true", help="train on the done chunks of an unfinished store")
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes (default 0)")
    p.add_argument("--grad-clip", type=float, default=0.0, help="clip the gradient norm (0: off)")
    p.add_argument("--no-amp", action="store_true", help="no bfloat16 autocast on GPU")
    p.add_argument("--hp", nargs="+", metavar="KEY=VALUE", help="objective hyperparameters, e.g. tau=0.5")
    p.add_argument("--encoder-arg", nargs="+", metavar="KEY=VALUE", help="encoder options, e.g. hidden=100")
    p.add_argument("--log-every", type=int, default=10, help="steps between metric rows (default 10)")
    p.add_argument("--checkpoint-every", type=int, default=100, help="steps between checkpoints (default 100)")
    p.add_argument("--tensorboard", action="store_true", help="also write TensorBoard logs")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(run=run)


def start_line(cfg: Any, auto: list[str]) -> str:
    """The one line printed at start: device and the settings that came from the auto defaults."""
    from ident3d.training.trainer import pick_device  # torch: not for --help

    device = pick_device(cfg.device).type
    chosen = {"encoder": cfg.encoder, "steps": f"{cfg.steps} steps", "batch_size": f"batch {cfg.batch_size}",
              "lr": f"lr {cfg.lr:g}"}
    views = cfg.views if cfg.n_views == 2 else f"{cfg.views} x {cfg.n_views} views"
    text = f"training {cfg.objective} with {views} on {device}: " + ", ".join(chosen.values())
    if auto:
        flags = "/".join("--" + k.replace("_", "-") for k in auto)
        text += f" (auto defaults for {device}; set {flags} to change)"
    return text


def check_early(cfg: Any) -> None:
    """Check the view maker, objective, hyperparameters and encoder options without reading the store, so a
    typo fails in a second, before the store's statistics are computed."""
    from ident3d.training.parts import check_components  # torch: not for --help
    from ident3d.training.views import Normalize, make_view_maker

    make_view_maker(cfg.views, Normalize((0.0,) * 3, (1.0,) * 3), n_views=cfg.n_views)
    check_components(cfg, image_size=64, steps_memory=False)  # refuses --n-views J for an objective of fixed views


def finished_step(run_dir: Any, cfg: Any) -> int | None:
    """The step of a resumed run's checkpoint when it already reached ``cfg.steps`` (nothing to train), else None."""
    from ident3d.training.run_dir import load_checkpoint  # torch: not for --help

    if not run_dir.checkpoint_path.exists():
        return None
    step = int(load_checkpoint(run_dir.checkpoint_path)["step"])
    return step if step >= cfg.steps else None


def run(args: argparse.Namespace) -> int:
    if args.list:
        print(list_components())
        return 0
    if not args.data or not args.out:
        raise UserError("--data STORE and --out RUN_DIR are required (or --list)")
    from ident3d.training.run_dir import RunDir  # torch: not for --help
    from ident3d.training.trainer import TrainingInterrupted, train

    out = Path(args.out)
    check_output_dir(out)
    run_dir = RunDir(out)
    saved = run_dir.saved(args.resume, args.overwrite)
    cfg, auto = config_from_args(args, saved)
    if saved is not None:
        run_dir.check_resume(cfg, saved)
    check_early(cfg)
    done = finished_step(run_dir, cfg) if saved is not None else None
    if done is not None:
        print(f"{out} is complete (step {done} of {cfg.steps}); nothing to do (raise --steps to train further)")
        return 0
    print(start_line(cfg, auto), flush=True)
    clear = (lambda: shutil.rmtree(out)) if args.overwrite and out.exists() else None
    try:
        with notes_printed("train"):
            last = train(cfg, out, resume=saved is not None and run_dir.checkpoint_path.exists(),
                         progress=not args.no_progress, on_ready=clear, say=lambda text: print(text, flush=True))
    except TrainingInterrupted as stop:
        kept = f"the checkpoint of step {stop.checkpoint} is kept" if stop.checkpoint else "no checkpoint yet"
        print(f"ident3d train: interrupted at step {stop.step} of {cfg.steps}; {kept}: re-run the same command with "
              f"--resume to continue {out}", file=sys.stderr)
        return 130
    loss = last.get("loss", float("nan"))
    print(f"trained {cfg.objective} with {cfg.views} to step {last.get('step')}: loss {loss:.4f} -> {out}")
    return 0
