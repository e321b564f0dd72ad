"""Render throughput and memory, side by side in one run (machines here are noisy):

(a) floor: one process re-posing and rendering the scene in a tight loop (no Dask, no store);
(b) ident3d end to end: sampling, rendering, encoding, writing the Zarr store, Dask LocalCluster;
(c) the original approach: a fresh Blender process per batch that builds the scene and writes PNGs.
Also: peak memory of one renderer over many renders, and store size vs the same images as PNGs.

    python benchmarks/render_bench.py --out results/render_bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

from causal import load_scm
from render import render_store


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def floor(scene: str, settings: dict, latents: np.ndarray, classes, seeds) -> float:
    """(a): img/s of one renderer in this process, every core for Cycles."""
    from render.blender import build_renderer

    r = build_renderer(scene, settings)
    r.render_batch(latents[:2], classes[:2], seeds[:2])  # warm-up (kernels, BVH)
    t0 = time.perf_counter()
    r.render_batch(latents, classes, seeds)
    return len(latents) / (time.perf_counter() - t0)


def pipeline(scene: str, res: int, n: int, workers: int, chunk: int, tmp: Path) -> dict:
    """(b): img/s of `ident3d render` end to end, cold (cluster start + Blender start-up included) and warm
    (a running cluster whose workers have rendered before, as in any long run); the store's size."""
    from dask.distributed import LocalCluster

    def run(out: Path, count: int, scheduler: str | None) -> float:
        t0 = time.perf_counter()
        report = render_store(out, scene=scene, n=count, settings={"resolution": res}, chunk_size=chunk,
                              workers=workers, scheduler=scheduler, overwrite=True, progress=False)
        assert report.ok, report.failed
        return time.perf_counter() - t0

    cold = run(tmp / f"cold_{res}.zarr", n, None)
    threads = max(1, (os.cpu_count() or 1) // workers)
    with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=":0", silence_logs=40,
                      env={"OMP_NUM_THREADS": str(threads)}) as cluster:
        run(tmp / f"warmup_{res}.zarr", workers * chunk, cluster.scheduler_address)
        out = tmp / f"bench_{res}.zarr"
        warm = run(out, n, cluster.scheduler_address)
    return {"img_per_s": n / warm, "wall_s": warm, "cold_img_per_s": n / cold, "cold_wall_s": cold,
            "store_bytes": dir_bytes(out / "images")}


ORIGINAL_BATCH = """
import sys, numpy as np
from render.blender import build_renderer
from PIL import Image
scene, res, start, stop, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
from causal import load_scm
from render.settings import render_settings
s = load_scm(scene).sample(stop - start, seed=0, start=start)
r = build_renderer(scene, render_settings("fast", resolution=res).to_dict())
classes = s.classes if s.classes is not None else np.zeros(len(s), int)
for i in range(len(s)):
    img = r.render(s.latents[i].tolist(), int(classes[i]), start + i)
    Image.fromarray(img).save(f"{out}/{start + i:06d}.png")
"""


def original(scene: str, res: int, n: int, batch: int, tmp: Path) -> dict:
    """(c): img/s of one fresh Blender process per batch writing PNG files (batches run one after another)."""
    out = tmp / f"png_{res}"
    out.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        subprocess.run([sys.executable, "-c", ORIGINAL_BATCH, scene, str(res), str(start),
                        str(min(n, start + batch)), str(out)], check=True)
    wall = time.perf_counter() - t0
    return {"img_per_s": n / wall, "wall_s": wall, "batch": batch, "png_bytes": dir_bytes(out)}


def memory(scene: str, settings: dict, renders: int) -> dict:
    """RSS of one renderer process after 10% of the renders and at the end (growth must stay < 10%)."""
    code = f"""
import json, numpy as np, psutil
from causal import load_scm
from render.blender import build_renderer
s = load_scm({scene!r}).sample({renders}, seed=1)
classes = s.classes if s.classes is not None else np.zeros(len(s), int)
r = build_renderer({scene!r}, {settings!r})
proc, rss = psutil.Process(), []
for i in range({renders}):
    r.render(s.latents[i].tolist(), int(classes[i]), i)
    if (i + 1) % max(1, {renders} // 10) == 0:
        rss.append(proc.memory_info().rss)
print(json.dumps(rss))
"""
    rss = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                    text=True).stdout.strip().splitlines()[-1])
    return {"renders": renders, "rss_mb": [round(r / 2**20, 1) for r in rss],
            "growth_after_first_10pct": rss[-1] / rss[0] - 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", default="causal3dident")
    ap.add_argument("--resolutions", type=int, nargs="+", default=[64, 224])
    ap.add_argument("--n", type=int, nargs="+", default=[256, 64], help="images per resolution")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--chunk-size", type=int, default=16)
    ap.add_argument("--original-batch", type=int, default=16, help="images per fresh Blender process in (c)")
    ap.add_argument("--memory-renders", type=int, default=1000)
    ap.add_argument("--out", default="results/render_bench.json")
    args = ap.parse_args()
    from render.settings import render_settings

    results: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                 "ram_gb": round(psutil.virtual_memory().total / 2**30, 1)},
                     "preset": "fast", "scene": args.scene, "workers": args.workers,
                     "chunk_size": args.chunk_size, "resolutions": {}}
    tmp = Path(tempfile.mkdtemp(prefix="ident3d_bench_"))
    try:
        for res, n in zip(args.resolutions, args.n * len(args.resolutions), strict=False):
            settings = render_settings("fast", resolution=res).to_dict()
            s = load_scm(args.scene).sample(n, seed=0)
            classes = s.classes if s.classes is not None else np.zeros(n, int)
            from render.driver import cycles_seeds

            a = floor(args.scene, settings, s.latents, classes, cycles_seeds(0, s.index))
            b = pipeline(args.scene, res, n, args.workers, args.chunk_size, tmp)
            c = original(args.scene, res, n, args.original_batch, tmp)
            row = {"n": n, "floor_img_per_s": a, "pipeline": b, "original": c,
                   "pipeline_vs_floor": b["img_per_s"] / a, "pipeline_vs_original": b["img_per_s"] / c["img_per_s"],
                   "store_vs_png_bytes": b["store_bytes"] / c["png_bytes"]}
            results["resolutions"][str(res)] = row
            print(f"{res:4d} px, n={n}: (a) floor {a:6.1f} img/s | (b) pipeline {b['img_per_s']:6.1f} img/s "
                  f"= {row['pipeline_vs_floor']:.0%} of floor (cold start: {b['cold_img_per_s']:.1f} img/s) | "
                  f"(c) original {c['img_per_s']:6.1f} img/s "
                  f"-> (b)/(c) = {row['pipeline_vs_original']:.2f}x | store {b['store_bytes'] / 1e6:.2f} MB "
                  f"vs PNG {c['png_bytes'] / 1e6:.2f} MB ({row['store_vs_png_bytes']:.2f}x)")
        if args.memory_renders:
            m = memory(args.scene, render_settings("fast").to_dict(), args.memory_renders)
            results["memory"] = m
            print(f"memory over {m['renders']} renders at 64 px: RSS {m['rss_mb'][0]} -> {m['rss_mb'][-1]} MB "
                  f"({m['growth_after_first_10pct']:+.1%} after the first 10%)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
