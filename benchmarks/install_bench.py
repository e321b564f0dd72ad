"""A fresh install of ident3d with one Python, as the README says (a new venv, ``pip install -e .``), with an empty
pip cache (``--no-cache-dir``): wall time, the venv's size, and which packages were downloaded and which were taken
from this machine's disk (a local index or wheel folder in pip's configuration: torch for Python 3.11 lies there).

    python benchmarks/install_bench.py python3.11 --out results/install.json
    PYENV_VERSION=3.13.0 python benchmarks/install_bench.py python3.13 --out results/install.json

Each run adds (or replaces) its line, keyed by the Python's major.minor, in the JSON. The venv is made in a fresh
temporary folder and removed afterwards (``--keep`` keeps it).

    python benchmarks/install_bench.py --tiny      # a venv with a one-module wheel instead of ident3d (a test)

``--tiny`` makes the venv without pip and installs a wheel of one empty module, built here by hand, with this
interpreter's pip (``--python``) and ``--no-index`` (no network, no build backend): the script's steps and report,
not an install's cost.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

REPO = Path(__file__).resolve().parents[1]
DOWNLOAD = re.compile(r"Downloading (\S+) \(([\d.]+) (kB|MB|GB)\)")
UNITS = {"kB": 1e-3, "MB": 1.0, "GB": 1e3}
BIG_MB = 10.0  # packages listed one by one in the JSON (the rest are counted)


def venv_bytes(path: Path) -> int:
    """Bytes of every regular file below ``path`` (``du -sb``, without following links)."""
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def sources(report: dict, log: str) -> list[dict]:
    """Each installed package (pip's ``--report``): where its file came from (``download``: the network, ``disk``: a
    local file) and its size in MB (the downloaded size pip printed, or the local file's)."""
    sizes = {Path(urlparse(name).path).name: float(v) * UNITS[u] for name, v, u in DOWNLOAD.findall(log)}
    out = []
    for item in report["install"]:
        url = item.get("download_info", {}).get("url", "")
        meta = item.get("metadata", {})
        parsed = urlparse(url)
        name = Path(unquote(parsed.path)).name
        if parsed.scheme == "file":
            path = Path(unquote(parsed.path))
            where, mb = ("disk", path.stat().st_size / 1e6) if path.is_file() else ("source tree", 0.0)
        else:
            where, mb = "download", sizes.get(name, 0.0)
        out.append({"package": meta.get("name", name), "version": meta.get("version", ""), "file": name,
                    "from": where, "mb": round(mb, 1)})
    return out


def pip_config(pip: list[str]) -> list[str]:
    """pip's effective configuration lines (index, find-links, constraints): what 'from disk' means here."""
    r = subprocess.run([*pip, "config", "list"], capture_output=True, text=True)
    return [line for line in r.stdout.splitlines() if not line.startswith(":env:.cert")]


def probe_wheel(folder: Path) -> Path:
    """A wheel of one empty module, ``ident3d_tiny_probe`` (what ``--tiny`` installs instead of the repository)."""
    name, version = "ident3d_tiny_probe", "0.0.1"
    info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": b"",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: install_bench\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n"}
    digest = {k: base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=").decode() for k, v in files.items()}
    record = "".join(f"{k},sha256={digest[k]},{len(v)}\n" for k, v in files.items()) + f"{info}/RECORD,,\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for k, v in [*files.items(), (f"{info}/RECORD", record.encode())]:
            z.writestr(k, v)
    return wheel


def bench(python: str, keep: bool, tiny: bool = False) -> dict:
    """Make a venv with ``python``, install the repository into it with an empty cache, and measure (``tiny``: a
    one-module wheel from no index instead)."""
    folder = Path(tempfile.mkdtemp(prefix="ident3d_install_"))
    venv = folder / "venv"
    make = [python, "-m", "venv", *(["--without-pip"] if tiny else []), str(venv)]
    pip = ([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")] if tiny  # this pip, into it
           else [str(venv / "bin" / "python"), "-m", "pip"])
    what = ["--no-index", str(probe_wheel(folder))] if tiny else ["-e", str(REPO)]
    install = [*pip, "install", "--no-cache-dir", "--report", str(folder / "report.json"), *what]
    try:
        t0 = time.perf_counter()
        subprocess.run(make, check=True)
        t1 = time.perf_counter()
        r = subprocess.run(install, capture_output=True, text=True, cwd=REPO)
        t2 = time.perf_counter()
        (folder / "pip.log").write_text(r.stdout + r.stderr)
        if r.returncode:
            sys.exit(f"pip install failed (log: {folder / 'pip.log'}):\n{r.stderr[-2000:]}")
        check = None if tiny else subprocess.run([str(venv / "bin" / "ident3d"), "--help"], capture_output=True,
                                                 text=True)
        py = subprocess.run([str(venv / "bin" / "python"), "-c", "import platform; print(platform.python_version())"],
                            capture_output=True, text=True, check=True).stdout.strip()
        pkgs = sources(json.loads((folder / "report.json").read_text()), r.stdout)
        versions = {p["package"].lower(): p["version"] for p in pkgs}
        down = [p for p in pkgs if p["from"] == "download"]
        disk = [p for p in pkgs if p["from"] == "disk"]
        return {
            "python": py, "pip": subprocess.run([*pip, "--version"], capture_output=True, text=True).stdout.split()[1],
            "commands": [" ".join(cmd).replace(str(folder), "$TMP") for cmd in (make, install)],
            "venv_seconds": round(t1 - t0, 1), "install_seconds": round(t2 - t1, 1),
            "total_seconds": round(t2 - t0, 1), "venv_mb": round(venv_bytes(venv) / 1e6, 1),
            "ident3d_help_ok": None if check is None else check.returncode == 0,
            "key_versions": {k: versions.get(k) for k in ("bpy", "numpy", "zarr", "torch", "torchvision")},
            "packages": len(pkgs), "downloaded": {"count": len(down), "mb": round(sum(p["mb"] for p in down), 1)},
            "from_disk": {"count": len(disk), "mb": round(sum(p["mb"] for p in disk), 1)},
            "big_packages": sorted((p for p in pkgs if p["mb"] >= BIG_MB), key=lambda p: -p["mb"]),
            "small_packages": {p["package"]: p["from"] for p in pkgs if p["mb"] < BIG_MB},
            "pip_config": pip_config(pip),
        }
    finally:
        if keep:
            print(f"kept {folder} (venv, pip.log, report.json)")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Measure one Python's install and merge it into the JSON under its major.minor."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("python", nargs="?", help="the Python executable to install with (python3.11, python3.13, a path)")
    ap.add_argument("--out", type=Path, default=Path("results/install.json"))
    ap.add_argument("--keep", action="store_true", help="keep the venv, its pip log and report (printed)")
    tiny = add_tiny(ap, "a venv with a one-module wheel from no index instead of ident3d")
    args = ap.parse_args(argv)
    tiny.apply(args, sizes={"python": sys.executable})
    if args.python is None:
        ap.error("give the Python to install with (or --tiny)")
    line = bench(args.python, args.keep, args.tiny)
    key = "python" + ".".join(line["python"].split(".")[:2])
    line["command"] = " ".join(["python", "benchmarks/install_bench.py", *(argv or sys.argv[1:])])
    line["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform()}
    data = json.loads(args.out.read_text()) if args.out.is_file() else {}
    data[key] = line
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"{key}: {line['total_seconds']} s, venv {line['venv_mb']:.0f} MB; downloaded {line['downloaded']['count']} "
          f"packages ({line['downloaded']['mb']:.0f} MB), from disk {line['from_disk']['count']} "
          f"({line['from_disk']['mb']:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
