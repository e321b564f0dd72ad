"""The kit's ``throughput`` job: images per second of ResNet-18 (``--tiny``: the small ``cnn``) + InfoNCE training
fed by ident3d's pipelines (kornia DA and exact LT pairs, views made on the training device) against a plain
torchvision DataLoader with CPU transforms, in the same run, on each carried store (one per resolution: 64 px,
224 px). The measuring functions are ``benchmarks/train_throughput.py``'s own."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch
from kit_pack_format import KitError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: train_throughput's functions

GOAL_64PX = 20_000  # img/s of ident3d's pipelines at 64 px on one H100 (issue 36)
BASELINE = "torchvision DataLoader + CPU transforms"


def pipelines(store: str, view: str, batch: int, device: torch.device, workers: int) -> dict[str, Any]:
    """The three data pipelines of the comparison on ``store``, each a function giving the next views."""
    from train_throughput import ident3d_batches, torchvision_batches

    return {"ident3d DA crop_large+colour": ident3d_batches(store, "crop_large+colour", batch, device),
            f"ident3d LT lt_exact:{view}": ident3d_batches(store, f"lt_exact:{view}", batch, device),
            BASELINE: torchvision_batches(store, batch, device, workers)}


def store_view(store: Path) -> tuple[int, str, int]:
    """The store's image size, its first stored LT view (the LT pipeline's pairs) and its image count; one line for
    a store the job cannot use."""
    from ident3d.causal.errors import UserError
    from ident3d.store.info import store_info

    try:
        info = store_info(str(store))
    except UserError as exc:  # a carried store ident3d cannot read: one line, as every refusal of the kit
        raise KitError(f"the throughput store {store}: {exc}") from None
    if not info.views:
        raise KitError(f"{store} has no stored LT view for the throughput job: render it with --views NAME:CHANGE")
    if info.n < 2:
        raise KitError(f"{store} has {info.n} image(s); the throughput job needs a batch of them")
    return int(info.image_size), sorted(info.views)[0], int(info.n)


def gflop_per_anchor(encoder: str, size: int, device: torch.device) -> float:
    """GFLOP of one training step per anchor (forward and backward of the encoder + InfoNCE on its two views), counted
    by torch: img/s times this is the arithmetic rate the GPU sustains (an H100 peaks near 990 TFLOP/s in bf16)."""
    from torch.utils.flop_counter import FlopCounterMode

    from ident3d.training.encoders import build_encoder
    from ident3d.training.objectives import OBJECTIVES

    model = OBJECTIVES.get("infonce")(build_encoder(encoder, 10, size)).to(device)
    views = [torch.randn(2, 3, size, size, device=device) for _ in range(2)]
    with FlopCounterMode(display=False) as counter:
        model(views)["loss"].backward()
    return counter.get_total_flops() / 2 / 1e9


def measure_store(store: Path, device: torch.device, encoder: str, batch: int, steps: int, workers: int,
                  deadline: float) -> dict[str, Any]:
    """img/s of each pipeline alone (data only) and feeding ``encoder`` + InfoNCE on one store; a measurement that
    would start past ``deadline`` is skipped and named."""
    from train_throughput import rate

    from ident3d.training.encoders import build_encoder
    from ident3d.training.objectives import OBJECTIVES

    size, view, n = store_view(store)
    batch = min(batch, n)
    res: dict[str, Any] = {"store": store.name, "resolution": size, "lt_view": view, "batch_size": batch,
                           "steps": steps, "img_per_s": {}, "skipped": []}
    for name, next_views in pipelines(str(store), view, batch, device, workers).items():
        for model_name in ("data only", encoder):
            if time.monotonic() > deadline:
                res["skipped"].append(f"{name} | {model_name}")
                continue
            model = None
            if model_name == encoder:
                torch.manual_seed(0)
                model = OBJECTIVES.get("infonce")(build_encoder(encoder, 10, size)).to(device)
            res["img_per_s"].setdefault(name, {})[model_name] = rate(next_views, steps, batch, model, device)
    res["gflop_per_img"] = gflop_per_anchor(encoder, size, device)
    res["model_tflop_per_s"] = {name: by[encoder] * res["gflop_per_img"] / 1000
                                for name, by in res["img_per_s"].items() if encoder in by}
    base = res["img_per_s"].get(BASELINE, {})
    res["ratio_vs_baseline"] = {name: {k: v / base[k] for k, v in by.items() if base.get(k)}
                                for name, by in res["img_per_s"].items() if name != BASELINE}
    if size == 64:
        best = max((by.get(encoder, 0.0) for name, by in res["img_per_s"].items() if name != BASELINE),
                   default=0.0)
        res["goal_img_per_s"], res["meets_goal"] = GOAL_64PX, best >= GOAL_64PX
    return res


def run_throughput(stores: dict[str, Path], device: torch.device, encoder: str, batch: int, steps: int, workers: int,
                   deadline: float) -> dict[str, Any]:
    """The job's numbers: one entry per store (by data name), each pipeline's img/s (anchors per second; each
    anchor is two views) without a model and with ``encoder`` + InfoNCE (bf16 autocast on CUDA, Adam)."""
    out: dict[str, Any] = {"encoder": encoder, "objective": "infonce", "loader_workers": workers,
                           "img_counts": "anchors (each with 2 views) per second", "stores": {}}
    for name, store in stores.items():
        out["stores"][name] = measure_store(store, device, encoder, batch, steps, workers, deadline)
    return out
