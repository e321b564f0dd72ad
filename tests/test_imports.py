"""Layering: nothing below ``pipelines`` imports it, no module of the project is in an import cycle (imports inside
functions count), no code lives in ``results/``, and importing the render API does not start Blender (bpy is
imported by render workers only)."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
BELOW = ("causal", "store", "jobs", "render", "ingest", "training", "evaluation", "benchmarks")
PACKAGES = ("causal", "store", "jobs", "render", "ingest", "training", "evaluation", "pipelines")
# what each package may import of the project: itself and the packages before it (docs/architecture.md's layers,
# lowest first; imports only go down this list)
MAY_IMPORT = {p: set(PACKAGES[: i + 1]) for i, p in enumerate(PACKAGES)}


def imported_modules(path: Path) -> set[str]:
    """Absolute module names a source file imports anywhere (top level or inside functions), the project's named by
    their folder (``ident3d.render.api`` -> ``ident3d.render.api``: the folders install under the ``ident3d`` namespace)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {m.removeprefix("ident3d.") for m in out if m != "ident3d"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_imported_modules_sees_nested_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\ndef f():\n    from ident3d.pipelines.cli import main\n    import ident3d.pipelines.render\n")
    assert {"os", "pipelines.cli", "pipelines.render"} <= imported_modules(f)


@pytest.mark.parametrize("package", BELOW)
def test_nothing_below_pipelines_imports_it(package):
    offenders = [f"{p.relative_to(ROOT)} imports {m}" for p in sorted((ROOT / package).rglob("*.py"))
                 for m in sorted(imported_modules(p)) if m == "pipelines" or m.startswith("pipelines.")]
    assert not offenders, offenders


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_imports_only_what_is_below_it(package):
    """Imports only go down the layers (the store below jobs, render, ingestion, training, evaluation, pipelines)."""
    offenders = [f"{p.relative_to(ROOT)} imports {m}" for p in sorted((ROOT / package).rglob("*.py"))
                 for m in sorted(imported_modules(p)) if m.split(".")[0] in PACKAGES
                 and m.split(".")[0] not in MAY_IMPORT[package]]
    assert not offenders, offenders


def import_graph(files: list[Path]) -> nx.DiGraph:
    """Module -> the project modules it imports (``from a.b import c`` counts as a.b.c when that is a module, else
    a.b); a package's own ``__init__`` is left out of its submodules' edges, as a package imports its parts."""
    names = {module_name(p) for p in files}
    graph = nx.DiGraph()
    for p in files:
        me = module_name(p)
        graph.add_node(me)
        for m in imported_modules(p):
            while m and m not in names:
                m = m.rpartition(".")[0]
            if m and m != me and not me.startswith(m + "."):
                graph.add_edge(me, m)
    return graph


def test_no_module_of_the_project_is_in_an_import_cycle():
    graph = import_graph([p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))])
    from ident3d.pipelines.cli import COMMANDS  # the CLI imports its subcommands lazily, by name

    graph.add_edges_from(("pipelines.cli", f"pipelines.{m}") for m in COMMANDS.values())
    assert set(graph.successors("pipelines.cli")) >= {"pipelines.kinds.compare", "pipelines.render"}
    assert graph.has_edge("pipelines.kinds.compare", "pipelines.cells")  # the walk does see imports
    assert graph.has_edge("training.components", "training.synthetic.run")  # and imports inside functions
    assert list(nx.simple_cycles(graph)) == []


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    graph = import_graph(sorted(pkg.glob("*.py")))
    assert list(nx.simple_cycles(graph)) == [["pkg.a", "pkg.b"]] or list(nx.simple_cycles(graph)) == [["pkg.b", "pkg.a"]]


RESULT_FILES = {".md", ".json", ".jsonl", ".csv", ".png", ".txt"}  # tables, records, figures, logs


def test_results_hold_no_code():
    """results/ holds results and the commands that made them (in READMEs), never code: every file, whatever its
    name, is a table, record, figure or log, not executable and not a script (no #! line)."""
    files = [p for p in (ROOT / "results").rglob("*") if p.is_file()]
    assert len(files) > 100
    assert sorted(str(p.relative_to(ROOT)) for p in files if p.suffix not in RESULT_FILES) == []
    assert sorted(str(p.relative_to(ROOT)) for p in files if p.stat().st_mode & 0o111) == []
    assert sorted(str(p.relative_to(ROOT)) for p in files if p.read_bytes()[:2] == b"#!") == []


def test_benchmarks_hold_no_shell_runner_patch_or_absolute_path():
    """A study runs on the engine: no shell runner or patch file under benchmarks/, and no absolute path (of this
    machine or a scratch folder) written into its code."""
    files = [p for p in (ROOT / "benchmarks").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert sorted(str(p.relative_to(ROOT)) for p in files if p.suffix in {".sh", ".diff", ".patch"}) == []
    pattern = re.compile(r"""["'](/tmp|/work|/root|/home|/Users)/""")
    assert sorted(str(p.relative_to(ROOT)) for p in files if p.suffix == ".py" and pattern.search(p.read_text())) == []


def test_render_api_and_each_pipelines_module_import_cleanly_without_bpy():
    mods = sorted("ident3d." + module_name(p) for p in (ROOT / "pipelines").glob("*.py"))
    code = (
        "import importlib, sys\n"
        "import ident3d, ident3d.render, ident3d.render.api, ident3d.render.driver, ident3d.render.worker\n"
        "import ident3d.store.zarr_io\n"
        "import ident3d.render.latents_io\n"
        "assert 'bpy' not in sys.modules, 'importing render imported bpy'\n"
        f"for name in {mods!r}:\n"
        "    for m in [m for m in sys.modules if m.startswith('ident3d.pipelines')]:\n"
        "        del sys.modules[m]\n"
        "    importlib.import_module(name)\n"
        "assert 'bpy' not in sys.modules, 'importing pipelines imported bpy'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr


# imports inside function bodies (issue 43 §4), per package: each one left is there because a measurement says so (a
# command's `--help` or a Dask worker that must not pay for torch, sklearn, zarr or matplotlib; bpy; an import cycle),
# with a trailing comment that says which. A ceiling: lower it when you move one to the top of its module.
FUNCTION_LEVEL_IMPORTS = {"evaluation": 3, "pipelines": 66, "pipelines/kinds": 42}


def function_level_imports(path: Path) -> int:
    """The Import and ImportFrom nodes inside any function body (methods, nested functions and lambdas included) of a
    source file, each counted once however deeply it is nested."""
    tree = ast.parse(path.read_text(), str(path))
    return len({id(node) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))})


def test_function_level_imports_stay_at_or_under_their_ceiling(tmp_path):
    """A real check, not a record: it fails as soon as someone adds a function-level import to evaluation/, pipelines/
    or pipelines/kinds/ (counted apart) without raising FUNCTION_LEVEL_IMPORTS here, so a new one comes with the
    measurement that keeps it (its command's import time with and without it) instead of by habit."""
    sample = tmp_path / "m.py"
    sample.write_text("import os\n\ndef f():\n    import json\n\n    def g():\n        from pathlib import Path\n\n"
                      "class C:\n    def m(self):\n        import re\n        from a import b, c\n")
    assert function_level_imports(sample) == 4  # nested functions and methods too, each import once, not the module's

    def package_of(p: Path) -> str:
        return "pipelines/kinds" if p.parent == ROOT / "pipelines" / "kinds" else p.relative_to(ROOT).parts[0]

    per_file = {p: function_level_imports(p) for package in ("evaluation", "pipelines")
                for p in sorted((ROOT / package).rglob("*.py"))}
    counts = {package: sum(n for p, n in per_file.items() if package_of(p) == package) for package in FUNCTION_LEVEL_IMPORTS}
    over = {package: [f"{p.relative_to(ROOT)}: {n}" for p, n in per_file.items() if package_of(p) == package and n]
            for package, n in counts.items() if n > FUNCTION_LEVEL_IMPORTS[package]}
    assert not over, (counts, over)
