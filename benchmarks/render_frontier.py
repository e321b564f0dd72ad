"""Render quality against time (issue 36 §1): which Cycles light-transport settings buy the most quality per ms.

At each resolution a fixed set of Causal3DIdent latents (seed 0, the same rows at every resolution) is rendered with
the ``original`` preset's light transport (512 samples, OIDN with the ACCURATE prefilter: the reference, cached per
resolution under the temp dir) and with every configuration of a sweep, each in a fresh process with every core for
Cycles: samples (1-128) x denoiser (off; OIDN with prefilter NONE, FAST, ACCURATE); adaptive sampling (noise
threshold, min samples); the light tree; OIDN's quality; the pixel filter width; a tile smaller than the image. Every
point, like both presets, traces direct light only (max_bounces 0). Per point: ms per image of the render phase (the
fastest of ``--repeats`` batches after an untimed one-image warm-up; process and scene start-up excluded), PSNR
(RGB, pooled over the images) and SSIM (benchmarks/ssim.py) against the reference. Per resolution: the Pareto
frontier of ms/img vs SSIM, and ``derive_fast``: the fastest point that scores no lower than today's ``fast`` preset
(a labelled point at every resolution) in both PSNR and SSIM.

    python benchmarks/render_frontier.py --out results/render_frontier.json   # + results/render_frontier.png
    python benchmarks/render_frontier.py --tiny      # 32 px, 2 images, 3 points (a test)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script

from _tiny import add_tiny  # noqa: E402  (benchmarks/_tiny.py)
from imaging import psnr  # noqa: E402  (benchmarks/imaging.py)
from render_bench import ROOT, best, python_env  # noqa: E402  (benchmarks/render_bench.py)
from ssim import ssim  # noqa: E402  (benchmarks/ssim.py)

from ident3d.render.settings import RenderSettings, render_settings  # noqa: E402

SCENE = "causal3dident"
SEED = 0
# the light-transport fields a point sets (resolution, threads, device and hue mode are the run's)
KNOBS = ("samples", "denoise", "denoise_prefilter", "denoise_quality", "adaptive_sampling", "adaptive_threshold",
         "adaptive_min_samples", "light_tree", "filter_width", "tile_size")
SAMPLES = (1, 2, 4, 8, 16, 32, 64, 128)
DENOISERS = {"no denoiser": {"denoise": False}, "OIDN NONE": {"denoise_prefilter": "NONE"}, "OIDN FAST": {},
             "OIDN ACCURATE": {"denoise_prefilter": "ACCURATE"}}  # over the fast preset (OIDN, FAST prefilter)
SAMPLE_ORDER_MARGIN = 0.01  # SSIM by which fewer samples may beat more (same settings otherwise): see sample_order
CHILD = """
import json, sys, time
import numpy as np
from ident3d.render.blender import build_renderer
job = json.loads(sys.argv[1])
rows = np.load(job["latents"])
lat, cls, seeds = rows["latents"], rows["classes"], rows["seeds"]
r = build_renderer(job["scene"], job["settings"], threads=job["threads"])
if job["warmup"]:
    r.render_batch(lat[:1], cls[:1], seeds[:1])  # kernels, caches: not timed
runs, images, identical = [], None, True
for _ in range(job["repeats"]):
    t = time.perf_counter()
    out = r.render_batch(lat, cls, seeds)
    s = time.perf_counter() - t
    runs.append({"img_per_s": len(lat) / s, "render_s": s})
    identical = identical and (images is None or bool(np.array_equal(images, out)))
    images = out
np.save(job["images"], images)
r.close()
print(json.dumps({"runs": runs, "repeats_identical": identical}))
"""


def default_n(resolution: int) -> int:
    """Images per resolution: 16 up to 64 px, 8 up to 128 px, else 4 (the reference's 512 samples dominate)."""
    return 16 if resolution <= 64 else 8 if resolution <= 128 else 4


def light_transport(settings: RenderSettings) -> dict[str, Any]:
    """The swept fields of a settings value (what a point records and ``derive_fast`` returns)."""
    return {k: getattr(settings, k) for k in KNOBS}


def point(label: str, family: str, **overrides: Any) -> dict[str, Any]:
    """One configuration: a label, its family (the figure's colour) and its fields over the fast preset."""
    return {"label": label, "family": family, "overrides": overrides}


def configurations(resolution: int, tiny: bool = False) -> list[dict[str, Any]]:
    """The sweep at one resolution (today's fast, 16 spp OIDN FAST, is one of them); ``tiny``: three points, a pair
    differing only in samples among them (no denoiser: its noise falls as 1/samples, so the pair's order is sure)."""
    if tiny:
        return [point("8 spp, no denoiser", "samples x denoiser", samples=8, denoise=False),
                point("32 spp, no denoiser", "samples x denoiser", samples=32, denoise=False),
                point("16 spp, OIDN FAST", "samples x denoiser", samples=16)]
    out = [point(f"{s} spp, {name}", "samples x denoiser", samples=s, **den)
           for name, den in DENOISERS.items() for s in SAMPLES]
    for s in (32, 128):
        out += [point(f"{s} spp max, adaptive {t:g}, OIDN FAST", "adaptive sampling", samples=s,
                      adaptive_sampling=True, adaptive_threshold=t) for t in (0.01, 0.03, 0.1)]
    out += [point(f"128 spp max, adaptive {t:g} min 4, OIDN FAST", "adaptive sampling", samples=128,
                  adaptive_sampling=True, adaptive_threshold=t, adaptive_min_samples=4) for t in (0.03, 0.1)]
    out += [point(f"{s} spp, OIDN FAST, light tree", "light tree", samples=s, light_tree=True) for s in (4, 16, 64)]
    out += [point(f"{s} spp, OIDN FAST {q}", "OIDN quality", samples=s, denoise_quality=q)
            for q in ("BALANCED", "FAST") for s in (8, 16)]
    out += [point(f"16 spp, OIDN FAST, filter {w:g} px", "filter width", samples=16, filter_width=w)
            for w in (1.0, 2.0)]
    if resolution > 64:  # a tile splits only an image larger than itself
        out.append(point("16 spp, OIDN FAST, 64 px tiles", "tile size", samples=16, tile_size=64))
    return out


def render_point(settings: RenderSettings, rows: Path, images: Path, threads: int, repeats: int,
                 warmup: bool = True) -> tuple[np.ndarray, dict[str, Any]]:
    """Render the rows with ``settings`` in a fresh process: its images and the fastest batch's ms/img and img/s
    (render_bench.best over the repeats; start-up and the warm-up image are not timed)."""
    job = {"scene": SCENE, "settings": settings.to_dict(), "latents": str(rows), "images": str(images),
           "threads": threads, "repeats": repeats, "warmup": warmup}
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(job)], env=python_env(ROOT), cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"render_frontier: rendering {light_transport(settings)} failed:\n{r.stderr[-3000:]}")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    n = len(np.load(rows)["seeds"])
    fastest = best(got["runs"])
    return np.load(images), {"ms_per_img": 1000 * fastest["render_s"] / n, "img_per_s": fastest["img_per_s"],
                             "runs_ms_per_img": [1000 * run["render_s"] / n for run in got["runs"]],
                             "repeats_identical": got["repeats_identical"]}


def score(images: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """PSNR (dB, RGB, the MSE pooled over every image; inf where all are identical) and mean SSIM vs the reference."""
    return {"psnr": psnr(images, reference), "ssim": ssim(images, reference)}


def write_rows(path: Path, n: int, seed: int) -> None:
    """The fixed rows: the first ``n`` latents, classes and Cycles seeds of the scene's SCM sampled with ``seed``."""
    from ident3d.causal import load_scm
    from ident3d.render.worker import cycles_seeds

    s = load_scm(SCENE).sample(n, seed=seed)
    np.savez(path, latents=s.latents, classes=s.classes, seeds=cycles_seeds(seed, s.index))


def cache_key(settings: RenderSettings, rows: Path) -> str:
    """What the reference images depend on: settings, rows, Blender's version and the renderer's code."""
    h = hashlib.sha256(json.dumps([SCENE, settings.to_dict(), metadata.version("bpy")]).encode())
    h.update(Path(rows).read_bytes())
    for name in ("blender.py", "scene.py", "settings.py"):
        h.update((ROOT / "render" / name).read_bytes())
    return h.hexdigest()[:16]


def reference(settings: RenderSettings, rows: Path, cache: Path, threads: int,
              tmp: Path) -> tuple[np.ndarray, dict[str, Any]]:
    """The reference images (rendered once, then read from ``cache``) and their ms/img (one batch, no warm-up)."""
    path = cache / f"reference_{settings.resolution}px_{cache_key(settings, rows)}.npz"
    if path.exists():
        got = np.load(path)
        return got["images"], {"ms_per_img": float(got["ms_per_img"]), "cached": True}
    images, timing = render_point(settings, rows, tmp / "reference.npy", threads, repeats=1, warmup=False)
    np.savez(path, images=images, ms_per_img=timing["ms_per_img"])
    return images, {"ms_per_img": timing["ms_per_img"], "cached": False}


def pareto(points: Iterable[dict[str, Any]]) -> list[str]:
    """Labels of the points no other beats on both ms/img (lower) and SSIM (higher), fastest first."""
    out, top = [], -np.inf
    for p in sorted(points, key=lambda p: (p["ms_per_img"], -p["ssim"])):
        if p["ssim"] > top:
            out.append(p["label"])
            top = p["ssim"]
    return out


def same_but_samples(points: Iterable[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The sweep's points (not the reference) grouped by their settings other than samples."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        if not p.get("reference"):
            rest = {k: v for k, v in p["settings"].items() if k != "samples"}
            groups.setdefault(json.dumps(rest, sort_keys=True), []).append(p)
    return list(groups.values())


def sample_order(points: Iterable[dict[str, Any]], margin: float = SAMPLE_ORDER_MARGIN) -> list[dict[str, Any]]:
    """Pairs of points whose settings differ only in samples where the one with fewer scores an SSIM more than
    ``margin`` above the one with more. More samples bring an image nearer the 512-sample reference, but a denoiser
    or adaptive sampling may score two nearby sample counts about alike, so only a gap above the margin counts: 0.01
    is far below what samples change without a denoiser (SSIM 0.74 -> 0.95 from 8 to 32 samples at 32 px)."""
    bad = []
    for group in same_but_samples(points):
        for lo in group:
            for hi in group:
                if lo["settings"]["samples"] < hi["settings"]["samples"] and lo["ssim"] > hi["ssim"] + margin:
                    bad.append({"fewer": lo["label"], "more": hi["label"], "ssim": [lo["ssim"], hi["ssim"]]})
    return bad


def sample_pairs(points: Iterable[dict[str, Any]]) -> int:
    """How many pairs ``sample_order`` compares (a check over no pair would pass vacuously)."""
    counts = [len({p["settings"]["samples"] for p in group}) for group in same_but_samples(points)]
    return sum(c * (c - 1) // 2 for c in counts)


def derive_fast(frontier_json: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Per resolution, the settings of the fastest point (not the reference) whose PSNR and SSIM are both no lower
    than today's fast preset's there and which is faster beyond the timing noise (its slowest repeat beats fast's
    fastest); fast itself where none is: a cheaper fast preset of the same quality, never one chosen by noise."""
    out = {}
    for res, row in frontier_json["resolutions"].items():
        points = [p for p in row["points"] if not p.get("reference")]
        fast = next(p for p in points if p.get("fast"))
        ok = [fast] + [p for p in points if p["psnr"] >= fast["psnr"] and p["ssim"] >= fast["ssim"]
                       and slowest(p) < fast["ms_per_img"]]
        out[int(res)] = dict(min(ok, key=lambda p: (p["ms_per_img"], -p["ssim"]))["settings"])
    return out


def slowest(p: dict[str, Any]) -> float:
    """A point's slowest repeat in ms/img (its one time where the repeats were not recorded)."""
    return max(p.get("runs_ms_per_img") or [p["ms_per_img"]])


def machine(threads: int) -> dict[str, Any]:
    """Where the numbers were taken: cores and threads, CPU, Python, Blender, RAM and the load when it started."""
    import psutil

    info = Path("/proc/cpuinfo")
    models = [line.split(":", 1)[1].strip() for line in (info.read_text().splitlines() if info.exists() else [])
              if line.startswith("model name")]
    cpu = models[0] if models else platform.processor()
    return {"cores": os.cpu_count(), "cycles_threads": threads, "cpu": cpu, "python": platform.python_version(),
            "blender": metadata.version("bpy"), "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "load_avg_at_start": list(os.getloadavg())}


def revision() -> dict[str, Any]:
    """The checkout's commit and whether its tracked files had changes."""
    git = ["git", "-C", str(ROOT)]
    rev = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                text=True).stdout.strip())
    return {"revision": rev, "dirty": dirty}


def sweep_resolution(res: int, n: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Every point at one resolution, scored against the (cached) reference; its frontier and checks."""
    rows = tmp / f"rows_{res}.npz"
    write_rows(rows, n, args.seed)
    base = {"resolution": res, "device": args.device}
    ref_settings = render_settings("original", **base)
    ref, ref_timing = reference(ref_settings, rows, Path(args.cache_dir), args.threads, tmp)
    fast = light_transport(render_settings("fast", **base))
    points = [{"label": "reference: 512 spp, OIDN ACCURATE (original)", "family": "reference", "reference": True,
               "fast": False, "settings": light_transport(ref_settings), **ref_timing,
               "img_per_s": 1000 / ref_timing["ms_per_img"], **score(ref, ref)}]
    for cfg in configurations(res, args.tiny):
        settings = render_settings("fast", **base, **cfg["overrides"])
        images, timing = render_point(settings, rows, tmp / "images.npy", args.threads, args.repeats)
        lt = light_transport(settings)
        label = cfg["label"] + (" (today's fast)" if lt == fast else "")
        p = {"label": label, "family": cfg["family"], "reference": False, "fast": lt == fast, "settings": lt,
             **timing, **score(images, ref)}
        points.append(p)
        print(f"{res:4d} px  {p['label']:50s} {p['ms_per_img']:8.1f} ms/img  PSNR {p['psnr']:5.2f} dB  "
              f"SSIM {p['ssim']:.4f}", flush=True)
    if sum(p["fast"] for p in points) != 1:
        raise SystemExit(f"render_frontier: the sweep at {res} px must hold today's fast settings once")
    return {"n": n, "reference_ms_per_img": ref_timing["ms_per_img"], "points": points,
            "frontier": pareto(p for p in points if not p["reference"]),
            "sample_pairs": sample_pairs(points), "sample_order_violations": sample_order(points)}


def derived_rows(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``derive_fast``'s pick per resolution with its label, ms/img, speed-up over today's fast and scores."""
    out = {}
    for res, settings in derive_fast(results).items():
        points = [p for p in results["resolutions"][str(res)]["points"] if not p["reference"]]
        pick = min((p for p in points if p["settings"] == settings), key=lambda p: p["ms_per_img"])
        fast = next(p for p in points if p["fast"])
        out[str(res)] = {"label": pick["label"], "settings": settings, "ms_per_img": pick["ms_per_img"],
                         "speedup_vs_fast": fast["ms_per_img"] / pick["ms_per_img"], "psnr": pick["psnr"],
                         "ssim": pick["ssim"]}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the sweep, write the JSON and the figure, print derive_fast's settings per resolution."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resolutions", type=int, nargs="+", default=[32, 64, 128, 224])
    ap.add_argument("--n", type=int, nargs="+", help="images per resolution (default: 16 to 64 px, 8 to 128, 4)")
    ap.add_argument("--seed", type=int, default=SEED, help="the rows' SCM and Cycles seed")
    ap.add_argument("--repeats", type=int, default=2, help="timed batches per point (the fastest is kept)")
    ap.add_argument("--threads", type=int, default=0, help="Cycles threads (default: every core)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu", "auto"])
    ap.add_argument("--cache-dir", default=str(Path(tempfile.gettempdir()) / "ident3d_render_frontier"),
                    help="where the reference renders are kept between runs")
    ap.add_argument("--out", default="results/render_frontier.json")
    tiny = add_tiny(ap, "32 px, 2 images, 3 points, 1 repeat")
    args = ap.parse_args(argv)
    from ident3d.jobs.cluster import cpu_cores

    tiny.apply(args, sizes={"resolutions": [32], "n": [2], "repeats": 1})
    args.n = args.n or [default_n(r) for r in args.resolutions]
    if len(args.n) != len(args.resolutions):
        ap.error("give one --n per resolution")
    args.threads = args.threads or cpu_cores()
    Path(args.cache_dir).mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "command": "python " + " ".join([sys.argv[0] if argv is None else "benchmarks/render_frontier.py",
                                         *(sys.argv[1:] if argv is None else argv)]),
        **revision(), "machine": machine(args.threads), "scene": SCENE, "seed": args.seed, "device": args.device,
        "repeats": args.repeats, "tiny": args.tiny, "reference_preset": "original", "today_preset": "fast",
        "metrics": {"ms_per_img": "render phase of the fastest batch / images (start-up, warm-up image excluded)",
                    "psnr": "dB over RGB, MSE pooled over the images; Infinity: identical",
                    "ssim": "Wang et al. 2004 on BT.601 luma, 11x11 Gaussian window sigma 1.5, valid positions",
                    "frontier": "points no other beats on both ms_per_img and ssim, fastest first"},
        "resolutions": {}}
    with tempfile.TemporaryDirectory(prefix="ident3d_frontier_") as tmp:
        for res, n in zip(args.resolutions, args.n, strict=True):
            results["resolutions"][str(res)] = sweep_resolution(res, n, args, Path(tmp))
            results["derive_fast"] = derived_rows(results)
            out.write_text(json.dumps(results, indent=2) + "\n")  # after each resolution: a failure keeps the rest
    from render_frontier_figure import figure

    figure(results, out.with_suffix(".png"))
    for res, row in results["derive_fast"].items():
        print(f"derive_fast {res} px: {row['label']} ({row['ms_per_img']:.1f} ms/img, "
              f"{row['speedup_vs_fast']:.2f}x today's fast): {json.dumps(row['settings'])}")
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return results


if __name__ == "__main__":
    main()
