"""What a new user's first ``ident3d train`` costs on this machine: the command with no flags beyond the
store, the view maker and the run directory (the device's auto defaults), timed end to end as a real command.

    python benchmarks/train_defaults.py --out results/train_defaults_cpu.json

Renders the store first if it is missing (Causal3DIdent, 1,024 images, the default ``fast`` preset at 64 px;
rendering is not part of the timed figure).

    python benchmarks/train_defaults.py --tiny      # 16 images of 16 px, the command cut to 2 steps of 8 (a test)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

TINY_TRAIN = ["--steps", "2", "--batch-size", "8"]  # --tiny: the default command, cut short

def ensure_store(path: Path, n: int, settings: dict | None = None) -> float:
    """Render the store unless it exists (``settings``: overrides of the fast preset); returns the seconds spent
    rendering (0 when it was there)."""
    if (path / "zarr.json").is_file():
        return 0.0
    from ident3d.render import render_store

    report = render_store(path, scene="causal3dident", n=n, preset="fast", settings=settings, seed=0, progress=False)
    if not report.ok:
        raise SystemExit(f"rendering {path} failed: chunks {sorted(report.failed)}")
    return float(report.seconds)


def store_facts(path: Path) -> dict[str, object]:
    """The store's image count, resolution and samples per pixel, from its attributes."""
    from ident3d.store.attrs import read_attrs
    from ident3d.store.zarr_io import open_store

    attrs = read_attrs(open_store(str(path)), str(path))
    return {"images": attrs.n, "resolution": attrs.render["resolution"], "samples": attrs.render["samples"]}


def timed_train(store: Path, run: Path, extra: list[str] | None = None) -> tuple[list[str], float, str]:
    """Run the default command (a fresh run directory; ``extra`` flags appended) and return (command, wall seconds,
    its stdout)."""
    shutil.rmtree(run, ignore_errors=True)
    cmd = ["ident3d", "train", "--data", str(store), "--views", "colour", "--out", str(run), *(extra or [])]
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "ident3d.pipelines.cli", *cmd[1:]], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"the command failed (exit {r.returncode}): {r.stderr.strip()[-500:]}")
    return cmd, wall, r.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="runs/bench/c3d_1024_64px.zarr", type=Path)
    ap.add_argument("--n", type=int, default=1024, help="images in the store if it has to be rendered")
    ap.add_argument("--run", default="runs/bench/train_defaults", type=Path)
    ap.add_argument("--out", default="results/train_defaults_cpu.json", type=Path)
    tiny = add_tiny(ap, "a 16-image, 16 px store, the command cut to 2 steps of batch 8")
    args = ap.parse_args()
    tiny.apply(args, sizes={"n": 16}, paths={"store": "store.zarr", "run": "run", "out": "train_defaults.json"})
    render_s = ensure_store(args.store, args.n, {"resolution": 16, "samples": 2} if args.tiny else None)
    load_before = os.getloadavg()[0]  # other work on the machine slows the figure; recorded alongside it
    cmd, wall, stdout = timed_train(args.store, args.run, TINY_TRAIN if args.tiny else None)
    config = json.loads((args.run / "config.json").read_text())
    steps = [json.loads(line)["step"] for line in (args.run / "metrics.jsonl").read_text().splitlines()]
    res = {
        "command": " ".join(cmd), "wall_seconds": round(wall, 1), "wall_minutes": round(wall / 60, 2),
        "device": "cuda" if torch.cuda.is_available() else "cpu", "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "load_average_1min_before": round(load_before, 2),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
        "defaults": {k: config[k] for k in ("encoder", "steps", "batch_size", "lr")},
        "steps_done": steps[-1] if steps else 0,
        "store": {"path": str(args.store), **store_facts(args.store), "render_seconds_if_rendered": round(render_s, 1)},
        "stdout": stdout.strip().splitlines(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"{res['command']}: {wall:.0f} s ({res['defaults']}) -> {args.out}")


if __name__ == "__main__":
    main()
