"""The `original` preset (224 px, 512 samples, denoiser) next to the default `fast` preset, with PSNR.

Renders the same latents (same seed) with both presets through `render.render_store`, and the fast
preset at 224 px as well, then writes a side-by-side figure and the PSNRs:

    python benchmarks/preset_compare.py --n 4 --out docs/preset_compare.png --json results/preset_compare.json
    python benchmarks/preset_compare.py --tiny      # 1 image, original and fast_224 at 32 px, fast at 16 (a test)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script
from imaging import image_grid, psnr  # benchmarks/imaging.py, beside this script
from PIL import Image

from ident3d.render import render_store
from ident3d.store.zarr_io import store_group

TINY = {"original": {"resolution": 32, "samples": 8}, "fast_224": {"resolution": 32}, "fast": {"resolution": 16}}


def downsample(images: np.ndarray, size: int) -> np.ndarray:
    """Box-filter images (N, H, W, 3) down to size x size (how a 224 px render compares with a 64 px one)."""
    return np.stack([np.asarray(Image.fromarray(im).resize((size, size), Image.BOX)) for im in images])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", default="causal3dident")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="docs/preset_compare.png", help="the figure")
    ap.add_argument("--json", default="results/preset_compare.json", help="the figures as JSON")
    tiny = add_tiny(ap, "1 image; original (8 samples) and fast_224 at 32 px, fast at 16 px")
    args = ap.parse_args()
    tiny.apply(args, sizes={"n": 1}, paths=("out", "json"))
    tmp = Path(tempfile.mkdtemp(prefix="ident3d_presets_"))
    runs = {"original": ("original", None), "fast_224": ("fast", {"resolution": 224}), "fast": ("fast", None)}
    if args.tiny:
        runs = {name: (preset, {**(settings or {}), **TINY[name]}) for name, (preset, settings) in runs.items()}
    images, seconds = {}, {}
    for name, (preset, settings) in runs.items():
        store = tmp / f"{name}.zarr"
        t0 = time.perf_counter()
        report = render_store(store, scene=args.scene, n=args.n, seed=args.seed, preset=preset, settings=settings,
                              workers=1, chunk_size=args.n, progress=False)
        assert report.ok, (name, report.failed)
        seconds[name] = (time.perf_counter() - t0) / args.n
        images[name] = store_group(str(store), mode="r")["images"][:]
    shutil.rmtree(tmp, ignore_errors=True)
    orig, fast, fast224 = images["original"], images["fast"], images["fast_224"]
    res = {
        "n": args.n, "scene": args.scene, "seconds_per_image_incl_startup": seconds,
        "psnr_fast224_vs_original_224px": np.mean([psnr(a, b) for a, b in zip(fast224, orig, strict=True)]),
        "psnr_fast64_vs_original_downsampled_64px": np.mean(
            [psnr(a, b) for a, b in zip(fast, downsample(orig, fast.shape[1]), strict=True)]),
    }
    res["command"] = "python benchmarks/preset_compare.py " + " ".join(sys.argv[1:])
    captions = {1: [f"PSNR {psnr(im, orig[i]):.1f} dB vs original" for i, im in enumerate(fast224)],
                2: [f"PSNR {psnr(im, small):.1f} dB vs original at {fast.shape[1]} px"
                    for im, small in zip(fast, downsample(orig, fast.shape[1]), strict=True)]}
    rows = [("original: 224 px, 512 spp", orig), ("fast preset at 224 px (16 spp)", fast224),
            ("fast preset (default): 64 px", fast)]
    image_grid(args.out, rows, captions, f"{args.scene}: original vs fast preset (same latents and seeds)", cell=2.4)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    print(f"wrote {args.out} and {args.json}")


if __name__ == "__main__":
    main()
