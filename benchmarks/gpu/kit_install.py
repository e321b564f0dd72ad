"""What the runner does with a carried pack before any job: check every part's hash, install the wheels whose
module this Python lacks into a folder of their own, and unpack named stores. Standard library only: it runs
before the pack is installed."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kit_pack_format import KitError, data_names, data_parts, sha256, untar_parts


def base_importable(module: str) -> bool:
    """Whether this Python imports ``module`` without the pack (asked before the pack's folder joins sys.path)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def wheels_to_install(manifest: dict[str, Any], site: Path, upgrade: Iterable[str] = (),
                      importable: Callable[[str], bool] = base_importable) -> tuple[list[dict], list[dict]]:
    """(wheels this Python needs from the pack, those of them already installed in ``site`` by an earlier run):
    a wheel is needed when its module is not importable here, or when ``upgrade`` names its module or
    distribution."""
    forced = {u.lower().replace("-", "_") for u in upgrade}
    need, done = [], []
    for part in manifest["parts"]:
        if "module" not in part:
            continue
        if importable(part["module"]) and not {part["module"].lower(), part["dist"].lower()} & forced:
            continue
        (done if (site / part["dist_info"]).is_dir() else need).append(part)
    return need, done


def check_parts(pack: Path, manifest: dict[str, Any], required: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """Check the pack: a part that is here with another sha256 or size is damaged, a ``required`` one that is not
    here is missing; either is one line naming it. Returns (parts checked, parts not here)."""
    for part in required:
        if not (pack / part["path"]).is_file():
            raise KitError(f"pack part {part['path']} ({part['group']}) is missing from {pack}: carry it (pack.py "
                           "printed which carry holds it)")
    checked = absent = 0
    for part in manifest["parts"]:
        path = pack / part["path"]
        if not path.is_file():
            absent += 1
            continue
        if path.stat().st_size != part["size"] or sha256(path) != part["sha256"]:
            raise KitError(f"pack part {part['path']} ({part['group']}) is damaged: its sha256 is not the "
                           "manifest's; carry it again")
        checked += 1
    return checked, absent


def install_wheels(pack: Path, parts: list[dict[str, Any]], site: Path) -> str:
    """Install the wheels ``parts`` into ``site`` (no index, no dependencies, whatever Python they ask for): with
    pip where this Python has it, else by unpacking them. Returns how ("pip", "unzip" or "none")."""
    if not parts:
        return "none"
    site.mkdir(parents=True, exist_ok=True)
    wheels = [str(pack / p["path"]) for p in parts]
    if importlib.util.find_spec("pip") is None:
        for wheel in wheels:
            unpack_wheel(Path(wheel), site)
        return "unzip"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--ignore-requires-python",
                        "--upgrade", "--no-compile", "--disable-pip-version-check", "-q", "--target", str(site),
                        *wheels], capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise KitError(f"pip could not install the pack's wheels into {site}: {last}")
    return "pip"


def unpack_wheel(wheel: Path, site: Path) -> None:
    """Unpack a wheel as pip would into a target folder: its files at the root, ``*.data/purelib`` and
    ``*.data/platlib`` moved there too (scripts and headers are not needed)."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            parts = info.filename.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            if info.is_dir() or ".." in parts:
                continue
            dest = site.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, dest.open("wb") as out:
                shutil.copyfileobj(src, out)


def unpack_data(pack: Path, manifest: dict[str, Any], name: str, dest: Path, work: Path) -> Path:
    """Unpack the store ``name`` into ``dest``, unless an earlier run on this machine unpacked the same parts there
    (a record in ``WORK/unpacked.json``); returns ``dest``."""
    parts = data_parts(manifest, name)
    if not parts:
        raise KitError(f"the pack has no data {name!r}; it has: {', '.join(data_names(manifest)) or 'none'}")
    digest = ",".join(p["sha256"] for p in parts)
    record = work / "unpacked.json"
    done = json.loads(record.read_text()) if record.is_file() else {}
    key = str(dest.resolve())
    if done.get(key) == digest and (dest / "zarr.json").is_file():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    untar_parts([pack / p["path"] for p in parts], dest)
    if not (dest / "zarr.json").is_file():  # e.g. a pack built from an empty or missing folder: parts of no store
        files = sum(1 for q in dest.rglob("*") if q.is_file())
        shutil.rmtree(dest)
        raise KitError(f"the pack's data {name} holds no Zarr store: its parts ({', '.join(p['path'] for p in parts)}) "
                       f"unpack to {files} files and no zarr.json; build the pack again with pack.py (it checks "
                       "each store) and carry it")
    done[key] = digest
    work.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(done, indent=1) + "\n")
    return dest

