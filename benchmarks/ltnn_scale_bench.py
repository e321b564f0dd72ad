"""LT nearest-neighbour views at the published scale: batches/s of the data path + view making for
``lt_nn:CHANGE`` vs DA view makers on one 250,000-image store (streamed chunk by chunk, as a store beyond
the in-memory limit is), interleaved batch by batch in one process; chunk decodes per batch, snap distances
(global vs within the batch's chunks) and peak RSS.

The store is built once (cached at ``--store``): Causal3DIdent latents from the project's SCM sampler and
images drawn with numpy from them (a coloured blob on a coloured background, not Blender renders), written
with ``ident3d.store.zarr_io.prepare`` (the project's arrays, codecs and attributes) in bulk, chunks of 64.

    python benchmarks/ltnn_scale_bench.py --out results/ltnn_scale_bench.json
    python benchmarks/ltnn_scale_bench.py --tiny      # 512 rows of 8 px, batches of 16 (a test)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import resource
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zarr
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

import ident3d.training.chunk_cache as chunk_cache
import ident3d.training.data as data
from ident3d.causal import load_scm
from ident3d.render.api import plan_render
from ident3d.store.info import image_stats, store_info
from ident3d.store.zarr_io import prepare, store_group
from ident3d.training.chunk_cache import DEFAULT_CACHE_BYTES
from ident3d.training.data import StoreBatches
from ident3d.training.pairs import NearestNeighbourPairs
from ident3d.training.views import Normalize, make_view_maker

OLD_PAIRS = "6c711bfdff3cc2e7d84f45130e2dc25399e19a9a"  # the last commit with the per-row search and shared reads
BLOCK = 4096  # rows written per bulk write (64 chunks)


# ----- the store ----------------------------------------------------------------------------------------
def blob_images(latents: np.ndarray, size: int) -> np.ndarray:
    """uint8 (n, size, size, 3): a blob placed by pos_x/pos_y, sized by pos_z, coloured by the hues."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    z = (latents + 1) / 2
    blob = np.exp(-((xx - z[:, 0, None, None]) ** 2 + (yy - z[:, 1, None, None]) ** 2)
                  / (0.005 + 0.03 * z[:, 2, None, None]))
    phase = np.array([0.0, 2.094, 4.189], np.float32)
    fg = 0.5 + 0.5 * np.cos(2 * np.pi * z[:, 7, None] + phase)  # object hue -> RGB
    bg = 0.5 + 0.5 * np.cos(2 * np.pi * z[:, 9, None] + phase)  # background hue -> RGB
    rgb = bg[:, None, None, :] * (1 - blob[..., None]) + fg[:, None, None, :] * blob[..., None]
    return (rgb * 255).astype(np.uint8)


def build_store(path: str, n: int, size: int, chunk: int) -> float:
    """Write the store unless a complete one with these sizes is there; returns the seconds spent (0: cached)."""
    try:
        info = store_info(path)
        if info.n == n and info.image_size == size and info.chunk_size == chunk:
            return 0.0
    except Exception:  # noqa: BLE001 - missing, partial or different: rebuild
        pass
    t0 = time.perf_counter()
    plan = plan_render(path, scene="causal3dident", n=n, settings={"resolution": size}, chunk_size=chunk)
    attrs = dataclasses.replace(plan.attrs, render={**plan.attrs.render,
                                                    "source": "numpy blobs (benchmarks/ltnn_scale_bench.py)"})
    group = prepare(path, attrs, plan.layout, overwrite=True)
    samples = load_scm("causal3dident").sample(n, seed=0)
    for lo in range(0, n, BLOCK):
        hi = min(n, lo + BLOCK)
        group["images"][lo:hi] = blob_images(samples.latents[lo:hi], size)
        group["latents"][lo:hi] = samples.latents[lo:hi]
        group["classes"][lo:hi] = samples.classes[lo:hi]
        group["done"][lo // chunk:-(-hi // chunk)] = True  # the commit point, after the chunks' data
    return time.perf_counter() - t0


# ----- the ways of reading partners ---------------------------------------------------------------------
def old_pairs_module() -> types.ModuleType | None:
    """training/pairs.py as it was before the chunk cache (from git), or None where git or the commit is missing."""
    try:
        text = subprocess.run(["git", "show", f"{OLD_PAIRS}:training/pairs.py"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).resolve().parent).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    # its imports name the project's packages as they were then (top-level causal, store, ...): now ident3d.*
    text = re.sub(r"^(\s*)(from|import) (causal|store|render|training)\b", r"\1\2 ident3d.\3", text, flags=re.M)
    module = types.ModuleType("old_pairs")
    exec(compile(text, "old_pairs.py", "exec"), module.__dict__)  # noqa: S102 - our own file from our history
    return module


class PerImagePairs(NearestNeighbourPairs):
    """The new search with the naive read: every partner image read by itself (a chunk decode per image)."""

    def partner_images(self, partners: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """One read_rows per partner row."""
        images = store_group(self.dataset.info.path, mode="r")["images"]
        return np.concatenate([chunk_cache.read_rows(images, slice(int(r), int(r) + 1), self.dataset.info.path)
                               for r in partners])


class DecodeCounter:
    """Counts image-chunk decodes (read_rows calls on ``images``) made through training.data and the chunk cache."""

    def __init__(self) -> None:
        self.images = 0
        for module in (data, chunk_cache):
            module.read_rows = self._wrap(module.read_rows)

    def _wrap(self, real: Any) -> Any:
        """A read_rows that counts calls on the images array, then reads."""
        def counting(array: zarr.Array, sel: Any, path: str) -> np.ndarray:
            if array.path == "images":
                self.images += 1
            return real(array, sel, path)
        return counting


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB."""
    status = Path("/proc/self/status").read_text().splitlines()
    get = {line.split(":")[0]: float(line.split()[1]) / 1024 for line in status if line.startswith(("VmRSS", "VmHWM"))}
    return get.get("VmRSS", float("nan")), get.get("VmHWM", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


# ----- measuring ----------------------------------------------------------------------------------------
def make_configs(path: str, change: str, batch: int, cache_bytes: int, norm: Normalize,
                 include_old: bool) -> dict[str, dict[str, Any]]:
    """Each config: its own streaming dataset (same seed, so the same anchor rows), pairing and view maker."""
    info = store_info(path)

    def ds() -> StoreBatches:
        return StoreBatches(info, batch, seed=0, in_memory=False)

    configs: dict[str, dict[str, Any]] = {}
    for spec in ("colour", "crop_large+colour"):
        configs[f"da:{spec}"] = {"ds": ds(), "views": make_view_maker(spec, norm)}
    lt = make_view_maker(f"lt_nn:{change}", norm)
    for name, cls, kw in (("lt_nn:store (cache)", NearestNeighbourPairs, {"cache_bytes": cache_bytes}),
                          ("lt_nn:batch chunks", NearestNeighbourPairs, {"scope": "batch"}),
                          ("lt_nn:store, per-image reads", PerImagePairs, {"cache_bytes": 0})):
        d = ds()
        t0 = time.perf_counter()
        d.pairing = cls(d, change, 0, **kw)
        configs[name] = {"ds": d, "views": lt, "setup_s": time.perf_counter() - t0}
    old = old_pairs_module() if include_old else None
    if old is not None:
        d = ds()
        t0 = time.perf_counter()
        d.pairing = old.NearestNeighbourPairs(d, change, 0)
        configs["lt_nn:old code (git)"] = {"ds": d, "views": lt, "setup_s": time.perf_counter() - t0}
    return configs


def measure(configs: dict[str, dict[str, Any]], counter: DecodeCounter, warm: int, batches: int) -> None:
    """Round-robin over the configs, one batch each per round (so load from other jobs hits all alike)."""
    for c in configs.values():
        c.update(times=[], decodes=[], snaps=[], partners=[])
    for step in range(warm + batches):
        for c in configs.values():
            cache = getattr(c["ds"].pairing, "images", None)
            if step == warm and isinstance(cache, chunk_cache.ChunkCache):
                c["cache_at_warm"] = (cache.hits, cache.decodes)
            before = counter.images
            t0 = time.perf_counter()
            b = c["ds"].batch(step)
            c["views"](b, torch.Generator().manual_seed(step))
            dt = time.perf_counter() - t0
            if step >= warm:
                c["times"].append(dt)
                c["decodes"].append(counter.images - before)
                if "pair/snap" in b:
                    c["snaps"].append(float(b["pair/snap"].double().mean()))
                    c["partners"].append(b["pair/index"].numpy() if "pair/index" in b else None)


def snap_table(path: str, changes: list[str], batch: int, batches: int) -> dict[str, dict[str, float]]:
    """Mean snap distance, global vs within the batch's chunks, per change set (search only, no images)."""
    info = store_info(path)
    out = {}
    for change in changes:
        ds = StoreBatches(info, batch, seed=0, in_memory=False)
        pairs = {scope: NearestNeighbourPairs(ds, change, 0, scope=scope) for scope in ("store", "batch")}
        snaps: dict[str, list[float]] = {"store": [], "batch": []}
        search_s = 0.0
        for step in range(batches):
            rows = ds.batch_rows(step)
            latents = pairs["store"].latents[np.searchsorted(info.rows, rows)]
            arrays = {"latents": latents, "classes": pairs["store"].classes[np.searchsorted(info.rows, rows)]}
            z, cls = pairs["store"].targets(rows, arrays, step)
            for scope, p in pairs.items():
                t0 = time.perf_counter()
                snaps[scope].append(float(p.search(rows, z, cls)[1].astype(np.float64).mean()))
                if scope == "store":
                    search_s += time.perf_counter() - t0
        g, b = float(np.mean(snaps["store"])), float(np.mean(snaps["batch"]))
        out[change] = {"snap_global": g, "snap_batch_chunks": b, "ratio": b / g,
                       "global_search_ms_per_batch": 1000 * search_s / batches}
        print(f"snap distance {change:15s}: global {g:.4f} | within the batch's chunks {b:.4f} ({b / g:.1f}x); "
              f"global k-d tree search {1000 * search_s / batches:.1f} ms per batch")
    return out


def main() -> None:
    """Build (or reuse) the store, measure, print and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="runs/ltnn_scale/c3d_250k_32px.zarr")
    ap.add_argument("--n", type=int, default=250_000)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--chunk-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--change", default="positions+hues")
    ap.add_argument("--warm", type=int, default=8, help="batches per config before timing (fills the cache)")
    ap.add_argument("--batches", type=int, default=40, help="timed batches per config")
    ap.add_argument("--cache-mb", type=int, default=DEFAULT_CACHE_BYTES // 2**20)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: on a shared 2-core machine 2 threads made kornia ~20x slower)")
    ap.add_argument("--no-old", action="store_true", help="skip the pre-change code path read from git")
    ap.add_argument("--out", default="results/ltnn_scale_bench.json")
    tiny = add_tiny(ap, "512 rows of 8 px in chunks of 16, batches of 16, 1 warm-up and 2 timed")
    args = ap.parse_args()
    tiny.apply(args, sizes={"n": 512, "size": 8, "chunk_size": 16, "batch_size": 16, "warm": 1, "batches": 2},
               paths={"store": "store.zarr", "out": "ltnn_scale_bench.json"})
    torch.set_num_threads(args.threads)
    rss_imports = rss_mb()[0]
    t_start = time.perf_counter()
    load0 = os.getloadavg()
    build_s = build_store(args.store, args.n, args.size, args.chunk_size)
    disk = sum(p.stat().st_size for p in Path(args.store).rglob("*") if p.is_file())
    print(f"store {args.store}: {args.n} rows, {args.size} px, chunks of {args.chunk_size}, {disk / 2**20:.0f} MiB on "
          f"disk; {f'built in {build_s:.0f} s' if build_s else 'reused'}")
    rss_build = rss_mb()[1]
    counter = DecodeCounter()
    info = store_info(args.store)
    norm = Normalize(*image_stats(info))
    configs = make_configs(args.store, args.change, args.batch_size, args.cache_mb * 2**20, norm, not args.no_old)
    measure(configs, counter, args.warm, args.batches)
    res: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "load_average_start": load0,
        "store": {"path": args.store, "n": args.n, "image_size": args.size, "chunk_size": args.chunk_size,
                  "chunks": -(-args.n // args.chunk_size), "disk_mib": disk / 2**20, "build_s": build_s,
                  "images": "numpy blobs from Causal3DIdent latents (not rendered)",
                  "read": "streamed (in_memory=False), as a store beyond the 2 GB in-memory limit is"},
        "batch_size": args.batch_size, "change": args.change, "warm_batches": args.warm, "timed_batches": args.batches,
        "cache_mib": args.cache_mb, "views_on": "cpu", "num_workers": 0, "configs": {}}
    print(f"batch {args.batch_size}, {args.batches} timed batches per config after {args.warm} warm-up, interleaved; "
          "decodes = image chunks decoded per batch (anchors + partners)")
    for name, c in configs.items():
        t = np.asarray(c["times"])
        row = {"batches_per_s": len(t) / t.sum(), "ms_per_batch_mean": 1000 * t.mean(),
               "ms_per_batch_median": 1000 * float(np.median(t)),
               "image_chunk_decodes_per_batch": float(np.mean(c["decodes"]))}
        if c["snaps"]:
            row["snap_mean"] = float(np.mean(c["snaps"]))
            row["setup_s"] = c["setup_s"]
        pairing = c["ds"].pairing
        if isinstance(pairing, NearestNeighbourPairs) and not isinstance(pairing, PerImagePairs):
            cache = pairing.images
            hits, decodes = cache.hits - c["cache_at_warm"][0], cache.decodes - c["cache_at_warm"][1]
            row["partner_cache"] = {"mib": cache.nbytes / 2**20, "chunks": len(cache.cached()),
                                    "timed_hits_per_batch": hits / args.batches,
                                    "timed_decodes_per_batch": decodes / args.batches,
                                    "timed_hit_rate": hits / max(1, hits + decodes)}
        res["configs"][name] = row
        extra = f", snap {row['snap_mean']:.4f}" if "snap_mean" in row else ""
        print(f"{name:30s} {row['batches_per_s']:6.2f} batches/s ({row['ms_per_batch_median']:6.1f} ms median), "
              f"{row['image_chunk_decodes_per_batch']:6.1f} decodes/batch{extra}")
    new, old = configs["lt_nn:store (cache)"]["partners"], configs.get("lt_nn:old code (git)", {}).get("partners")
    if old:
        res["old_code_gives_the_same_snaps"] = bool(np.allclose(configs["lt_nn:old code (git)"]["snaps"],
                                                                configs["lt_nn:store (cache)"]["snaps"]))
        print(f"old code's snap distances equal the new global search's: {res['old_code_gives_the_same_snaps']}")
    elif not args.no_old:
        res["old_code"] = f"not reachable (git show {OLD_PAIRS[:7]} failed)"
    naive = configs["lt_nn:store, per-image reads"]["partners"]
    res["same_partners_per_image_vs_cache"] = all(np.array_equal(a, b) for a, b in zip(new, naive, strict=True))
    res["snap_distance"] = snap_table(args.store, ["positions", "hues", "rotations", args.change]
                                      if args.change not in ("positions", "hues", "rotations")
                                      else ["positions", "hues", "rotations"], args.batch_size, 20)
    rss, peak = rss_mb()
    res.update(rss_mb_end=rss, peak_rss_mb=peak, peak_rss_mb_after_build=rss_build,
               rss_mb_after_imports=rss_imports,
               load_average_end=os.getloadavg(), total_s=time.perf_counter() - t_start)
    print(f"peak RSS {peak:.0f} MB (after imports {rss_imports:.0f} MB, after the build {rss_build:.0f} MB); "
          f"total {res['total_s']:.0f} s")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
