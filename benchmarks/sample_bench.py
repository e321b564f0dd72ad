"""Latent sampling throughput: samples/s for built-in SCMs at N = 1e6, and the per-call cost of
the small chunks a render task samples (it must never be the bottleneck of rendering).

    python benchmarks/sample_bench.py --out results/sample_bench.json
    python benchmarks/sample_bench.py --tiny      # N = 1,000, one repeat (a test)
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

from ident3d.causal import load_scm


def best_of(fn, repeat: int) -> float:
    """Fastest wall time of ``repeat`` calls (least disturbed by a noisy machine)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=64, help="rows per render chunk")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="results/sample_bench.json")
    tiny = add_tiny(ap, "N = 1,000, one repeat")
    args = ap.parse_args()
    tiny.apply(args, sizes={"n": 1000, "repeat": 1})
    results = {"n": args.n, "chunk": args.chunk, "machine": platform.processor() or platform.machine(),
               "scms": {}}
    for name in ("3dident", "causal3dident", "content_style"):
        scm = load_scm(name)
        big = best_of(lambda scm=scm: scm.sample(args.n, seed=0), args.repeat)
        small = best_of(lambda scm=scm: scm.sample(args.chunk, seed=0, start=12345), 50)
        t = scm.transform(scm.sample(args.n, seed=0), change=list(scm.change_sets)[0], seed=1)
        del t
        lt = best_of(lambda scm=scm: scm.transform(scm.sample(args.chunk, seed=0), list(scm.change_sets)[0]), 50)
        row = {"samples_per_s": args.n / big, "seconds_for_n": big,
               "chunk_ms": 1000 * small, "chunk_with_transform_ms": 1000 * lt}
        results["scms"][name] = row
        print(f"{name:14s} {row['samples_per_s'] / 1e6:6.2f} M samples/s at N={args.n:,}; "
              f"one {args.chunk}-row chunk: {row['chunk_ms']:.2f} ms "
              f"(+LT transform: {row['chunk_with_transform_ms']:.2f} ms)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
