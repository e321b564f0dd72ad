"""The `original` preset (224 px, 512 samples, denoiser) next to the default `fast` preset, with PSNR.

Renders the same latents (same seed) with both presets through `render.render_store`, and the fast
preset at 224 px as well, then writes a side-by-side figure and the PSNRs:

    python benchmarks/preset_compare.py --n 4 --out results/preset_compare.png
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr
from PIL import Image

from render import render_store


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255.0**2 / mse)) if mse > 0 else float("inf")


def downsample(images: np.ndarray, size: int) -> np.ndarray:
    return np.stack([np.asarray(Image.fromarray(im).resize((size, size), Image.BOX)) for im in images])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", default="causal3dident")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/preset_compare.png")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ident3d_presets_"))
    runs = {"original": ("original", None), "fast_224": ("fast", {"resolution": 224}), "fast": ("fast", None)}
    images, seconds = {}, {}
    for name, (preset, settings) in runs.items():
        store = tmp / f"{name}.zarr"
        t0 = time.perf_counter()
        report = render_store(store, scene=args.scene, n=args.n, seed=args.seed, preset=preset, settings=settings,
                              workers=1, chunk_size=args.n, progress=False)
        assert report.ok, (name, report.failed)
        seconds[name] = (time.perf_counter() - t0) / args.n
        images[name] = zarr.open_group(str(store), mode="r")["images"][:]
    orig, fast, fast224 = images["original"], images["fast"], images["fast_224"]
    res = {
        "n": args.n, "scene": args.scene, "seconds_per_image_incl_startup": seconds,
        "psnr_fast224_vs_original_224px": np.mean([psnr(a, b) for a, b in zip(fast224, orig, strict=True)]),
        "psnr_fast64_vs_original_downsampled_64px": np.mean(
            [psnr(a, b) for a, b in zip(fast, downsample(orig, fast.shape[1]), strict=True)]),
    }
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, args.n, figsize=(2.4 * args.n, 7.6), squeeze=False)
    rows = [("original: 224 px, 512 spp", orig), ("fast preset at 224 px (16 spp)", fast224),
            ("fast preset (default): 64 px", fast)]
    for r, (title, imgs) in enumerate(rows):
        for i, im in enumerate(imgs):
            ax = axes[r, i]
            ax.imshow(im)
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_ylabel(title, fontsize=8)
            if r == 1:
                ax.set_xlabel(f"PSNR {psnr(im, orig[i]):.1f} dB vs original", fontsize=8)
            if r == 2:
                ax.set_xlabel(f"PSNR {psnr(im, downsample(orig[i:i + 1], im.shape[0])[0]):.1f} dB vs original at 64 px",
                             fontsize=8)
    fig.suptitle(f"{args.scene}: original vs fast preset (same latents and seeds)", fontsize=10)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    Path(args.out).with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
