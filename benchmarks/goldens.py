"""Goldens for a refactor: run tiny render, import, train, evaluate, compare and synthetic jobs through the CLI of
a checkout (``--checkout``; default: the one this script is in) and record a digest of what each wrote (arrays,
weights, tables; not times, paths or software stamps). Run it on the code before and after a change and compare the
two JSON files: behaviour is unchanged where the digests are equal.

    git worktree add /tmp/wt_before REV
    python benchmarks/goldens.py --checkout /tmp/wt_before --out /tmp/before.json --work /tmp/g_before
    python benchmarks/goldens.py --out /tmp/after.json --work /tmp/g_after --compare /tmp/before.json
    python benchmarks/goldens.py --tiny      # the render job only (a test)

How a checkout runs (``checkout_env``): the installed ``ident3d`` is an editable install of one checkout, whose
import hook maps ``ident3d.render`` to that checkout's ``render/`` folder whatever comes first on ``sys.path``, so
putting another checkout on PYTHONPATH would run that checkout's ``ident3d/__init__.py`` with the installed one's
subpackages. Instead each job runs with an *import root* first on PYTHONPATH: a folder ``WORK/import_root`` holding
a real ``ident3d/`` folder made of symbolic links, ``ident3d/__init__.py`` (and the rest of the checkout's
``ident3d/``) to its files and ``ident3d/render`` to its ``render/`` folder, one link per entry of its
pyproject's ``[tool.setuptools.package-dir]`` (copies where links cannot be made). Python's path finder finds
``ident3d`` and every subpackage there before the editable hook is asked (that hook sits last on ``sys.meta_path``),
in the job's process and in every process it starts (Dask workers, Blender), which inherit PYTHONPATH;
``PYTHONSAFEPATH`` keeps the current folder off ``sys.path``. Before the first job a child process checks where
``ident3d`` and each subpackage are found and stops if any is not the checkout's. A checkout whose pyproject has
no ``ident3d`` package-dir (a plain ``ident3d/`` package) goes on PYTHONPATH as it is. The digests are read in this
process with the installed code's store reader, one reader for both sides of a comparison.
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
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script

from _tiny import add_tiny  # noqa: E402  (benchmarks/_tiny.py)

from ident3d.store.zarr_io import store_group  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]  # the checkout this script is in: the default --checkout
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


def package_dirs(checkout: Path) -> dict[str, Path]:
    """The checkout's ``ident3d`` packages and their folders, from its pyproject's ``package-dir`` (names that
    start with ``ident3d``); empty when it maps no ``ident3d`` (a plain ``ident3d/`` package)."""
    pyproject = checkout / "pyproject.toml"
    tool = tomllib.loads(pyproject.read_text()).get("tool", {}) if pyproject.is_file() else {}
    dirs = tool.get("setuptools", {}).get("package-dir", {})
    mapped = {name: checkout / folder for name, folder in dirs.items() if name.split(".")[0] == "ident3d"}
    return mapped if "ident3d" in mapped else {}


def link(target: Path, path: Path) -> None:
    """``path`` a symbolic link to ``target``, or a copy of it where the file system makes no links."""
    try:
        path.symlink_to(target, target_is_directory=target.is_dir())
    except OSError:
        if target.is_dir():
            shutil.copytree(target, path, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(target, path)


def import_root(checkout: Path, folder: Path) -> Path:
    """A folder that, first on PYTHONPATH, makes ``ident3d`` and its subpackages the checkout's (see the module's
    docstring): ``folder`` made anew, or the checkout itself where it maps no ``ident3d`` package-dir."""
    dirs = package_dirs(checkout)
    if not dirs:
        return checkout
    shutil.rmtree(folder, ignore_errors=True)
    package = folder / "ident3d"
    package.mkdir(parents=True)
    for entry in sorted(dirs["ident3d"].iterdir()):
        if entry.name != "__pycache__":
            link(entry, package / entry.name)
    for name in sorted(dirs, key=lambda n: n.count(".")):  # parents before children
        if name != "ident3d":
            path = folder.joinpath(*name.split("."))
            if path.is_symlink() or path.exists():  # the folder already where the package is
                if path.resolve() != dirs[name].resolve():
                    raise SystemExit(f"goldens: {checkout}: {name} is both {path.resolve()} and {dirs[name]}")
                continue
            if any(parent.is_symlink() for parent in path.parents):  # a link would land inside the checkout
                raise SystemExit(f"goldens: {checkout}: {name} maps into a mapped package's folder (not supported)")
            path.parent.mkdir(parents=True, exist_ok=True)
            link(dirs[name], path)
    return folder


WHERE = ("import importlib.util as u, json, sys\n"
         "print(json.dumps({n: u.find_spec(n).origin for n in sys.argv[1:]}))")


def checkout_env(checkout: Path, folder: Path) -> dict[str, str]:
    """The environment that runs ``checkout``'s ``ident3d`` (its import root, made in ``folder``, first on
    PYTHONPATH; one thread), checked in a child process: every package and the CLI module are found there."""
    checkout = checkout.resolve()
    root = import_root(checkout, folder)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONSAFEPATH": "1",
           "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    names = sorted({"ident3d", *package_dirs(checkout), "ident3d.pipelines.cli"})
    r = subprocess.run([sys.executable, "-c", WHERE, *names], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"goldens: the checkout {checkout} does not import:\n{r.stderr[-3000:]}")
    found = {name: Path(origin).resolve() for name, origin in json.loads(r.stdout).items()}
    elsewhere = {name: str(path) for name, path in found.items()  # a link leads into the checkout, a copy is in root
                 if not (path.is_relative_to(checkout) or path.is_relative_to(root.resolve()))}
    if elsewhere:
        raise SystemExit(f"goldens: these modules come from outside the checkout {checkout}: {elsewhere}")
    return env


def cli(env: dict[str, str], *args: Any) -> None:
    """``ident3d ARGS`` as a subprocess of this interpreter in ``env`` (``checkout_env``'s), checked."""
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
                h.update(f"{prefix}{name}".encode() + value_bytes(node[...]))

    walk(group, "")
    return h.hexdigest()


def value_bytes(values: np.ndarray) -> bytes:
    """An array's values as bytes: its memory for numbers, and for strings (a caption array reads as Python objects
    or numpy's StringDType, whose memory holds pointers) each string's UTF-8 length and bytes, in row order."""
    if values.dtype.kind not in "OT":
        return np.ascontiguousarray(values).tobytes()
    encoded = [str(v).encode() for v in values.ravel()]
    return b"".join(len(e).to_bytes(8, "little") + e for e in encoded)


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


def run_all(work: Path, jobs: tuple[str, ...] = JOBS, checkout: Path = ROOT) -> dict[str, str]:
    """The render job and every other one of ``jobs`` (evaluate needs train), in order, with the code of
    ``checkout``; the digest of each output. ``work`` holds the outputs and the checkout's import root."""
    import yaml

    env = checkout_env(checkout, work / "import_root")

    def run(*args: Any) -> None:
        cli(env, *args)

    out: dict[str, str] = {}
    store = work / "c3d.zarr"
    run("render", "--scene", "causal3dident", "--n", 64, "--resolution", 16, "--samples", 2, "--chunk-size", 8,
        "--views", "hues:hues", "--out", store, "--workers", 1, "--no-progress")
    out["render"] = array_digest(store)
    if "export_import" in jobs:
        published = work / "published"
        run("export", store, "--format", "3dident", "--out", published)
        run("import", "--format", "3dident", published, "--out", work / "imported.zarr", "--chunk-size", 8,
            "--workers", 1, "--no-progress")
        out["export_import"] = array_digest(work / "imported.zarr")
    if "train" in jobs:
        run("train", "--data", store, "--views", "colour", "--encoder", "cnn", "--steps", 3, "--batch-size", 8,
            "--lr", 1e-3, "--device", "cpu", "--out", work / "run", "--no-progress")
        out["train"] = weights_digest(work / "run" / "checkpoint.pt")
    if "evaluate" in jobs:
        run("evaluate", "--run", work / "run", "--data", store, "--no-kernel", "--fit", 20, "--score", 44,
            "--metrics", "dci,mig", "--out", work / "report.json")
        out["evaluate"] = json_digest(work / "report.json")
    if "compare" in jobs:
        (work / "compare.yaml").write_text(yaml.safe_dump(COMPARE))
        run("compare", "--config", work / "compare.yaml", "--out", work / "compare", "--no-progress")
        out["compare"] = json_digest(work / "compare" / "table.json")
    if "synthetic" not in jobs:
        return out
    synthetic = ("synthetic", "--config", work / "synthetic.yaml", "--out", work / "synthetic", "--no-progress",
                 "--no-figures")
    (work / "synthetic.yaml").write_text(yaml.safe_dump(SYNTHETIC))
    try:
        run(*synthetic)
    except SystemExit as exc:  # a checkout from before evaluate's keys were compare's refuses them (nothing written)
        if "evaluate takes" not in str(exc):
            raise
        (work / "synthetic.yaml").write_text(yaml.safe_dump({**SYNTHETIC, "evaluate": {"n_fit": 300, "n_score": 300}}))
        run(*synthetic)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkout", type=Path,
                    help="the source checkout whose code runs the jobs (default: the one this script is in)")
    ap.add_argument("--out", help="JSON file of the digests")
    ap.add_argument("--work", help="scratch folder (replaced)")
    ap.add_argument("--compare", help="an earlier digests JSON: say which jobs differ (exit 1 if any)")
    tiny = add_tiny(ap, "the render job only")
    args = ap.parse_args(argv)
    if args.checkout is None:
        other = [p for p in filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))
                 if (Path(p) / "ident3d" / "__init__.py").is_file() and Path(p).resolve() != ROOT]
        if other:  # how this script was given a checkout before: it would run its own checkout's code instead
            ap.error(f"PYTHONPATH does not choose the checkout: pass --checkout {other[0]}")
    checkout = (args.checkout or ROOT).resolve()
    if not (checkout / "ident3d" / "__init__.py").is_file() and not package_dirs(checkout):
        ap.error(f"--checkout {args.checkout}: not a source checkout of ident3d (no ident3d package)")
    tiny.apply(args, paths={"out": "goldens.json", "work": "work"})
    if not args.out or not args.work:
        ap.error("give --out and --work (or --tiny)")
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    print(f"goldens: the code of {checkout}", flush=True)
    digests = run_all(work, TINY_JOBS if args.tiny else JOBS, checkout)
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
