"""One namespace: the repository's folders install as ``ident3d.causal``, ``ident3d.render``, ... and nothing else is
installed at the top level (a wheel built from the repository holds only ``ident3d``); outside the repository
``import render`` fails and ``import ident3d`` works; the build's package list is the tree's every package."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("causal", "store", "jobs", "render", "ingest", "training", "evaluation", "pipelines")


def test_the_build_lists_every_package_of_the_tree_under_ident3d():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    tree = {"ident3d"} | {"ident3d." + ".".join(p.parent.relative_to(ROOT).parts)
                          for folder in FOLDERS for p in (ROOT / folder).rglob("__init__.py")}
    assert set(tool["packages"]) == tree
    assert tool["package-dir"] == {"ident3d": "ident3d", **{f"ident3d.{f}": f for f in FOLDERS}}


def test_a_wheel_holds_only_the_ident3d_package(tmp_path):
    src = tmp_path / "src"  # a copy of what the build reads: setuptools writes its build/ folder into the source
    for name in (*FOLDERS, "ident3d"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(tmp_path), str(src)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    [wheel] = tmp_path.glob("ident3d-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"ident3d", wheel.name.split("-py3")[0] + ".dist-info"}
    for member in ("ident3d/__init__.py", "ident3d/render/api.py", "ident3d/training/objectives/infonce.py",
                   "ident3d/causal/specs/causal3dident.yaml", "ident3d/render/scenes/3dident.yaml"):
        assert member in names, member
    entry = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "ident3d = ident3d.pipelines.cli:main" in entry


def test_only_ident3d_imports_outside_the_repository(tmp_path):
    code = ("import importlib.util as u, ident3d, ident3d.render as r\n"
            "assert [m for m in ('render', 'causal', 'training', 'evaluation', 'pipelines', 'store', 'ingest', 'jobs')\n"
            "        if u.find_spec(m) is not None] == [], 'a generic top-level package is importable'\n"
            "print(ident3d.__version__, r.render_store is ident3d.render_store)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.split()[1] == "True", r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-c", "import render"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and "No module named 'render'" in r.stderr


def test_a_checkout_imports_its_packages_through_the_editable_install_and_nothing_else(tmp_path):
    """``ident3d/__init__.py`` adds nothing to its ``__path__`` (issue 43 §4): each package comes from its folder
    through the editable install's mapping, from the checkout's root (where ``ident3d/`` itself is first on
    sys.path) as from elsewhere, and the checkout's other folders are no packages: ``import ident3d.benchmarks``,
    ``ident3d.tests`` and ``ident3d.ident3d`` fail."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = tool["package-dir"]
    want = {}
    for name in tool["packages"]:
        top = max((d for d in dirs if name == d or name.startswith(d + ".")), key=len)
        want[name] = str(ROOT.joinpath(dirs[top], *name[len(top):].split(".")[1:], "__init__.py"))
    code = ("import importlib.util as u, json, sys, ident3d\n"
            "print(json.dumps([ident3d.__path__, {n: u.find_spec(n).origin for n in sys.argv[1:]}]))\n")
    for cwd in (ROOT, tmp_path):
        r = subprocess.run([sys.executable, "-c", code, *want], capture_output=True, text=True, cwd=cwd)
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads(r.stdout) == [[str(ROOT / "ident3d")], want], cwd
        for name in ("ident3d.benchmarks", "ident3d.tests", "ident3d.ident3d"):
            r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, cwd=cwd)
            assert r.returncode == 1 and f"ModuleNotFoundError: No module named '{name}'" in r.stderr, (cwd, r.stderr)


def test_a_strict_editable_install_is_a_tree_of_links_an_editor_reads(tmp_path):
    """docs/install.md's editable install for editors that cannot run the default one's import hook (pyright,
    Pylance): ``--config-settings editable_mode=strict`` puts a plain folder on a .pth path, a tree of links to the
    checkout's files laid out as the installed ``ident3d`` package, with only the packages in it."""
    src = tmp_path / "src"
    for name in (*FOLDERS, "ident3d"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q", "-e",
                        str(src), "--config-settings", "editable_mode=strict", "--target", str(target)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    [pth] = target.glob("*.pth")
    [tree] = [Path(line) for line in pth.read_text().splitlines() if line.strip()]  # a folder, no import hook
    package = tree / "ident3d"
    for member, origin in (("__init__.py", "ident3d/__init__.py"), ("render/api.py", "render/api.py"),
                           ("training/objectives/infonce.py", "training/objectives/infonce.py"),
                           ("render/scenes/causal3dident.yaml", "render/scenes/causal3dident.yaml")):
        assert (package / member).resolve() == (src / origin).resolve(), member
    assert sorted(p.name for p in tree.iterdir()) == ["ident3d"]
    assert {p.name for p in package.iterdir() if p.is_dir()} == set(FOLDERS)
