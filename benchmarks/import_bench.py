"""Import throughput: images/s of ``ident3d.ingest.published_import.import_published`` (a 3DIdent-layout PNG folder -> a
store: header check, Dask-parallel decode, zstd write) vs decoding the same PNGs with PIL in a plain loop (decode only,
``np.asarray``), side by side in one run, at each zstd ``--levels`` of the image chunks (with the store's size).

    python benchmarks/import_bench.py --repeats 3 --levels 9 3 --out results/import_bench.json
    python benchmarks/import_bench.py --tiny      # 8 PNGs of 16 px, 1 worker, zstd 3, once (a test)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script
from PIL import Image

from ident3d.ingest.published import loader_width, read_source
from ident3d.ingest.published_import import import_published


def render_like(rng: np.random.Generator, size: int) -> np.ndarray:
    """A uint8 (size, size, 3) image that compresses like a render: a hue gradient, a shaded ellipse, mild noise
    (random noise would make PNGs incompressible and unlike the published ones)."""
    y, x = np.mgrid[0:size, 0:size] / size
    bg = rng.uniform(0.2, 0.8, 3)
    img = bg * (0.6 + 0.4 * y[..., None])
    cx, cy, r = rng.uniform(0.3, 0.7), rng.uniform(0.3, 0.7), rng.uniform(0.1, 0.25)
    inside = ((x - cx) ** 2 + (y - cy) ** 2) < r**2
    shade = np.clip(1.2 - 2.5 * np.hypot(x - cx + r / 3, y - cy + r / 3), 0.2, 1.0)
    img[inside] = (rng.uniform(0, 1, 3) * shade[..., None])[inside]
    img += rng.normal(0, 0.01, img.shape)
    return (np.clip(img, 0, 1) * 255).round().astype(np.uint8)


def make_folder(root: Path, n: int, size: int, seed: int = 0) -> None:
    """A 3DIdent-layout folder: images/NNN.png (PIL's default zlib level) and raw_latents.npy."""
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    width = loader_width(n)
    for i in range(n):
        Image.fromarray(render_like(rng, size)).save(root / "images" / f"{str(i).zfill(width)}.png")
    np.save(root / "raw_latents.npy", rng.uniform(-1, 1, (n, 10)))


def pil_loop(root: Path) -> float:
    """Seconds to decode every PNG of the folder with PIL in one plain loop (no store, no Dask)."""
    files = sorted((root / "images").glob("*.png"))
    t0 = time.perf_counter()
    for f in files:
        with Image.open(f) as im:
            np.asarray(im.convert("RGB"))
    return time.perf_counter() - t0


def timed_import(root: Path, out: Path, chunk_size: int, workers: int, level: int) -> dict[str, float]:
    """Seconds of one whole import (validation, cluster start, tasks) and of its chunk tasks alone, and the
    store's image bytes in MB."""
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    report = import_published(root, out, "3dident", chunk_size=chunk_size, workers=workers, progress=False,
                              compression_level=level)
    total = time.perf_counter() - t0
    assert report.images == len(read_source(root, "3dident")), "import incomplete"
    mb = sum(f.stat().st_size for f in (out / "images").rglob("*") if f.is_file()) / 2**20
    return {"total_s": total, "tasks_s": report.seconds, "images_mb": mb}


def chunk_breakdown(root: Path, out: Path, chunk_size: int, level: int) -> dict[str, float]:
    """ms per image of one chunk's two steps in this process: PIL decode, and the zstd write into the store."""
    from ident3d.ingest.published import decode_chunk
    from ident3d.ingest.published_import import import_attrs, import_layout
    from ident3d.store.zarr_io import ChunkData, prepare, write_chunk

    source = read_source(root, "3dident")
    shutil.rmtree(out, ignore_errors=True)
    group = prepare(str(out), import_attrs(source, chunk_size), import_layout(source, chunk_size, level), False)
    t0 = time.perf_counter()
    images = decode_chunk(source.files[:chunk_size], (source.height, source.width))
    t1 = time.perf_counter()
    write_chunk(group, 0, ChunkData(images, None, None), {})
    t2 = time.perf_counter()
    return {"decode_ms_per_img": 1e3 * (t1 - t0) / chunk_size, "write_ms_per_img": 1e3 * (t2 - t1) / chunk_size}


def main() -> None:
    """Generate the folder, time both ways ``--repeats`` times (best of), print and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--chunk-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--levels", type=int, nargs="+", default=[9, 3], help="zstd levels of the image chunks")
    ap.add_argument("--out", default="results/import_bench.json")
    tiny = add_tiny(ap, "8 PNGs of 16 px in chunks of 4, 1 worker, zstd 3, once")
    args = ap.parse_args()
    tiny.apply(args, sizes={"n": 8, "size": 16, "chunk_size": 4, "workers": 1, "repeats": 1, "levels": [3]})
    tmp = Path(tempfile.mkdtemp(prefix="ident3d_import_"))
    try:
        make_folder(tmp / "src", args.n, args.size)
        t0 = time.perf_counter()
        read_source(tmp / "src", "3dident")
        validate_s = time.perf_counter() - t0
        pil = min(pil_loop(tmp / "src") for _ in range(args.repeats))
        runs: dict[int, list[dict[str, float]]] = {level: [] for level in args.levels}
        for _ in range(args.repeats):  # levels interleaved, so a noisy neighbour hits each alike
            for level in args.levels:
                runs[level].append(timed_import(tmp / "src", tmp / "s.zarr", args.chunk_size, args.workers, level))
        breakdown = {level: chunk_breakdown(tmp / "src", tmp / "b.zarr", args.chunk_size, level)
                     for level in args.levels}
        png_mb = sum(p.stat().st_size for p in (tmp / "src/images").iterdir()) / 2**20
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    levels = {}
    for level, rs in runs.items():
        total, tasks = min(r["total_s"] for r in rs), min(r["tasks_s"] for r in rs)
        levels[str(level)] = {"import_img_per_s": args.n / total, "import_tasks_img_per_s": args.n / tasks,
                              "import_total_s": total, "import_tasks_s": tasks, "images_mb": rs[0]["images_mb"],
                              "one_chunk_in_one_process": breakdown[level]}
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "n": args.n, "size": args.size, "chunk_size": args.chunk_size, "workers": args.workers,
        "repeats": args.repeats, "png_folder_mb": round(png_mb, 2),
        "pil_loop_img_per_s": args.n / pil,
        "validate_s": validate_s, "levels": levels,
        "note": "per zstd level of the image chunks: import_img_per_s counts the whole call (validation of latents "
                "and every PNG header, LocalCluster start, decode, write); import_tasks_img_per_s only the chunk "
                "tasks; images_mb the store's image chunks. Best of the repeats, levels interleaved.",
    }
    print(f"{args.n} PNGs of {args.size} px ({png_mb:.1f} MB), {os.cpu_count()} cores, {args.workers} workers:")
    print(f"  PIL decode loop                {result['pil_loop_img_per_s']:8.1f} img/s")
    for level, r in levels.items():
        b = r["one_chunk_in_one_process"]
        print(f"  import, zstd {level:>2}: whole call {r['import_img_per_s']:6.1f} img/s, chunk tasks "
              f"{r['import_tasks_img_per_s']:6.1f} img/s, store {r['images_mb']:.1f} MB; one chunk: decode "
              f"{b['decode_ms_per_img']:.2f} ms/img, write {b['write_ms_per_img']:.2f} ms/img")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
