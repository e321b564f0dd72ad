"""Render throughput and start-up, the current code side by side with a previous revision in one run.

For each resolution (Causal3DIdent, ``fast`` preset), in fresh processes so every number includes what a user's
command pays:
  - the rendering rate (images / seconds of the render phase) of every split of the cores into worker processes x
    Cycles threads, of the default split, and of the previous revision's default (run from a git worktree of
    ``--baseline`` with the same arguments);
  - the whole command's wall time (start-up included) for 32 and 256 images at 64 px, current vs previous;
  - how long a command joining an already running cluster (``--scheduler``) takes to start rendering;
  - one renderer's memory over many images (it must stay flat).

    python benchmarks/render_bench.py --out results/render_bench.json   # + results/render_bench.png
    python benchmarks/render_bench.py --tiny      # 16 px, 2 images, one core's split, once each (a test; it skips
                                                  # the whole commands and the warm cluster: 25 s of start-ups)

The previous revision is imported the way it names its packages: ``ident3d.render`` where it has the ``ident3d``
package, else ``render`` (the layout before it, as in the default baseline); importing ``ident3d`` there would load
this checkout's editable install and compare the current code with itself.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script
from goldens import import_root  # benchmarks/goldens.py: a checkout run as ident3d

ROOT = Path(__file__).resolve().parents[1]
RUN = """
import json, sys, time
t0 = time.perf_counter()
from ident3d.render import render_store
kw = json.loads(sys.argv[1])
if __name__ == "__main__":
    r = render_store(**kw)
    assert r.ok, r.failed
    print(json.dumps({"seconds": r.seconds, "images": r.images, "wall": time.perf_counter() - t0}))
"""


@functools.cache
def python_env(code_root: Path) -> dict[str, str]:
    """The environment that runs the code under ``code_root`` as ``ident3d``: its import root of links first on
    PYTHONPATH (``goldens.import_root``; the installed checkout's editable hook would win otherwise)."""
    root = import_root(code_root.resolve(), Path(tempfile.mkdtemp(prefix="render_bench_")))
    return {**os.environ, "PYTHONSAFEPATH": "1", "PYTHONPATH": str(root)}


def packages(code_root: Path) -> str:
    """The prefix of the project's packages in the code at ``code_root``: ``ident3d.``, or nothing for a revision
    from before the ``ident3d`` package (its ``render``, ``pipelines``, ... were top-level)."""
    return "ident3d." if (code_root / "ident3d").is_dir() else ""


def render_rate(code_root: Path, out: Path, **kw: object) -> dict[str, float]:
    """render_store(**kw) in a fresh process of the code at ``code_root``: img/s of the render phase, its seconds
    and the process's wall time."""
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    code = RUN.replace("ident3d.", packages(code_root))
    r = subprocess.run([sys.executable, "-c", code, json.dumps({"out": str(out), "progress": False, **kw})],
                       env=python_env(code_root), cwd=code_root, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t
    got = json.loads(r.stdout.strip().splitlines()[-1])
    return {"img_per_s": got["images"] / got["seconds"], "render_s": got["seconds"], "process_wall_s": wall}


def command_wall(code_root: Path, out: Path, *args: str) -> float:
    """Seconds of ``ident3d render ARGS`` (as ``python -m pipelines.cli``) with the code at ``code_root``."""
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", f"{packages(code_root)}pipelines.cli", "render", "--out", str(out),
                    "--no-progress", *args],
                   env=python_env(code_root), cwd=code_root, check=True, capture_output=True, text=True)
    return time.perf_counter() - t


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    """The run with the highest rate (noise on a shared machine only slows runs down)."""
    return max(runs, key=lambda r: r["img_per_s"])


def splits(cores: int) -> list[tuple[int, int]]:
    """Every (workers, threads per worker) with workers x threads = cores."""
    return [(w, cores // w) for w in range(1, cores + 1) if cores % w == 0]


def scheduler_start(code_root: Path, tmp: Path, repeats: int) -> list[float]:
    """Seconds from launching ``ident3d render --scheduler ADDR`` (a warm cluster whose worker has rendered this
    scene before) to the moment its first chunk starts computing on the worker (Dask's task stream)."""
    from dask.distributed import Client, LocalCluster

    from ident3d.jobs.cluster import cpu_cores

    args = ["--scene", "causal3dident", "--n", "8", "--chunk-size", "8", "--seed"]
    out = []
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0", silence_logs=40,
                      env={"OMP_NUM_THREADS": str(cpu_cores())}) as cluster, Client(cluster) as client:
        client.get_task_stream()  # the first call registers the scheduler's task-stream plugin
        command_wall(code_root, tmp / "warm.zarr", *args, "0", "--scheduler", cluster.scheduler_address)
        for i in range(repeats):
            t0 = time.time()
            command_wall(code_root, tmp / f"s{i}.zarr", *args, str(i + 1), "--scheduler", cluster.scheduler_address)
            starts = [s["start"] for task in client.get_task_stream(start=t0) for s in task["startstops"]
                      if s["action"] == "compute"]
            out.append(min(starts) - t0)
    return out


MEMORY = """
import json, numpy as np, psutil
from ident3d.causal import load_scm
from ident3d.render.blender import build_renderer
n, chunk = {renders}, 64
s = load_scm("causal3dident").sample(n, seed=1)
r = build_renderer("causal3dident", {settings!r})
proc, rss = psutil.Process(), []
for start in range(0, n, chunk):
    r.render_batch(s.latents[start:start + chunk], s.classes[start:start + chunk])
    rss.append(proc.memory_info().rss)
print(json.dumps(rss))
"""


def memory(renders: int) -> dict:
    """RSS of one renderer process after each chunk of 64 renders (growth after the first chunk must stay small)."""
    from ident3d.render.settings import render_settings

    code = MEMORY.format(renders=renders, settings=render_settings("fast").to_dict())
    rss = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                                    cwd=ROOT).stdout.strip().splitlines()[-1])
    return {"renders": renders, "rss_mb": [round(r / 2**20, 1) for r in rss],
            "growth_after_first_chunk": rss[-1] / rss[0] - 1}


def worktree(rev: str, tmp: Path) -> Path:
    """A checkout of ``rev`` (the previous code path) next to this one."""
    path = tmp / f"baseline_{rev[:12]}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path), rev], check=True,
                   capture_output=True)
    return path


def figure(results: dict, path: Path) -> None:
    """Rates per split and resolution, current vs previous default, and command wall times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = list(results["resolutions"])
    fig, axes = plt.subplots(1, len(res) + 1, figsize=(4 * (len(res) + 1), 3.6))
    for ax, r in zip(axes, res, strict=False):
        row = results["resolutions"][r]
        labels = [f"{k}" for k in row["splits"]] + ["default", "previous\ndefault"]
        values = [v["img_per_s"] for v in row["splits"].values()] + [row["default"]["img_per_s"],
                                                                    row["previous_default"]["img_per_s"]]
        ax.bar(range(len(values)), values, color=["tab:blue"] * len(row["splits"]) + ["tab:green", "tab:grey"])
        ax.set_xticks(range(len(values)), labels, fontsize=8)
        ax.set_title(f"{r} px: img/s (workers x threads)")
    ax = axes[-1]
    cmds = results["commands"]
    names = list(cmds)
    ax.bar([i - 0.2 for i in range(len(names))], [cmds[n]["previous_s"] for n in names], 0.4, label="previous",
           color="tab:grey")
    ax.bar([i + 0.2 for i in range(len(names))], [cmds[n]["current_s"] for n in names], 0.4, label="current",
           color="tab:green")
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_title("whole command, s (start-up included)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resolutions", type=int, nargs="+", default=[64, 128, 224])
    ap.add_argument("--n", type=int, nargs="+", default=[256, 128, 64], help="images per resolution")
    ap.add_argument("--baseline", default="1462302", help="git revision of the previous code path")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each measurement (the fastest is kept)")
    ap.add_argument("--memory-renders", type=int, default=1024)
    ap.add_argument("--commands", type=int, nargs="*", default=[32, 256],
                    help="images of the timed whole commands (none: skip them)")
    ap.add_argument("--scheduler-repeats", type=int, help="commands timed on a warm cluster (default: --repeats + 1; "
                    "0 skips the part)")
    ap.add_argument("--cores", type=int, help="cores to split into workers x threads (default: this process's)")
    ap.add_argument("--out", default="results/render_bench.json")
    tiny = add_tiny(ap, "16 px, 2 images, 1 core, one repeat, 2 renders for the memory; no whole commands and no "
                        "warm cluster")
    args = ap.parse_args()
    tiny.apply(args, sizes={"resolutions": [16], "n": [2], "repeats": 1, "memory_renders": 2, "commands": [],
                            "scheduler_repeats": 0, "cores": 1})
    from ident3d.jobs.cluster import cpu_cores
    from ident3d.render.driver import default_workers

    cores = args.cores or cpu_cores()
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    results: dict = {"command": "python " + " ".join(sys.argv), "revision": rev, "baseline": args.baseline,
                     "machine": {"cores": cores, "python": platform.python_version(),
                                 "ram_gb": round(psutil.virtual_memory().total / 2**30, 1)},
                     "scene": "causal3dident", "preset": "fast", "resolutions": {}, "commands": {}}
    tmp = Path(tempfile.mkdtemp(prefix="ident3d_bench_"))
    base = worktree(args.baseline, tmp)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after each part: a later failure keeps what was measured
        out.write_text(json.dumps(results, indent=2) + "\n")

    try:
        for res, n in zip(args.resolutions, args.n, strict=True):
            chunk = max(1, n // 4)  # four chunks, so every split has work for each worker
            kw = {"scene": "causal3dident", "n": n, "settings": {"resolution": res}, "chunk_size": chunk}
            row: dict = {"n": n, "chunk_size": chunk, "splits": {}}
            for w, t in splits(cores):
                row["splits"][f"{w}x{t}"] = best([render_rate(ROOT, tmp / "s.zarr", workers=w, threads=t, **kw)
                                                  for _ in range(args.repeats)])
            row["default"] = best([render_rate(ROOT, tmp / "s.zarr", **kw) for _ in range(args.repeats)])
            row["default_split"] = f"{default_workers(res)}x{cores // default_workers(res)}"
            row["previous_default"] = best([render_rate(base, tmp / "s.zarr", **kw) for _ in range(args.repeats)])
            top = max(v["img_per_s"] for v in row["splits"].values())
            row["default_vs_best_split"] = row["default"]["img_per_s"] / top
            row["default_is_the_best_split"] = row["default_split"] == max(
                row["splits"], key=lambda k: row["splits"][k]["img_per_s"])  # then the ratio is run-to-run noise
            row["speedup_vs_previous"] = row["default"]["img_per_s"] / row["previous_default"]["img_per_s"]
            results["resolutions"][str(res)] = row
            rates = ", ".join(f"{k} {v['img_per_s']:.2f}" for k, v in row["splits"].items())
            print(f"{res:4d} px, n={n}: splits {rates} img/s | default ({row['default_split']}) "
                  f"{row['default']['img_per_s']:.2f} = {row['default_vs_best_split']:.0%} of the best | "
                  f"previous default {row['previous_default']['img_per_s']:.2f} -> "
                  f"{row['speedup_vs_previous']:.2f}x", flush=True)
            save()
        for count in args.commands:
            cmd = ("--scene", "causal3dident", "--n", str(count))
            cur = min(command_wall(ROOT, tmp / "c.zarr", *cmd) for _ in range(args.repeats))
            prev = min(command_wall(base, tmp / "c.zarr", *cmd) for _ in range(args.repeats))
            results["commands"][f"{count} img, 64 px"] = {"current_s": cur, "previous_s": prev}
            print(f"`ident3d render --n {count}` (64 px): {cur:.1f} s, previous {prev:.1f} s", flush=True)
            save()
        repeats = args.repeats + 1 if args.scheduler_repeats is None else args.scheduler_repeats
        if repeats:
            starts = scheduler_start(ROOT, tmp, repeats)
            results["scheduler_start_s"] = starts
            print(f"--scheduler on a warm cluster: first chunk computing {min(starts):.2f}-{max(starts):.2f} s after "
                  "the command was launched", flush=True)
        if args.memory_renders:
            m = memory(args.memory_renders)
            results["memory"] = m
            print(f"memory over {m['renders']} renders at 64 px: RSS {m['rss_mb'][0]} -> {m['rss_mb'][-1]} MB "
                  f"({m['growth_after_first_chunk']:+.1%} after the first chunk)", flush=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    save()
    figure(results, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
