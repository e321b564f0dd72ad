"""`ident3d synthetic` cells in one process against `--workers 2` (a local Dask cluster of single-thread processes),
side by side in one run on the same cells: wall time of each and their ratio, with the thread counts set.

    python benchmarks/synthetic_workers.py [--steps 300] [--rows 4] [--out results/synthetic_workers.json]
    python benchmarks/synthetic_workers.py --tiny      # one cell of 2 steps each way (a test)

The serial run is one process (every cell at the engine's one torch thread, ``ident3d.pipelines.cells.CELL_THREADS``);
the parallel run two worker processes at 1 thread each. Both train and score the same cells of
configs/synthetic/paper001.yaml from scratch (separate output folders); their tables must be equal.
Writes the JSON and a bar figure next to it.
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

from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

ROOT = Path(__file__).resolve().parents[1]


def timed(args: list[str]) -> float:
    """Wall seconds of one `ident3d synthetic` call in a fresh interpreter (OMP_NUM_THREADS=1, as its cells run)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "ident3d.pipelines.cli", "synthetic", *args], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"synthetic failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - start


def scores(table: Path) -> dict:
    """A table's rows without the training times (``train_seconds``), which differ from run to run."""
    rows = json.loads(table.read_text())["rows"]
    return {name: {**row, "stats": {k: v for k, v in row["stats"].items() if not k.endswith("seconds")}}
            for name, row in rows.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rows", type=int, default=4, help="the first N rows of paper001.yaml, seed 0")
    p.add_argument("--out", type=Path, default=Path("results/synthetic_workers.json"))
    tiny = add_tiny(p, "the first row, 2 steps, in one process and on 2 workers")
    args = p.parse_args()
    tiny.apply(args, sizes={"steps": 2, "rows": 1})
    import yaml

    cfg = yaml.safe_load((ROOT / "configs/synthetic/paper001.yaml").read_text())
    slugs = [r["name"] for r in cfg["rows"][:args.rows]]
    work = Path(tempfile.mkdtemp(prefix="synthetic_workers_"))
    common = ["--config", str(ROOT / "configs/synthetic/paper001.yaml"), "--steps", str(args.steps), "--seeds", "0",
              "--rows", *slugs, "--no-progress", "--no-figures", "--device", "cpu"]
    serial = timed([*common, "--out", str(work / "serial")])
    parallel = timed([*common, "--out", str(work / "parallel"), "--workers", "2"])
    same = scores(work / "serial/table.json") == scores(work / "parallel/table.json")
    shutil.rmtree(work, ignore_errors=True)
    result = {"command": "python benchmarks/synthetic_workers.py " + " ".join(sys.argv[1:]), "cells": len(slugs),
              "steps": args.steps, "serial_s": round(serial, 1), "workers_2x1_thread_s": round(parallel, 1),
              "speedup": round(serial / parallel, 2), "tables_equal": same, "cpus": os.cpu_count(),
              "python": platform.python_version()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 2.4))
    ax.barh(["1 process", "2 workers"], [serial, parallel], color=["#888", "#3a7"])
    ax.set_xlabel(f"seconds for {len(slugs)} cells of {args.steps} steps")
    ax.set_title(f"ident3d synthetic: speed-up {serial / parallel:.2f}x", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
