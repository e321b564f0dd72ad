"""Goldens for a refactor: run tiny render, import, train, evaluate, compare and synthetic jobs through the CLI of
the checkout on PYTHONPATH and record a digest of what each wrote (arrays, weights, tables; not times, paths or
software stamps). Run it on the code before and after a change and compare the two JSON files: behaviour is
unchanged where the digests are equal.

    PYTHONPATH=/path/to/old python benchmarks/goldens.py --out /tmp/before.json --work /tmp/g_before
    PYTHONPATH=. python benchmarks/goldens.py --out /tmp/after.json --work /tmp/g_after --compare /tmp/before.json
    python benchmarks/goldens.py --tiny      # the render job only (a test)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

from ident3d.store.zarr_io import store_group

SKIP_KEYS = {"created", "software", "run", "test_store", "seconds", "train_seconds", "figure", "files", "path",
             "source", "scene_spec"}  # vary with time, place or machine, not with behaviour
SYNTHETIC = {
    "name": "golden", "seeds": [0, 1],
    "train": {"objective": "lp_infonce", "encoder": "mlp", "encoder_args": {"hidden": [16, 16]}, "out_dim": 3,
              "steps": 30, "batch_size": 64, "lr": 0.003, "amp": False, "log_every": 10},
    "evaluate": {"fit": 300, "score": 300},
    "rows": [{"name": "box normal", "source": {"kind": "latent_pairs", "space": "box", "conditional": "normal",
                                               "scale": 0.05, "dim": 3}, "hp": {"p": 2}}],
}
COMPARE = {
    "name": "golden", "scene": "causal3dident",
    "stores": {"train": {"n": 64, "resolution": 16, "samples": 2, "seed": 0, "views": "hues:hues"},
               "test": {"n": 64, "resolution": 16, "samples": 2, "seed": 1}},
    "train": {"objective": "infonce", "encoder": "cnn", "out_dim": 9, "steps": 5, "batch_size": 16, "lr": 0.001},
    "seeds": [0], "evaluate": {"fit": 24, "score": 40, "kernel": False},
    "rows": [{"name": "DA: colour", "views": "colour"}, {"name": "LT: hues", "views": "lt_exact:hues"}],
}


def cli(*args: Any) -> None:
    """``ident3d ARGS`` as a subprocess of this interpreter (the checkout on PYTHONPATH), one thread, checked."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "ident3d.pipelines.cli", *map(str, args)], env=env, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise SystemExit(f"goldens: ident3d {' '.join(map(str, args))} failed:\n{r.stderr[-3000:]}")


def array_digest(store: Path) -> str:
    """sha256 over every array's name and decoded values (not the attributes or chunk encodings)."""
    import zarr

    h = hashlib.sha256()
    group = store_group(str(store), mode="r")

    def walk(g: Any, prefix: str) -> None:
        for name, node in sorted(g.members()):
            if isinstance(node, zarr.Group):
                walk(node, f"{prefix}{name}/")
            else:
                h.update(f"{prefix}{name}".encode() + np.ascontiguousarray(node[...]).tobytes())

    walk(group, "")
    return h.hexdigest()


def weights_digest(checkpoint: Path) -> str:
    """sha256 over a checkpoint's model tensors (names and values)."""
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["model"]
    h = hashlib.sha256()
    for k in sorted(state):
        h.update(k.encode() + state[k].cpu().numpy().tobytes())
    return h.hexdigest()


def clean(value: Any) -> Any:
    """A JSON value without the keys that vary with time or place, floats rounded to 10 significant digits."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in sorted(value.items()) if k not in SKIP_KEYS}
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, float):
        return value if not math.isfinite(value) else float(f"{value:.10g}")
    return value


def json_digest(path: Path) -> str:
    return hashlib.sha256(json.dumps(clean(json.loads(path.read_text())), sort_keys=True).encode()).hexdigest()


JOBS = ("render", "export_import", "train", "evaluate", "compare", "synthetic")
TINY_JOBS = ("render",)  # each job is a CLI process (~5 s of start-up on one core)


def run_all(work: Path, jobs: tuple[str, ...] = JOBS) -> dict[str, str]:
    """The render job and every other one of ``jobs`` (evaluate needs train), in order; the digest of each output."""
    import yaml

    out: dict[str, str] = {}
    store = work / "c3d.zarr"
    cli("render", "--scene", "causal3dident", "--n", 64, "--resolution", 16, "--samples", 2, "--chunk-size", 8,
        "--views", "hues:hues", "--out", store, "--workers", 1, "--no-progress")
    out["render"] = array_digest(store)
    if "export_import" in jobs:
        published = work / "published"
        cli("export", store, "--format", "3dident", "--out", published)
        cli("import", "--format", "3dident", published, "--out", work / "imported.zarr", "--chunk-size", 8,
            "--workers", 1, "--no-progress")
        out["export_import"] = array_digest(work / "imported.zarr")
    if "train" in jobs:
        cli("train", "--data", store, "--views", "colour", "--encoder", "cnn", "--steps", 3, "--batch-size", 8,
            "--lr", 1e-3, "--device", "cpu", "--out", work / "run", "--no-progress")
        out["train"] = weights_digest(work / "run" / "checkpoint.pt")
    if "evaluate" in jobs:
        cli("evaluate", "--run", work / "run", "--data", store, "--no-kernel", "--fit", 20, "--score", 44,
            "--metrics", "dci,mig", "--out", work / "report.json")
        out["evaluate"] = json_digest(work / "report.json")
    if "compare" in jobs:
        (work / "compare.yaml").write_text(yaml.safe_dump(COMPARE))
        cli("compare", "--config", work / "compare.yaml", "--out", work / "compare", "--no-progress")
        out["compare"] = json_digest(work / "compare" / "table.json")
    if "synthetic" not in jobs:
        return out
    synthetic = ("synthetic", "--config", work / "synthetic.yaml", "--out", work / "synthetic", "--no-progress",
                 "--no-figures")
    (work / "synthetic.yaml").write_text(yaml.safe_dump(SYNTHETIC))
    try:
        cli(*synthetic)
    except SystemExit as exc:  # a checkout from before evaluate's keys were compare's refuses them (nothing written)
        if "evaluate takes" not in str(exc):
            raise
        (work / "synthetic.yaml").write_text(yaml.safe_dump({**SYNTHETIC, "evaluate": {"n_fit": 300, "n_score": 300}}))
        cli(*synthetic)
    out["synthetic"] = json_digest(work / "synthetic" / "table.json")
    return out


def machine() -> dict[str, str]:
    """What float results depend on besides the code: the CPU model and the versions of torch, numpy and bpy."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    out = {"cpu": cpu, "cores": str(os.cpu_count())}
    for pkg in ("torch", "numpy", "bpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "-"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="JSON file of the digests")
    ap.add_argument("--work", help="scratch folder (replaced)")
    ap.add_argument("--compare", help="an earlier digests JSON: say which jobs differ (exit 1 if any)")
    tiny = add_tiny(ap, "the render job only")
    args = ap.parse_args()
    tiny.apply(args, paths={"out": "goldens.json", "work": "work"})
    if not args.out or not args.work:
        ap.error("give --out and --work (or --tiny)")
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    digests = run_all(work, TINY_JOBS if args.tiny else JOBS)
    Path(args.out).write_text(json.dumps(digests, indent=1) + "\n")
    print(json.dumps(digests, indent=1))
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        differ = [k for k in digests if before.get(k) != digests[k]]
        print("unchanged: " + ", ".join(k for k in digests if k not in differ))
        print("differ: " + (", ".join(differ) or "none"))
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
