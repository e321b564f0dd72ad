"""Layering: nothing below ``pipelines`` imports it, ``pipelines`` has no import cycle, and importing the
render API does not start Blender (bpy is imported by render workers only)."""

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
BELOW = ("causal", "render", "training", "evaluation", "benchmarks")


def imported_modules(path: Path) -> set[str]:
    """Absolute module names a source file imports anywhere (top level or inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_imported_modules_sees_nested_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\ndef f():\n    from pipelines.cli import main\n    import pipelines.render\n")
    assert {"os", "pipelines.cli", "pipelines.render"} <= imported_modules(f)


@pytest.mark.parametrize("package", BELOW)
def test_nothing_below_pipelines_imports_it(package):
    offenders = [f"{p.relative_to(ROOT)} imports {m}" for p in sorted((ROOT / package).rglob("*.py"))
                 for m in sorted(imported_modules(p)) if m == "pipelines" or m.startswith("pipelines.")]
    assert not offenders, offenders


def test_pipelines_has_no_import_cycle():
    files = sorted((ROOT / "pipelines").glob("*.py"))
    names = {module_name(p) for p in files}
    graph = nx.DiGraph()
    for p in files:
        graph.add_node(module_name(p))
        for m in imported_modules(p):
            if m in names and m != "pipelines" and m != module_name(p):
                graph.add_edge(module_name(p), m)
    from pipelines.cli import COMMANDS  # the CLI imports its subcommands lazily, by name
    graph.add_edges_from(("pipelines.cli", f"pipelines.{m}") for m in COMMANDS.values())
    assert set(graph.successors("pipelines.cli")) >= {"pipelines.compare", "pipelines.render"}
    assert graph.has_edge("pipelines.compare", "pipelines.cells")  # the walk does see imports
    assert list(nx.simple_cycles(graph)) == []


def test_render_api_and_each_pipelines_module_import_cleanly_without_bpy():
    mods = sorted(module_name(p) for p in (ROOT / "pipelines").glob("*.py"))
    code = (
        "import importlib, sys\n"
        "import render, render.api, render.driver, render.store, render.latents_io\n"
        "assert 'bpy' not in sys.modules, 'importing render imported bpy'\n"
        f"for name in {mods!r}:\n"
        "    for m in [m for m in sys.modules if m.split('.')[0] == 'pipelines']:\n"
        "        del sys.modules[m]\n"
        "    importlib.import_module(name)\n"
        "assert 'bpy' not in sys.modules, 'importing pipelines imported bpy'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
