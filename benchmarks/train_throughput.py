"""Training throughput: anchors/s of ident3d's step loop (store batches -> view maker on the training device ->
encoder + InfoNCE -> Adam) against a plain torchvision DataLoader with per-sample CPU transforms feeding the same
model, in one run; and the data pipelines alone (no model), which bound the step rate on a fast GPU.

    python benchmarks/train_throughput.py --store runs/paper001_3dident_cpu/stores/train.zarr --view near \
        --out results/train_throughput.json
    python benchmarks/train_throughput.py --tiny      # a 16-image, 16 px store with a pos view, cnn, batch 4 (a test)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

from ident3d.store.zarr_io import store_group


def ident3d_batches(store: str, views: str, batch: int, device: torch.device):
    """(next views function, objective builder inputs) of ident3d's own pipeline for ``views``."""
    from ident3d.training.components import build_run
    from ident3d.training.trainer import TrainConfig, view_generator

    cfg = TrainConfig(data=store, views=views, batch_size=batch, encoder="cnn", steps=10**6, seed=0)
    run = build_run(cfg, device=device)
    loader = iter(run.loader)
    step = [0]

    def next_views() -> list[torch.Tensor]:
        b = {k: v.to(device, non_blocking=True) for k, v in next(loader).items()}
        step[0] += 1
        return run.views(b, view_generator(0, step[0]))

    return next_views


def torchvision_batches(store: str, batch: int, device: torch.device, workers: int):
    """The baseline: images in memory, torchvision v2 transforms per sample on the CPU (crop + colour, two views),
    a shuffling DataLoader; batches moved to the device afterwards."""
    from torch.utils.data import DataLoader, Dataset
    from torchvision.transforms import v2

    images = np.asarray(store_group(store, mode="r")["images"][:])
    size = images.shape[1]
    t = v2.Compose([v2.ToImage(), v2.RandomResizedCrop(size, scale=(0.08, 1.0), antialias=True),
                    v2.RandomApply([v2.ColorJitter(0.8, 0.8, 0.8, 0.2)], p=0.8), v2.RandomGrayscale(0.2),
                    v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5] * 3, [0.25] * 3)])

    class Pairs(Dataset):
        def __len__(self) -> int:
            return len(images)

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            return t(images[i]), t(images[i])

    loader = DataLoader(Pairs(), batch_size=batch, shuffle=True, num_workers=workers, drop_last=True,
                        persistent_workers=workers > 0, generator=torch.Generator().manual_seed(0))

    def forever():
        while True:
            yield from loader

    it = forever()

    def next_views() -> list[torch.Tensor]:
        a, b = next(it)
        return [a.to(device, non_blocking=True), b.to(device, non_blocking=True)]

    return next_views


def rate(next_views, steps: int, batch: int, model: torch.nn.Module | None, device: torch.device) -> float:
    """Anchors/s over ``steps`` steps after one warm-up (data only when ``model`` is None)."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-4) if model is not None else None

    def one() -> None:
        views = next_views()
        if model is not None:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                loss = model(views)["loss"]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()

    one()
    t0 = time.perf_counter()
    for _ in range(steps):
        one()
    return steps * batch / (time.perf_counter() - t0)


def tiny_store(path: Path) -> Path:
    """A 16-image, 16 px Causal3DIdent store with exact ``pos`` LT pairs, for ``--tiny``."""
    from ident3d.render import render_store

    assert render_store(path, scene="causal3dident", n=16, settings={"resolution": 16, "samples": 2},
                        views="pos:positions", workers=1, threads=1, progress=False).ok
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", help="a store with a stored LT view")
    ap.add_argument("--view", help="the stored view's name (for the lt_exact pipeline)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--encoders", nargs="+", default=["cnn", "resnet18"])
    ap.add_argument("--loader-workers", type=int, default=0, help="the baseline DataLoader's worker processes")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default="results/train_throughput.json")
    tiny = add_tiny(ap, "a 16-image, 16 px store with a pos view rendered for it; cnn, batch 4, 1 step")
    args = ap.parse_args()
    folder = tiny.apply(args, sizes={"batch_size": 4, "steps": 1, "encoders": ["cnn"], "device": "cpu"},
                        inputs=not args.store)
    if folder and not args.store:
        args.store, args.view = str(tiny_store(folder / "store.zarr")), "pos"
    if not args.store or not args.view:
        ap.error("give --store and --view (or --tiny)")
    from ident3d.training.encoders import build_encoder
    from ident3d.training.objectives import OBJECTIVES
    from ident3d.training.trainer import pick_device

    device = pick_device(args.device)

    size = store_group(args.store, mode="r")["images"].shape[1]
    pipelines = {"ident3d DA crop_large+colour": ident3d_batches(args.store, "crop_large+colour", args.batch_size,
                                                                 device),
                 f"ident3d LT lt_exact:{args.view}": ident3d_batches(args.store, f"lt_exact:{args.view}",
                                                                    args.batch_size, device),
                 "torchvision DataLoader + CPU transforms": torchvision_batches(args.store, args.batch_size, device,
                                                                                args.loader_workers)}
    res: dict = {"command": "python " + " ".join(sys.argv), "device": str(device),
                 "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
                 "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "python": platform.python_version(),
                 "resolution": size, "batch_size": args.batch_size, "anchors_per_s": {}}
    for name, fn in pipelines.items():
        res["anchors_per_s"][f"{name} | data only"] = rate(fn, args.steps, args.batch_size, None, device)
        for enc in args.encoders:
            torch.manual_seed(0)
            model = OBJECTIVES.get("infonce")(build_encoder(enc, 10, size)).to(device)
            res["anchors_per_s"][f"{name} | {enc}"] = rate(fn, args.steps, args.batch_size, model, device)
    base = "torchvision DataLoader + CPU transforms"
    res["ratio_vs_baseline"] = {k: v / res["anchors_per_s"][f"{base} | {k.split(' | ')[1]}"]
                                for k, v in res["anchors_per_s"].items() if not k.startswith(base)}
    for k, v in res["anchors_per_s"].items():
        print(f"{k:60s} {v:9.1f} anchors/s" + (f"  ({res['ratio_vs_baseline'][k]:.2f}x the baseline)"
                                                 if k in res["ratio_vs_baseline"] else ""))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
