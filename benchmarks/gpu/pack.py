"""Build the GPU kit's pack here, for a GPU window: an ident3d wheel of this checkout's HEAD, the cp312 manylinux
wheels of what the GPU image lacks (``core``) and may lack (``optional``), named Zarr stores as tar parts of at most
50 MiB (``data:NAME``), and ``manifest.json`` (every file's sha256, size and group, and the ident3d commit). It prints
the sizes and which files travel together in one device call (a carry of at most 50 MiB beside the working tree).

    python benchmarks/gpu/pack.py --data throughput64=stores/tp64.zarr
    python benchmarks/gpu/pack.py --no-optional --data paper001_3dident.train=runs/p1/stores/train.zarr ...
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from kit_pack_format import (
    FORMAT,
    MANIFEST,
    PART_MIB,
    KitError,
    check_name,
    mib,
    part_entry,
    plan_carries,
    read_manifest,
    tar_parts,
    write_manifest,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PACK = ROOT / "benchmarks" / "gpu" / "pack"
DEFAULT_WORK = ROOT / "benchmarks" / "gpu" / "work"
# What ident3d's training, evaluation and experiment path imports that the GPU image (Python 3.12, torch 2.11,
# numpy 2.5, torchvision, scipy, scikit-learn, pyyaml, ...; /work/.library/device/KINDS.md) lacks. zarr 3.4 also
# needs msgspec; pyyaml, packaging and typing-extensions are on the image. Dask is not needed: the kit runs an
# experiment's cells one after another, as one GPU wants.
CORE = ("kornia==0.9.0", "kornia-rs==0.2.0", "zarr==3.4.2", "numcodecs==0.17.1", "donfig==0.8.1.post1",
        "google-crc32c==1.9.0", "msgspec==0.22.0")
# On the image as last read; carried in case one is missing there (installed only where it cannot be imported).
# typing-extensions: zarr 3.4 wants >= 4.14, installed over the image's only with run.py --upgrade typing_extensions.
OPTIONAL = ("scipy==1.18.1", "scikit-learn==1.9.1", "networkx==3.7", "typing-extensions==4.16.0")
# pip matches platform tags exactly: scipy and scikit-learn publish manylinux_2_27/2_28 wheels only
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_27_x86_64", "manylinux_2_28_x86_64")


def git(*args: str) -> str:
    """A git command's output in the checkout (one line saying why it failed)."""
    r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise KitError(f"git {' '.join(args)} failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return r.stdout


def ident3d_wheel(dest: Path) -> tuple[Path, str]:
    """Build the ident3d wheel of HEAD (a ``git archive``, so other people's uncommitted edits of the working tree
    stay out of it) into ``dest``; returns the wheel and the commit."""
    commit = git("rev-parse", "HEAD").strip()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit], capture_output=True)
        if archive.returncode != 0:
            raise KitError(f"git archive {commit} failed: {archive.stderr.decode(errors='replace').strip()}")
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(src, filter="data")
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "--disable-pip-version-check", "-w", str(dest), str(src)], capture_output=True, text=True)
        if r.returncode != 0:
            raise KitError(f"pip wheel of ident3d failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    [wheel] = dest.glob("ident3d-*.whl")
    return wheel, commit


def download(pins: tuple[str, ...], dest: Path, python_version: str) -> list[Path]:
    """Download the binary wheels ``pins`` (no dependencies) for CPython ``python_version`` on manylinux x86_64."""
    dest.mkdir(parents=True, exist_ok=True)
    plats = [a for p in PLATFORMS for a in ("--platform", p)]
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--python-version", python_version, "--implementation", "cp", *plats,
                        "--disable-pip-version-check", "-q", "-d", str(dest), *pins], capture_output=True, text=True)
    if r.returncode != 0:
        lines = [line for line in r.stderr.strip().splitlines() if "is ignored" not in line]
        raise KitError(f"pip download failed: {(lines or ['?'])[-1]}")
    return sorted(dest.glob("*.whl"))


def wheel_info(wheel: Path) -> dict[str, str]:
    """A wheel's distribution, version, dist-info folder and importable top-level module (what the runner asks
    ``find_spec`` for): the top-level name that is the distribution's own, else the first that is not a ``.libs``
    folder or private (scikit_learn -> sklearn)."""
    with zipfile.ZipFile(wheel) as zf:
        tops = {name.split("/")[0] for name in zf.namelist()}
    dist_info = next(t for t in sorted(tops) if t.endswith(".dist-info"))
    dist, version = dist_info.removesuffix(".dist-info").rsplit("-", 1)
    modules = sorted({t.split(".")[0] for t in tops if not t.endswith((".dist-info", ".data", ".libs"))
                      and not t.startswith("_")})
    own = dist.lower().replace("-", "_")
    module = own if own in modules else modules[0]
    return {"dist": dist, "version": version, "dist_info": dist_info, "module": module}


def parse_data(items: list[str]) -> dict[str, Path]:
    """``--data NAME=PATH`` values: each a plain name and a Zarr store folder (one line for a bad one)."""
    out: dict[str, Path] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise KitError(f"--data takes NAME=PATH (a Zarr store), got {item!r}")
        if check_name(name) in out:
            raise KitError(f"--data {name} is given twice")
        store = Path(path).expanduser()
        if not (store / "zarr.json").is_file():
            raise KitError(f"--data {name}={path}: not a Zarr store (no zarr.json there)")
        out[name] = store
    return out


def check_stores(data: dict[str, Path]) -> None:
    """Every store to pack is finished and undamaged, as ``ident3d check`` finds it (``ident3d.store.check``: every
    array of every done chunk decodes); the GPU machine has no Blender to finish or repair one. One line otherwise."""
    from ident3d.causal.errors import UserError
    from ident3d.store.check import check_store, ranges

    for name, store in data.items():
        try:
            report = check_store(str(store))
        except UserError as exc:
            raise KitError(f"data {name} ({store}): {exc}") from None
        if not report.ok:
            first = report.bad[0]
            raise KitError(f"data {name} ({store}) is damaged ({len(report.bad_chunks)} bad chunks, the first: chunk "
                           f"{first.chunk} of {first.array}: {first.error}); run `ident3d check {store} --repair`, "
                           "re-run its render command, then pack it")
        if report.not_done:
            raise KitError(f"data {name} ({store}) is unfinished ({len(report.not_done)} of its "
                           f"{len(report.done) + len(report.not_done)} chunks not done: {ranges(report.not_done)}); "
                           "finish its render (re-run the command that made it) before packing it: the GPU machine "
                           "has no Blender")


def build_pack(out: Path, data: dict[str, Path], wheels: bool = True, optional: bool = True,
               part_mib: float = PART_MIB, python_version: str = "3.12", overwrite: bool = False) -> dict[str, Any]:
    """Build the pack folder ``out`` (a new or empty folder, or with ``overwrite`` an earlier pack); returns its
    manifest. ``wheels`` False: data only, no ident3d wheel and no downloads (a machine that has everything)."""
    if out.exists() and any(out.iterdir()):
        if not (out / MANIFEST).is_file():
            raise KitError(f"{out} is not empty and not a GPU-kit pack; choose a new or empty folder for --out")
        if not overwrite:
            raise KitError(f"{out} holds a pack already; pass --overwrite to replace it")
        read_manifest(out)  # a pack of this kit's format, not some other folder with a manifest.json
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    parts: list[dict[str, Any]] = []
    commit = git("rev-parse", "HEAD").strip()
    if wheels:
        wheel, commit = ident3d_wheel(out / "core")
        download(CORE, out / "core", python_version)
        parts += [part_entry(out, w, "core", **wheel_info(w)) for w in sorted((out / "core").glob("*.whl"))]
        if optional:
            parts += [part_entry(out, w, "optional", **wheel_info(w))
                      for w in download(OPTIONAL, out / "optional", python_version)]
    (out / "data").mkdir(exist_ok=True)
    for name, store in data.items():
        parts += [part_entry(out, p, f"data:{name}") for p in tar_parts(store, out / "data" / name, part_mib)]
    dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    manifest = {"format": FORMAT, "ident3d_commit": commit, "ident3d_wheel": "git archive of the commit" if wheels
                else None, "working_tree_had_changes": dirty, "python": python_version, "platforms": list(PLATFORMS),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "part_mib": part_mib,
                "data": {name: str(store) for name, store in data.items()}, "parts": parts}
    manifest["carries"] = plan_carries(carry_items(parts), part_mib)
    write_manifest(out, manifest)
    return manifest


def carry_items(parts: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """What the device tool carries, in order: the ``core`` folder as one path, then each data part, then each
    optional wheel."""
    core = sum(p["size"] for p in parts if p["group"] == "core")
    items = [("core", core)] if core else []
    items += [(p["path"], p["size"]) for p in parts if p["group"].startswith("data:")]
    return items + [(p["path"], p["size"]) for p in parts if p["group"] == "optional"]


def summary(out: Path, manifest: dict[str, Any]) -> str:
    """The pack's sizes per group and the carries, as the device tool's ``carry`` lists (paths from the checkout's
    root where the pack is inside it)."""
    groups: dict[str, int] = {}
    for p in manifest["parts"]:
        groups[p["group"]] = groups.get(p["group"], 0) + p["size"]
    total = sum(groups.values())
    lines = [f"pack {out}: {len(manifest['parts'])} files, {mib(total)}; ident3d {manifest['ident3d_commit'][:12]}"]
    lines += [f"  {group:32s} {mib(size):>10s}" for group, size in groups.items()]
    sizes = {p["path"]: p["size"] for p in manifest["parts"]}
    sizes["core"] = groups.get("core", 0)
    try:
        prefix = out.resolve().relative_to(ROOT).as_posix() + "/"
    except ValueError:
        prefix = str(out) + "/"
    carries = manifest["carries"]
    if len(carries) == 1:
        lines.append(f"everything fits one carry ({mib(total)} <= {manifest['part_mib']} MiB): "
                     f'carry ["{prefix.rstrip("/")}"]')
    else:
        lines.append(f"{len(carries)} carries of at most {manifest['part_mib']} MiB (one device call each, same "
                     "machine while it stays warm):")
    for i, paths in enumerate(carries, 1):
        size = sum(sizes.get(p, 0) for p in paths)
        lines.append(f"  carry {i} ({mib(size)}): [" + ", ".join(f'"{prefix}{p}"' for p in paths) + "]")
    if manifest.get("ident3d_wheel") and manifest.get("working_tree_had_changes"):
        lines.append("note: the working tree has uncommitted changes; the ident3d wheel is the commit alone")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: build the pack and print its sizes and carries; a bad input is one line and exit 2."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_PACK, help="the pack folder (default: benchmarks/gpu/pack)")
    ap.add_argument("--data", action="append", default=[], metavar="NAME=PATH",
                    help="a Zarr store to carry as NAME (repeatable): throughput* stores feed the throughput job, "
                         "STEM.KEY stores the experiment configs/STEM.yaml's stores.KEY")
    ap.add_argument("--tiny-data", action="store_true",
                    help="also carry the tiny stores (rendered here) that run.py --tiny uses: a smoke test there")
    ap.add_argument("--no-wheels", action="store_true", help="data only: no ident3d wheel, nothing downloaded")
    ap.add_argument("--no-optional", action="store_true", help="leave out the optional wheels (scipy, ...)")
    ap.add_argument("--part-mib", type=float, default=PART_MIB, help="largest data part and carry, MiB (default 50)")
    ap.add_argument("--python-version", default="3.12", help="the GPU machine's Python (default 3.12)")
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help="where --tiny-data renders its stores")
    ap.add_argument("--overwrite", action="store_true", help="replace an earlier pack in --out")
    args = ap.parse_args(argv)
    try:
        data = parse_data(args.data)
        if args.tiny_data:
            from kit_tiny import tiny_stores

            clash = sorted(set(data) & {"tiny.train", "tiny.test"})
            if clash:
                raise KitError(f"--data {clash[0]} clashes with --tiny-data's store of that name")
            data.update(tiny_stores(args.work))
        check_stores(data)
        manifest = build_pack(args.out, data, wheels=not args.no_wheels, optional=not args.no_optional,
                              part_mib=args.part_mib, python_version=args.python_version, overwrite=args.overwrite)
    except KitError as exc:
        print(f"pack.py: error: {exc}", file=sys.stderr)
        return 2
    print(summary(args.out, manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
