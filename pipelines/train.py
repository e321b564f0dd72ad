"""``ident3d train``: fit a self-supervised model on a store; the run directory holds the config,
the checkpoint and the metrics, which is all ``ident3d evaluate`` needs."""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import yaml

from causal.errors import UserError

# options a resumed run may change; not num_workers: batch contents depend on the number of loader lanes
RESUMABLE_CHANGES = {"steps", "log_every", "checkpoint_every", "tensorboard", "device"}


def parse_kv(items: list[str] | None, flag: str) -> dict[str, Any]:
    """KEY=VALUE items -> dict, values parsed as YAML scalars (numbers, bools, lists)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"{flag}: expected KEY=VALUE, got {item!r}")
        out[key] = yaml.safe_load(value)
    return out


def list_components() -> str:
    """One line per objective, view maker and encoder (``ident3d train --list``)."""
    from training.encoders import ENCODERS
    from training.objectives import OBJECTIVES
    from training.views import VIEWS

    lines = []
    for title, reg in (("objectives", OBJECTIVES), ("views", VIEWS), ("encoders", ENCODERS)):
        lines.append(f"{title}:")
        lines += [f"  {name:14s} {doc}" for name, doc in reg.describe()]
    lines.append("  (DA recipes combine with '+', e.g. crop_large+colour, rotation+colour)")
    return "\n".join(lines)


def prepare_run_dir(cfg: Any, out: Path, resume: bool, overwrite: bool) -> bool:
    """Create or check the run directory; returns True when resuming from a checkpoint."""
    from training.trainer import CHECKPOINT

    config_path, ckpt = out / "config.json", out / CHECKPOINT
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; choose a directory for the run")
    if out.exists() and overwrite:
        shutil.rmtree(out)
    if config_path.exists():
        if not resume:
            raise UserError(f"{out} already holds a run; pass --resume to continue it or --overwrite to replace it")
        saved = json.loads(config_path.read_text())
        now = asdict(cfg)
        diff = [k for k in now if k not in RESUMABLE_CHANGES | {"normalize"} and saved.get(k) != now[k]]
        if diff:
            raise UserError(f"cannot resume {out}: {', '.join(diff)} differ from the saved run; use another --out")
        cfg.normalize = saved.get("normalize") or {}
    out.mkdir(parents=True, exist_ok=True)
    return resume and ckpt.exists()


def config_from_args(args: argparse.Namespace) -> Any:
    from training.trainer import TrainConfig

    if args.steps <= 0 or args.lr <= 0:
        raise UserError("--steps and --lr must be positive")
    known = {f.name for f in fields(TrainConfig)}
    values = {k: getattr(args, k) for k in known if hasattr(args, k) and getattr(args, k) is not None}
    values["objective_args"] = parse_kv(args.hp, "--hp")
    values["encoder_args"] = parse_kv(args.encoder_arg, "--encoder-arg")
    values["amp"] = not args.no_amp
    return TrainConfig(**values)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train a self-supervised model on a store",
        description="Train an encoder with a self-supervised objective on a Zarr store, with views made by "
                    "image augmentations (DA) or latent transformations (LT). The run directory gets "
                    "config.json, checkpoint.pt and metrics.jsonl/csv; --resume continues exactly.",
        epilog="examples:\n"
               "  ident3d train --list\n"
               "  ident3d train --data stores/c3d.zarr --objective infonce --views crop_large+colour "
               "--encoder resnet18 --steps 1000 --batch-size 256 --out runs/da_crop\n"
               "  ident3d train --data stores/c3d.zarr --objective infonce --views lt_exact:hues --out runs/lt_hues\n"
               "  ident3d train --data stores/c3d.zarr --objective infonce --views lt_nn:positions --out runs/lt_nn",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list", action="store_true", help="list objectives, view makers and encoders, then exit")
    p.add_argument("--data", metavar="STORE", help="training store (from ident3d render)")
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (config, checkpoint, metrics)")
    p.add_argument("--objective", default="infonce", help="objective name (default infonce)")
    p.add_argument("--views", default="crop_large+colour",
                   help="view maker: DA recipe(s) like crop_large+colour, lt_exact:VIEW or lt_nn:CHANGE")
    p.add_argument("--encoder", default="resnet18", help="encoder name (default resnet18)")
    p.add_argument("--out-dim", type=int, default=10, help="representation size (default 10)")
    p.add_argument("--constraint", default="none", choices=("none", "sphere", "box"), help="output constraint")
    p.add_argument("--steps", type=int, default=1000, help="optimiser steps (default 1000)")
    p.add_argument("--batch-size", type=int, default=256,
                   help="anchors per step, the GLOBAL batch across all processes/GPUs under torchrun (each "
                        "rank takes batch-size/N of the same rows one process would; must be divisible by N), "
                        "losses use the whole global batch; per-sample view parameters are drawn per rank and "
                        "BatchNorm is synchronised only on GPU (default 256)")
    p.add_argument("--lr", type=float, default=1e-4, help="Adam learning rate (default 1e-4)")
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


def run(args: argparse.Namespace) -> int:
    if args.list:
        print(list_components())
        return 0
    if not args.data or not args.out:
        raise UserError("--data STORE and --out RUN_DIR are required (or --list)")
    from training.trainer import train

    cfg = config_from_args(args)
    out = Path(args.out)
    resuming = prepare_run_dir(cfg, out, args.resume, args.overwrite)
    last = train(cfg, out, resume=resuming, progress=not args.no_progress)
    loss = last.get("loss", float("nan"))
    print(f"trained {cfg.objective} with {cfg.views} to step {last.get('step')}: loss {loss:.4f} -> {out}")
    return 0
