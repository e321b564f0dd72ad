"""The GPU kit's runner, for one window on a lent GPU machine (Python 3.12, torch, numpy; no bpy, kornia, zarr or dask,
no network): check the carried pack, install the wheels this Python lacks, unpack the stores, run the jobs within a
time budget and write results.json into --out. Standard library, torch and numpy only until the pack is installed.

    python benchmarks/gpu/run.py --device cuda --pack benchmarks/gpu/pack --out $OUT/gpu --job throughput
    python benchmarks/gpu/run.py --device cuda --pack benchmarks/gpu/pack --out $OUT/gpu --job experiment \\
        --config configs/paper001_3dident.yaml
    python benchmarks/gpu/run.py --device cpu --tiny --out /tmp/kit     # every job at toy size, here
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from kit_install import check_parts, install_wheels, unpack_data, wheels_to_install
from kit_pack_format import KitError, data_names, data_parts, read_manifest

ROOT = Path(__file__).resolve().parents[2]
JOBS = ("throughput", "experiment")
DEFAULTS = {"encoder": "resnet18", "batch_size": 512, "steps": 30,
            "loader_workers": min(8, max(0, (os.cpu_count() or 1) - 1))}


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cuda", "cpu"), required=True, help="where the jobs train")
    ap.add_argument("--out", type=Path, required=True, help="folder for results.json (and tables)")
    ap.add_argument("--pack", type=Path, help="the carried pack (pack.py's --out); --tiny without it builds one")
    ap.add_argument("--job", action="append", choices=JOBS, help="a job to run (repeatable; default: every job)")
    ap.add_argument("--tiny", action="store_true", help="every job at toy size on the tiny stores (under a minute)")
    ap.add_argument("--config", action="append", type=Path, default=[],
                    help="an experiment config for the experiment job (repeatable); its stores are the pack's "
                         "data STEM.KEY")
    ap.add_argument("--throughput-data", action="append", default=[], metavar="NAME",
                    help="a store of the pack for the throughput job (default: every data named throughput*)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="time for everything, seconds (default 480)")
    ap.add_argument("--encoder", help="the throughput job's encoder (default resnet18; --tiny: cnn)")
    ap.add_argument("--batch-size", type=int, help=f"throughput batch (default {DEFAULTS['batch_size']})")
    ap.add_argument("--steps", type=int, help=f"timed steps per throughput measurement (default {DEFAULTS['steps']})")
    ap.add_argument("--loader-workers", type=int, help="the baseline DataLoader's workers (default: cores - 1, <= 8)")
    ap.add_argument("--upgrade", action="append", default=[], metavar="NAME",
                    help="install this pack wheel even where its module imports (e.g. typing_extensions)")
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "gpu" / "work",
                    help="installed wheels, unpacked stores, experiment outputs (kept while the machine is warm)")
    ap.add_argument("--check", action="store_true", help="only check the pack: which carries are here, hashes")
    ap.add_argument("--overwrite", action="store_true", help="replace an earlier results.json in --out")
    return ap.parse_args(argv)


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The throughput job's batch, steps and loader workers: given, or the tiny or full defaults (one line for a
    bad value)."""
    from kit_tiny import THROUGHPUT

    base = THROUGHPUT if args.tiny else DEFAULTS
    out = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in base.items()}
    for key, low in (("batch_size", 2), ("steps", 1), ("loader_workers", 0)):
        if out[key] < low:
            raise KitError(f"--{key.replace('_', '-')} must be >= {low}, got {out[key]}")
    if not args.budget_s > 0:
        raise KitError(f"--budget-s must be > 0, got {args.budget_s}")
    return out


def the_pack(args: argparse.Namespace, work: Path) -> Path:
    """The pack to run: --pack, or with --tiny and none a data-only pack of the tiny stores built here."""
    if args.pack is not None:
        return args.pack
    if not args.tiny:
        raise KitError("--pack is required (the folder pack.py built and the device call carried), or pass --tiny")
    from kit_tiny import tiny_stores
    from pack import build_pack

    build_pack(work / "tiny_pack", tiny_stores(work), wheels=False, overwrite=True)
    return work / "tiny_pack"


def check_report(pack: Path, manifest: dict[str, Any]) -> str:
    """``--check``: the hashes of every part here, and which carries are complete."""
    checked, absent = check_parts(pack, manifest, [])
    sizes = {p["path"]: p for p in manifest["parts"]}
    lines = [f"pack {pack}: {checked} of {checked + absent} files here, every sha256 as in the manifest; "
             f"ident3d {manifest['ident3d_commit'][:12]}"]
    for i, paths in enumerate(manifest.get("carries", []), 1):
        missing = [p for p in paths[1:] if not _here(pack, p, sizes)]
        lines.append(f"  carry {i}: " + ("here" if not missing else "missing " + ", ".join(missing)))
    return "\n".join(lines)


def _here(pack: Path, path: str, parts: dict[str, Any]) -> bool:
    """Whether a carry's path (a file, or the core folder) is all here."""
    if path in parts:
        return (pack / path).is_file()
    return all((pack / p).is_file() for p in parts if p.startswith(path + "/"))


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's core count."""
    import torch

    if device == "cuda":
        return torch.cuda.get_device_name()
    return f"cpu ({os.cpu_count()} cores, {platform.machine()})"


def forget(module: str) -> None:
    """Drop ``module`` (and its submodules) from sys.modules, so an upgraded wheel (e.g. typing_extensions, which
    torch imported from the image before the pack's folder joined sys.path) is imported again from the pack."""
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        del sys.modules[name]


def install(pack: Path, manifest: dict[str, Any], work: Path, upgrade: list[str],
            data: list[str]) -> tuple[list[Path], dict[str, Any]]:
    """Check the pack for what the jobs need, install the wheels this Python lacks and put them first on sys.path;
    returns the paths a child process needs first and what was done."""
    site = work / "site"
    need, done = wheels_to_install(manifest, site, upgrade)
    check_parts(pack, manifest, [*need, *(p for name in data for p in data_parts(manifest, name))])
    how = install_wheels(pack, need, site)
    paths = []
    if need or done:
        sys.path.insert(0, str(site))
        importlib.invalidate_caches()
        paths.append(site)
    for part in [*need, *done]:
        forget(part["module"])
    for part in [*need, *done]:
        try:
            importlib.import_module(part["module"])
        except Exception as exc:  # noqa: BLE001 - any failure of an installed module is said in one line
            raise KitError(f"import {part['module']} fails after installing {part['path']}: "
                           f"{type(exc).__name__}: {exc}") from None
    import ident3d  # a finished carried store resumes without bpy (the render driver checks bpy only to render)

    return paths, {
        "installed": [p["path"] for p in need], "already_installed": [p["path"] for p in done], "how": how,
        "ident3d_from": str(Path(ident3d.__file__).parent)}


def throughput_data(args: argparse.Namespace, manifest: dict[str, Any], pack: Path) -> list[str]:
    """The throughput job's stores: --throughput-data, the tiny train store, or every data named throughput* of
    which a part is here (one whose parts came in another carry waits for its own call)."""
    names = ["tiny.train"] if args.tiny and not args.throughput_data else list(args.throughput_data)
    names = names or [n for n in data_names(manifest) if n.startswith("throughput")
                      and any((pack / p["path"]).is_file() for p in data_parts(manifest, n))]
    if not names:
        raise KitError("the throughput job needs a store with an LT view in the pack, carried: pack.py --data "
                       "throughput64=STORE (or name one with --throughput-data)")
    if args.tiny and "tiny.train" in names and "tiny.train" not in data_names(manifest):
        raise KitError("--tiny: the pack has no tiny stores; build it with pack.py --tiny-data, or leave out --pack")
    for name in names:
        if name not in data_names(manifest):
            raise KitError(f"--throughput-data {name}: the pack has no such data (it has: "
                           f"{', '.join(data_names(manifest)) or 'none'})")
    return names


def write_results(out: Path, results: dict[str, Any]) -> None:
    """results.json, rewritten after every job (a cut-off window keeps what finished)."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.replace(out / "results.json")


def run(args: argparse.Namespace) -> int:
    """Check, install, unpack, run every job and write results.json; 0 when every job finished, 1 otherwise."""
    import numpy as np
    import torch

    t0 = time.monotonic()
    deadline = t0 + args.budget_s
    knobs = settings(args)
    jobs = list(dict.fromkeys(args.job or JOBS))
    if args.device == "cuda" and not torch.cuda.is_available():
        raise KitError(f"--device cuda: torch {torch.__version__} sees no CUDA device here")
    if not args.check and (args.out / "results.json").exists() and not args.overwrite:
        raise KitError(f"{args.out} holds a results.json already; choose another --out or pass --overwrite")
    work = args.work.resolve()
    pack = the_pack(args, work)
    manifest = read_manifest(pack)
    if args.check:
        print(check_report(pack, manifest))
        return 0
    from kit_experiment import data_for

    configs = args.config
    if args.tiny and not configs:
        from kit_tiny import tiny_config

        configs = [tiny_config(work)]
    if "experiment" in jobs and not configs:
        raise KitError("the experiment job needs --config CONFIG (an experiment config, e.g. configs/X.yaml)")
    tp_names = throughput_data(args, manifest, pack) if "throughput" in jobs else []
    exp_data = [n for c in configs for n in data_for(c.stem, manifest)] if "experiment" in jobs else []
    paths, setup = install(pack, manifest, work, args.upgrade, [*tp_names, *exp_data])

    def unpack(name: str, dest: Path) -> Path:
        """Unpack the pack's data ``name`` into ``dest`` (once per machine)."""
        return unpack_data(pack, manifest, name, dest, work)

    from kit_experiment import plan, run_experiment
    from kit_throughput import run_throughput, store_view

    tp_stores = {name: unpack(name, work / "data" / f"{name}.zarr") for name in tp_names}
    for store in tp_stores.values():
        store_view(store)
    can_render = importlib.util.find_spec("bpy") is not None
    plans = [plan(c, manifest, can_render=can_render) for c in configs] if "experiment" in jobs else []
    common = {"device": args.device, "device_name": device_name(args.device), "torch": torch.__version__,
              "numpy": np.__version__, "python": platform.python_version(),
              "command": "python " + shlex.join(sys.argv), "ident3d_commit": manifest["ident3d_commit"],
              "ident3d_from": setup["ident3d_from"]}
    results = {**common, "kit": 1, "tiny": args.tiny, "budget_s": args.budget_s, "pack": str(pack),
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "setup": setup,
               "setup_s": time.monotonic() - t0, "jobs": {}}
    write_results(args.out, results)
    failed = False
    for job in jobs:
        start = time.monotonic()
        entry: dict[str, Any] = {"job": job, **common}
        try:
            if job == "throughput":
                numbers = run_throughput(tp_stores, torch.device(args.device), knobs["encoder"], knobs["batch_size"],
                                         knobs["steps"], knobs["loader_workers"], deadline)
                done = sum(len(by) for s in numbers["stores"].values() for by in s["img_per_s"].values())
                entry.update(status="ok", steps=knobs["steps"] * done, numbers=numbers)
            else:
                runs = {p.stem: run_experiment(p, args.device, work, args.out, unpack, paths, deadline)
                        for p in plans}
                statuses = {r["status"] for r in runs.values()}
                entry.update(status="ok" if statuses == {"ok"} else sorted(statuses - {"ok"})[0],
                             steps=sum((r["steps_per_cell"] or 0) * r["cells"] for r in runs.values()), numbers=runs)
        except KitError:
            raise
        except Exception as exc:  # noqa: BLE001 - a job that breaks is recorded; the others still run
            entry.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        entry["wall_s"] = time.monotonic() - start
        failed |= entry["status"] != "ok"
        results["jobs"][job] = entry
        write_results(args.out, results)
        print(f"{job}: {entry['status']} in {entry['wall_s']:.1f} s" + (f" ({entry['error']})" if "error" in entry
                                                                           else ""), flush=True)
    print(summary(results))
    return 1 if failed else 0


def summary(results: dict[str, Any]) -> str:
    """The numbers worth reading at the end of the device call's output."""
    lines = [f"{results['device_name']}, torch {results['torch']}, ident3d {results['ident3d_commit'][:12]}"]
    tp = results["jobs"].get("throughput", {}).get("numbers", {})
    for name, s in tp.get("stores", {}).items():
        for pipe, by in s["img_per_s"].items():
            lines.append(f"  {name} ({s['resolution']} px) {pipe:45s} " + ", ".join(f"{k} {v:,.0f} img/s"
                                                                                 for k, v in by.items()))
    for stem, r in results["jobs"].get("experiment", {}).get("numbers", {}).items():
        lines.append(f"  experiment {stem}: {r['status']}, {r['cells']} cells in {r['seconds']:.1f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line; a bad input is one line and exit 2."""
    args = parse(argv)
    try:
        return run(args)
    except KitError as exc:
        print(f"run.py: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
