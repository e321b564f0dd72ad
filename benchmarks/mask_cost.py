"""What a multi-object store's masks cost relative to the beauty pass: render time of the same multi3dident latents
with the object index pass (and the compositor's EXR per frame it needs) and without it, in fresh processes
interleaved in one run (best of ``--repeats`` each: noise on a shared machine only slows runs down); and, given a
rendered store, the bytes its masks take on disk next to its images.

    python benchmarks/mask_cost.py --store runs/multi_object/stores/train.zarr --out results/mask_cost.json
    python benchmarks/mask_cost.py --tiny      # 2 images of 16 px each way, once, + a 4-image store's bytes (a test)
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
RUN = """
import json, sys, time
from ident3d.causal import load_scm
from ident3d.render.blender import build_renderer
n, res, masks = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
rows = load_scm("multi3dident_independent").sample(n, seed=5)
r = build_renderer("multi3dident", {"resolution": res, "samples": 16, "denoise": True, "max_bounces": 0,
                                    "denoise_prefilter": "FAST"}, threads=int(sys.argv[4]), masks=masks)
r.render_batch_masks(rows.latents[:8])  # warm-up: the first sequence sets up the session
t = time.perf_counter()
images, m = r.render_batch_masks(rows.latents)
print(json.dumps({"seconds": time.perf_counter() - t, "images": n, "masks": m is not None}))
"""


def render_seconds(n: int, resolution: int, masks: bool, threads: int) -> float:
    """Seconds to render ``n`` images (after a warm-up batch) in a fresh process, with or without the mask pass."""
    out = subprocess.run([sys.executable, "-c", RUN, str(n), str(resolution), "1" if masks else "0", str(threads)],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["masks"] == masks
    return float(got["seconds"])


def disk_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder``."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def store_bytes(store: Path) -> dict[str, float]:
    """On-disk bytes of a store's images, masks, visibility and present arrays, and masks / images."""
    sizes = {name: disk_bytes(store / name) for name in ("images", "masks", "visibility", "present")}
    return {**sizes, "masks_vs_images": sizes["masks"] / sizes["images"]}


def figure(result: dict, path: Path) -> None:
    """Bars: ms per image with and without masks per resolution."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = list(result["resolutions"])
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for j, key in enumerate(("without_masks", "with_masks")):
        ax.bar([i + 0.4 * j for i in range(len(res))], [result["resolutions"][r][key]["ms_per_image"] for r in res],
               width=0.4, label=key.replace("_", " "))
    ax.set_xticks([i + 0.2 for i in range(len(res))], [f"{r} px" for r in res])
    ax.set_ylabel("ms per image")
    ax.set_title("multi3dident: the object index pass's cost")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def tiny_store(path: Path) -> Path:
    """A 4-image, 16 px multi3dident store (masks included) for ``--tiny``."""
    from ident3d.render import render_store

    assert render_store(path, scene="multi3dident", scm="multi3dident_independent", n=4,
                        settings={"resolution": 16, "samples": 2}, workers=1, threads=1, progress=False).ok
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--resolutions", default="64,128")
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--store", help="a rendered multi-object store: its masks' bytes on disk vs its images'")
    p.add_argument("--out", default="results/mask_cost.json")
    tiny = add_tiny(p, "2 images of 16 px with and without masks, once, 1 thread; a 4-image store's bytes")
    args = p.parse_args()
    folder = tiny.apply(args, sizes={"resolutions": "16", "n": 2, "repeats": 1, "threads": 1},
                        inputs=not args.store)
    if folder and not args.store:
        args.store = str(tiny_store(folder / "multi.zarr"))
    result: dict = {"command": "python benchmarks/mask_cost.py " + " ".join(sys.argv[1:]),
                    "revision": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                               cwd=ROOT).stdout.strip(),
                    "machine": {"python": platform.python_version(), "threads": args.threads},
                    "n": args.n, "resolutions": {}}
    for res in map(int, args.resolutions.split(",")):
        runs: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.repeats):
            for masks in (False, True):  # interleaved: a slow spell of the machine hits both
                runs[masks].append(render_seconds(args.n, res, masks, args.threads))
        row = {key: {"seconds": min(runs[m]), "ms_per_image": 1000 * min(runs[m]) / args.n, "runs": runs[m]}
               for key, m in (("without_masks", False), ("with_masks", True))}
        row["with_vs_without"] = row["with_masks"]["seconds"] / row["without_masks"]["seconds"]
        result["resolutions"][str(res)] = row
        print(f"{res} px: {row['without_masks']['ms_per_image']:.1f} ms/img without masks, "
              f"{row['with_masks']['ms_per_image']:.1f} with ({row['with_vs_without']:.3f}x)", flush=True)
    if args.store:
        result["store"] = {"path": Path(args.store).name, **store_bytes(Path(args.store))}
        print(f"store: masks take {result['store']['masks_vs_images']:.1%} of the images' bytes")
    out = Path(args.out)
    out.write_text(json.dumps(result, indent=2) + "\n")
    figure(result, out.with_suffix(".png"))


if __name__ == "__main__":
    main()
