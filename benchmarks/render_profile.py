"""Where a rendered image's time goes, stage by stage, for the previous per-image path and the current one.

Per image, in one process with every core for Cycles (Causal3DIdent, ``fast`` preset, each resolution):
  pose (latents -> scene values), scene update (bpy properties, depsgraph), sync (Cycles' scene export: engine
  start, shaders, lights, film, kernels), BVH, path tracing, denoising, save + read-back (Blender writes the PNG
  frame, we decode it), store write (zstd + Zarr, per image of a chunk) and Dask (a warm one-worker cluster's
  time per image above the in-process render + write; a one-worker render now runs in-process and skips it).
Cycles' stages are timed by its own status callbacks (``bpy.app.handlers.render_stats``); denoising is the
difference to the same images rendered with the denoiser off (its status arrives with the last sample).

  before: one ``bpy.ops.render.render`` per image, render data rebuilt each time (the code up to 2026-11-23);
  after:  ``BlenderRenderer.render_batch``: frame sequences of ``SEQUENCE_FRAMES`` in one session with
          persistent render data.
Also: images/s against the sequence length, and the start-up a command pays before its first image.

    python benchmarks/render_profile.py --out results/render_profile.json   # + results/render_profile.png
    python benchmarks/render_profile.py --tiny      # 16 px, 2 images, sequences of 1 and 2 at 16 px (a test)
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

STAGES = ("pose", "scene update", "sync", "BVH", "path tracing", "denoising", "save + read-back", "store write", "Dask")


def _label(text: str, current: str) -> str:
    """The stage a Cycles status line starts."""
    if "Sample " in text:
        return "path tracing"
    if "Building BVH" in text:
        return "BVH"
    if "Finished" in text or text.startswith("Time:") or "Saving" in text:
        return "save + read-back"
    return "sync" if current in ("scene update", "sync", "BVH") else current


class Recorder:
    """Timestamps of frame changes and Cycles status lines, split into stage durations per image."""

    def __init__(self) -> None:
        import bpy

        self.events: list[tuple[float, str]] = []
        bpy.app.handlers.render_stats.append(self._stat)
        bpy.app.handlers.frame_change_pre.insert(0, self._frame)  # before the renderer's own handler poses it
        bpy.app.handlers.frame_change_post.append(self._posed)

    def _stat(self, text: str, *_: object) -> None:
        self.events.append((time.perf_counter(), text.split("|")[-1].strip()))

    def _frame(self, *_: object) -> None:
        self.events.append((time.perf_counter(), "<frame>"))

    def _posed(self, *_: object) -> None:
        self.events.append((time.perf_counter(), "<posed>"))

    def split(self, t0: float, t1: float) -> dict[str, float]:
        """Seconds per stage between t0 and t1: each interval belongs to the stage its opening event starts."""
        out = dict.fromkeys(STAGES, 0.0)
        stage, last = "scene update", t0
        for t, text in self.events:
            if not t0 <= t <= t1:
                continue
            out[stage] += t - last
            last = t
            stage = {"<frame>": "scene update", "<posed>": "sync"}.get(text) or _label(text, stage)
        out[stage] += t1 - last
        return out


def profile_resolution(res: int, n: int, reps: int) -> dict[str, dict[str, float]]:
    """ms per image and stage for the previous and the current path at one resolution (best of ``reps``)."""
    import bpy
    from PIL import Image

    from ident3d.causal import load_scm
    from ident3d.jobs.cluster import cpu_cores
    from ident3d.render.api import plan_render
    from ident3d.render.blender import build_renderer, quiet_stdout
    from ident3d.render.scene import pose
    from ident3d.render.settings import render_settings
    from ident3d.render.worker import cycles_seeds
    from ident3d.store.zarr_io import ChunkData, prepare, write_chunk

    renderer = build_renderer("causal3dident", render_settings("fast", resolution=res).to_dict(), threads=cpu_cores())
    rec = Recorder()
    s = load_scm("causal3dident").sample(n, seed=7)
    seeds = cycles_seeds(7, s.index)
    scene = bpy.context.scene
    out: dict[str, dict[str, float]] = {}

    def before() -> tuple[np.ndarray, dict[str, float]]:
        """The previous path: pose, re-pose, one render operator per image without persistent data, PNG read."""
        scene.render.use_persistent_data = False
        split = dict.fromkeys(STAGES, 0.0)
        imgs = []
        for i in range(n):
            t0 = time.perf_counter()
            p = pose(renderer.scene, s.latents[i].tolist(), int(s.classes[i]))
            t1 = time.perf_counter()
            renderer.apply(p, int(seeds[i]))
            t2 = time.perf_counter()
            with quiet_stdout(True):
                bpy.ops.render.render(write_still=True)
            t3 = time.perf_counter()
            with Image.open(renderer._png) as im:
                imgs.append(np.asarray(im.convert("RGB")))
            t4 = time.perf_counter()
            for k, v in rec.split(t2, t3).items():
                split[k] += v
            split["pose"] += t1 - t0
            split["scene update"] += t2 - t1
            split["save + read-back"] += t4 - t3
        scene.render.use_persistent_data = True
        return np.stack(imgs), split

    def after() -> tuple[np.ndarray, dict[str, float]]:
        """The current path: render_batch (poses first, then frame sequences in one persistent session)."""
        t0 = time.perf_counter()
        imgs = renderer.render_batch(s.latents, s.classes, seeds)
        t1 = time.perf_counter()
        split = rec.split(t0, t1)
        return imgs, split

    for name, fn in (("before", before), ("after", after)):
        fn()  # warm-up: kernels, caches
        best: dict[str, float] | None = None
        for _ in range(reps):
            for denoise in (False, True):
                scene.cycles.use_denoising = denoise
                rec.events.clear()
                t = time.perf_counter()
                imgs, split = fn()
                total = time.perf_counter() - t
                if not denoise:
                    plain = total
                    tracing = split["path tracing"]
            split["path tracing"] = tracing
            split["denoising"] = max(0.0, total - plain)
            split["save + read-back"] += max(0.0, total - sum(split.values()))  # the rest: output handling
            if best is None or total < best["total"]:
                best = {**split, "total": total}
        out[name] = {k: 1000 * v / n for k, v in best.items()}
    # store write: one chunk of these images into a real store (zstd level 9), per image
    with tempfile.TemporaryDirectory() as tmp:  # the attributes and layout a render of these images writes
        plan = plan_render(f"{tmp}/s.zarr", scene="causal3dident", n=n, settings={"resolution": res}, chunk_size=n)
        group = prepare(f"{tmp}/s.zarr", plan.attrs, plan.layout, overwrite=True)
        t = time.perf_counter()
        write_chunk(group, 0, ChunkData(imgs, s.latents, s.classes), {})
        write = 1000 * (time.perf_counter() - t) / n
    for name in out:
        out[name]["store write"] = write
        out[name]["total"] += write
    renderer.close()
    return out


def dask_overhead(res: int, n: int, per_image_ms: float) -> float:
    """ms per image that a warm one-worker Dask cluster (every core for Cycles) adds to in-process rendering."""
    from dask.distributed import LocalCluster

    from ident3d.jobs.cluster import cpu_cores
    from ident3d.render import render_store

    with tempfile.TemporaryDirectory() as tmp, LocalCluster(
            n_workers=1, threads_per_worker=1, dashboard_address=":0", silence_logs=40,
            env={"OMP_NUM_THREADS": str(cpu_cores())}) as cluster:
        kw = {"scene": "causal3dident", "settings": {"resolution": res}, "chunk_size": n, "progress": False,
              "scheduler": cluster.scheduler_address}
        render_store(f"{tmp}/warm.zarr", n=n, seed=1, **kw)  # the worker builds its renderer
        report = render_store(f"{tmp}/s.zarr", n=2 * n, seed=2, **kw)
    return max(0.0, 1000 * report.seconds / (2 * n) - per_image_ms)


def sequence_lengths(res: int, n: int, lengths: list[int]) -> dict[str, float]:
    """img/s of render_batch against frames per sequence (1 = one render operator per image, persistent data)."""
    import ident3d.render.blender as rb
    from ident3d.causal import load_scm
    from ident3d.jobs.cluster import cpu_cores
    from ident3d.render.settings import render_settings
    from ident3d.render.worker import cycles_seeds

    renderer = rb.build_renderer("causal3dident", render_settings("fast", resolution=res).to_dict(),
                                 threads=cpu_cores())
    s = load_scm("causal3dident").sample(n, seed=3)
    seeds = cycles_seeds(3, s.index)
    renderer.render_batch(s.latents[:2], s.classes[:2], seeds[:2])
    default, out = rb.SEQUENCE_FRAMES, {}
    for length in lengths:
        rb.SEQUENCE_FRAMES = length
        t = time.perf_counter()
        renderer.render_batch(s.latents, s.classes, seeds)
        out[str(length)] = n / (time.perf_counter() - t)
    rb.SEQUENCE_FRAMES = default
    renderer.close()
    return out


STARTUP = """
import time; t0 = time.perf_counter()
import os, json, sys
from ident3d.pipelines.cli import COMMANDS; t_cli = time.perf_counter()
import ident3d.render.driver as d; t_render = time.perf_counter()
import bpy; t_bpy = time.perf_counter()
from ident3d.jobs.cluster import cpu_cores, local_cluster
from ident3d.render.blender import build_renderer
from ident3d.render.settings import render_settings
r = build_renderer("causal3dident", render_settings("fast").to_dict(), threads=cpu_cores())
t_build = time.perf_counter()
from ident3d.causal import load_scm
s = load_scm("causal3dident").sample(1, seed=0)
r.render_batch(s.latents, s.classes); t_first = time.perf_counter()
r.render_batch(s.latents, s.classes); t_second = time.perf_counter()
c, cl = local_cluster(1, 1); t_cluster = time.perf_counter()
c.close(); cl.close(); t_close = time.perf_counter()
first = (t_first - t_build) - (t_second - t_first)
print(json.dumps({"import the CLI": t_cli - t0, "import render": t_render - t_cli, "import bpy": t_bpy - t_render,
                  "build the scene": t_build - t_bpy, "first image (kernels, caches)": first,
                  "start a 1-worker LocalCluster": t_cluster - t_second, "stop it": t_close - t_cluster}))
"""


def startup() -> dict[str, float]:
    """Seconds a fresh process spends before and around its first image (a cold `ident3d render`)."""
    code = "if __name__ == '__main__':\n" + "\n".join("    " + line for line in STARTUP.strip().splitlines())
    r = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def figure(results: dict, path: Path) -> None:
    """Stacked bars of ms per image by stage, before and after, at each resolution (log-free, one panel each)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = list(results["resolutions"])
    fig, axes = plt.subplots(1, len(res), figsize=(3.2 * len(res), 4.2))
    colours = plt.get_cmap("tab10").colors
    for ax, r in zip(np.atleast_1d(axes), res, strict=True):
        row = results["resolutions"][r]
        for j, name in enumerate(("before", "after")):
            bottom = 0.0
            for i, stage in enumerate(STAGES):
                v = row[name].get(stage, 0.0)
                ax.bar(j, v, bottom=bottom, color=colours[i % 10], label=stage if (r == res[0] and j == 0) else None)
                bottom += v
            ax.text(j, bottom, f"{bottom:.0f} ms\n{1000 / bottom:.1f} img/s", ha="center", va="bottom", fontsize=8)
        ax.set_xticks([0, 1], ["before", "after"])
        ax.set_title(f"{r} px")
        ax.set_ylim(0, max(sum(row[n].get(s, 0) for s in STAGES) for n in ("before", "after")) * 1.25)
    np.atleast_1d(axes)[0].set_ylabel("ms per image (2 cores, one process)")
    fig.legend(loc="lower center", ncol=5, fontsize=8)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resolutions", type=int, nargs="+", default=[32, 64, 128, 224])
    ap.add_argument("--n", type=int, nargs="+", default=[48, 48, 24, 12], help="images per resolution")
    ap.add_argument("--reps", type=int, default=2, help="repeats per path (the fastest is kept)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    ap.add_argument("--sequence-resolution", type=int, default=64, help="px of the images/s by sequence length")
    ap.add_argument("--sequence-n", type=int, default=64, help="images per sequence-length measurement")
    ap.add_argument("--out", default="results/render_profile.json")
    tiny = add_tiny(ap, "16 px, 2 images, 1 repeat; sequences of 1 and 2 frames over 4 images at 16 px")
    args = ap.parse_args()
    tiny.apply(args, sizes={"resolutions": [16], "n": [2], "reps": 1, "lengths": [1, 2], "sequence_resolution": 16,
                            "sequence_n": 4})
    from ident3d.jobs.cluster import cpu_cores
    from ident3d.render.blender import SEQUENCE_FRAMES

    results: dict = {"command": "python " + " ".join(sys.argv), "machine": {"cores": cpu_cores(),
                     "python": platform.python_version()}, "scene": "causal3dident", "preset": "fast",
                     "sequence_frames": SEQUENCE_FRAMES, "stages": list(STAGES), "resolutions": {}}
    results["startup_s"] = startup()
    print("start-up (s):", {k: round(v, 2) for k, v in results["startup_s"].items()}, flush=True)
    for res, n in zip(args.resolutions, args.n, strict=True):
        row = profile_resolution(res, n, args.reps)
        dask = dask_overhead(res, n, row["after"]["total"])  # the same task machinery before and after
        for name in ("before", "after"):
            row[name]["Dask"] = dask
            row[name]["total"] += dask
        results["resolutions"][str(res)] = row
        for name in ("before", "after"):
            parts = ", ".join(f"{k} {v:.1f}" for k, v in row[name].items() if k != "total" and v >= 0.05)
            print(f"{res:4d} px {name:6s}: {row[name]['total']:7.1f} ms/img ({1000 / row[name]['total']:5.1f} img/s) "
                  f"= {parts}", flush=True)
    key = f"sequence_img_per_s_{args.sequence_resolution}px"
    results[key] = sequence_lengths(args.sequence_resolution, args.sequence_n, args.lengths)
    print(f"img/s by frames per sequence at {args.sequence_resolution} px:",
          {k: round(v, 1) for k, v in results[key].items()}, flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    figure(results, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
