"""The objectives' folder holds registered objectives only (issue 43 §4): every module of ``training/objectives/``
registers an objective, what they share and registers nothing lives beside it (``training/objective_parts/``:
bases and parts; ``training/losses/``: loss functions), and ``training.objectives`` and ``training.temporal`` do not
import each other both ways (the temporal learners take what they share with the VAEs from below both)."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
TRAINING = ROOT / "training"
SHARED = ("objective_parts", "losses")  # beside objectives/, registering nothing
GROUPS = ("objectives", "temporal", *SHARED)  # the folders whose imports are checked as wholes


def registers_an_objective(path: Path) -> bool:
    """Whether a module's source registers an objective: ``OBJECTIVES.register(...)``, as a decorator or a call."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register"
               and isinstance(node.func.value, ast.Name) and node.func.value.id == "OBJECTIVES"
               for node in ast.walk(ast.parse(path.read_text(), str(path))))


def modules_of(folder: Path) -> list[Path]:
    """A package folder's modules, its ``__init__`` left out."""
    return sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")


def imported(path: Path) -> set[str]:
    """Absolute module names a source file imports anywhere (top level or inside functions), ``ident3d.`` removed."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.update({node.module} | {f"{node.module}.{alias.name}" for alias in node.names})
    return {m.removeprefix("ident3d.") for m in out}


def group_graph(training: Path) -> nx.DiGraph:
    """training's import graph with each folder of GROUPS one node (``training.objectives`` for any module in it) and
    every other module its own; a folder's imports of itself are left out."""

    def node(name: str) -> str:
        parts = name.split(".")
        return ".".join(parts[:2]) if len(parts) > 1 and parts[1] in GROUPS else name

    files = {".".join(("training", *p.relative_to(training).with_suffix("").parts)).removesuffix(".__init__"): p
             for p in sorted(training.rglob("*.py"))}
    graph = nx.DiGraph()
    for me, p in files.items():
        graph.add_node(node(me))
        for m in imported(p):
            while m and m not in files:
                m = m.rpartition(".")[0]
            if m and node(m) != node(me) and not me.startswith(m + "."):
                graph.add_edge(node(me), node(m))
    return graph


def test_every_module_of_the_objectives_folder_registers_an_objective():
    """Read from the source: a module there that registers nothing (a base class, a loss function) belongs beside it."""
    modules = modules_of(TRAINING / "objectives")
    assert len(modules) >= 17
    assert [p.name for p in modules if not registers_an_objective(p)] == []


def test_every_module_of_the_objectives_package_is_the_home_of_a_registered_objective():
    """Read from the registry: importing the package registers at least one objective defined in each of its modules,
    and every objective of ident3d's own is defined in one of them."""
    import ident3d.training.objectives as objectives
    from ident3d.training.registry import OBJECTIVES

    homes = {cls.__module__ for cls in OBJECTIVES.values()}
    modules = {f"{objectives.__name__}.{m.name}" for m in pkgutil.iter_modules(objectives.__path__)}
    assert sorted(modules - homes) == []
    ours = {h for h in homes if h.startswith("ident3d.")}
    assert sorted(h for h in ours if h.rpartition(".")[0] != objectives.__name__) == []


def test_the_shared_folders_register_nothing():
    """The bases, parts and loss functions beside the objectives register none (else they belong in objectives/)."""
    modules = [p for folder in SHARED for p in modules_of(TRAINING / folder)]
    assert {"base.py", "generative.py", "gaussian.py", "functional.py"} <= {p.name for p in modules}
    assert [str(p.relative_to(ROOT)) for p in modules if registers_an_objective(p)] == []


def test_the_promised_bases_are_importable_from_the_objectives_package():
    """docs/extending.md names ``Objective`` and ``MomentumObjective`` under ``ident3d.training.objectives``."""
    from ident3d.training.objective_parts.base import Objective
    from ident3d.training.objective_parts.momentum import MomentumObjective
    from ident3d.training.objectives import MomentumObjective as M
    from ident3d.training.objectives import Objective as O

    assert (O, M) == (Objective, MomentumObjective)


def test_objectives_and_temporal_do_not_import_each_other_both_ways():
    """No cycle among objectives/, temporal/ and the shared folders (imports inside functions count): objectives/
    builds the temporal learners, and temporal/ takes what it shares with the VAEs from objective_parts/ and
    losses/."""
    graph = group_graph(TRAINING)
    assert graph.has_edge("training.objectives", "training.temporal")  # citris_vae, ivae_temporal build the learners
    assert graph.has_edge("training.temporal", "training.objective_parts")  # the VAEs' GenerativeObjective
    assert not graph.has_edge("training.temporal", "training.objectives")
    assert list(nx.simple_cycles(graph)) == []  # nor any other cycle of training's modules through these folders


def test_the_folder_graph_sees_a_two_way_import_through_a_function(tmp_path):
    """The check above finds a two-way import between two folders made through an import inside a function."""
    for folder, text in (("objectives", "def f():\n    from ident3d.training.temporal.m import g\n"),
                         ("temporal", "from ident3d.training.objectives.a import f\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
        (tmp_path / folder / ("a.py" if folder == "objectives" else "m.py")).write_text(text)
    graph = group_graph(tmp_path)
    assert sorted(map(sorted, nx.simple_cycles(graph))) == [["training.objectives", "training.temporal"]]


def test_registers_an_objective_reads_decorators_and_calls(tmp_path):
    cases = {"deco.py": '@OBJECTIVES.register("a")\nclass A:\n    pass\n',
             "call.py": 'class A:\n    pass\n\n\nOBJECTIVES.register("a")(A)\n',
             "none.py": 'class A:\n    """OBJECTIVES.register is named, never called."""\n\n\nVIEWS.register("a")(A)\n'}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    assert {n: registers_an_objective(tmp_path / n) for n in cases} == {"deco.py": True, "call.py": True,
                                                                         "none.py": False}
