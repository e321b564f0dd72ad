"""Loader throughput: images/s from a 224 px store through ident3d's loader (0 and 2 workers) vs the
same images as a PNG folder read with PIL, side by side; and the cost of kornia DA per batch on CPU.

    python benchmarks/load_bench.py --out results/load_bench.json
    python benchmarks/load_bench.py --tiny      # 16 images of 16 px, batches of 4, no loader workers (a test)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from ident3d.render import render_store
from ident3d.store.info import store_info
from ident3d.store.zarr_io import store_group
from ident3d.training.data import StoreBatches, make_loader
from ident3d.training.views import Normalize, make_view_maker


class PngFolder(Dataset):
    """The baseline: one PNG file per image, decoded with PIL."""

    def __init__(self, folder: Path):
        self.files = sorted(folder.glob("*.png"))

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> torch.Tensor:
        with Image.open(self.files[i]) as im:
            return torch.from_numpy(np.asarray(im.convert("RGB")))


def rate(loader, batches: int, batch_size: int) -> float:
    it = iter(loader)
    next(it)  # warm-up: worker start, first reads
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return batches * batch_size / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2], help="loader worker processes to compare")
    ap.add_argument("--da", nargs="+", default=["64x256", "224x64"], help="DA timed at SIZExBATCH")
    ap.add_argument("--out", default="results/load_bench.json")
    tiny = add_tiny(ap, "16 images of 16 px, 2 batches of 4, no loader workers, DA at 16 px batch 4")
    args = ap.parse_args()
    tiny.apply(args, sizes={"n": 16, "resolution": 16, "batch_size": 4, "batches": 2, "workers": [0],
                            "da": ["16x4"]})
    tmp = Path(tempfile.mkdtemp(prefix="ident3d_load_"))
    store = tmp / "store.zarr"
    # image content does not matter for reading speed: 1 sample per pixel, no denoiser, keeps this quick
    settings = {"resolution": args.resolution, "samples": 1, "denoise": False}
    assert render_store(store, scene="causal3dident", n=args.n, settings=settings, progress=False).ok
    images = store_group(str(store), mode="r")["images"]
    png = tmp / "png"
    png.mkdir()
    for i in range(args.n):
        Image.fromarray(images[i]).save(png / f"{i:06d}.png")
    info = store_info(str(store))
    res: dict = {"n": args.n, "resolution": args.resolution, "batch_size": args.batch_size, "cpus": os.cpu_count()}
    for workers in args.workers:
        ds = StoreBatches(info, args.batch_size, seed=0, in_memory=False)
        store_rate = rate(make_loader(ds, workers), args.batches, args.batch_size)
        png_loader = DataLoader(PngFolder(png), batch_size=args.batch_size, shuffle=True, num_workers=workers,
                                persistent_workers=workers > 0, generator=torch.Generator().manual_seed(0))
        png_rate = rate(_cycle(png_loader), args.batches, args.batch_size)
        res[f"workers_{workers}"] = {"store_img_per_s": store_rate, "png_img_per_s": png_rate,
                                     "ratio": store_rate / png_rate}
        print(f"{workers} workers: store {store_rate:7.1f} img/s | PNG folder {png_rate:7.1f} img/s "
              f"-> {store_rate / png_rate:.2f}x")
    shutil.rmtree(tmp, ignore_errors=True)  # the store and the PNG folder
    norm = Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    for size, batch in (map(int, da.split("x")) for da in args.da):
        x = {"images": torch.randint(0, 256, (batch, size, size, 3), dtype=torch.uint8)}
        for spec in ("crop_large+colour", "rotation", "colour"):
            vm = make_view_maker(spec, norm)
            vm(x, torch.Generator().manual_seed(0))
            t0 = time.perf_counter()
            for s in range(3):
                vm(x, torch.Generator().manual_seed(s))
            ms = (time.perf_counter() - t0) / 3 * 1000
            res[f"da_ms_{spec}_{size}px_batch{batch}"] = ms
            print(f"kornia DA {spec:18s} {size:3d} px, batch {batch}: {ms:7.1f} ms per batch (2 views, CPU)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {args.out}")


def _cycle(loader):
    while True:
        yield from loader


if __name__ == "__main__":
    main()
