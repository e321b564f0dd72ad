"""docs/extending.md is true: an objective, a view maker and a metric added exactly as it says work through
``ident3d train`` and ``ident3d evaluate``, and a file dropped into the objectives' or the view makers' folder is
registered with no other edit.

The parts are the page's own code: its blocks marked "part of my_parts.py" are written to ``my_parts.py`` and
imported by this module's fixture (registering them, as the page's own module would), then unregistered when the
module's tests end, so no other test sees them. The page's entry point ``my_ident3d.py`` runs as a script, in this
process."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import runpy
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from helpers import run_cli
from test_docs_examples import parse_doc

from ident3d.evaluation.metric_suite import METRICS
from ident3d.training.objectives import OBJECTIVES
from ident3d.training.registry import VIEWS, Registry
from ident3d.training.views import Normalize, make_view_maker

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"
PART = "part of my_parts.py"
ENTRY = "my_ident3d.py, an entry point"


def page_code(reason: str) -> str:
    """The page's python blocks whose ``not run`` reason starts with ``reason``, joined in page order."""
    blocks = [b.text for b in parse_doc(PAGE) if b.lang == "python" and (b.skip or "").startswith(reason)]
    assert blocks, f"docs/extending.md has no python block marked '{reason}'"
    return "\n\n".join(blocks)


@pytest.fixture(scope="module")
def my_parts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The page's ``my_parts.py``, imported (its parts registered) for this module's tests only."""
    path = tmp_path_factory.mktemp("parts") / "my_parts.py"
    path.write_text(page_code(PART))
    spec = importlib.util.spec_from_file_location("my_parts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    OBJECTIVES.unregister("align_uniform")
    VIEWS.unregister("mirror")
    METRICS.unregister("max_corr")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """48 3DIdent images at 16 px: enough for a few training steps and an evaluation (16 fit, 32 scored)."""
    from ident3d import render_store

    out = str(tmp_path_factory.mktemp("store") / "3di.zarr")
    assert render_store(out, scene="3dident", n=48, settings={"resolution": 16, "samples": 1}, chunk_size=24,
                        progress=False).ok
    return out


@pytest.fixture(scope="module")
def run(my_parts: ModuleType, store: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run trained by ``ident3d train`` with the page's objective and view maker (as its bash block says)."""
    out = tmp_path_factory.mktemp("run") / "mine"
    result = run_cli("train", "--data", store, "--objective", "align_uniform", "--hp", "t=3", "--views", "mirror",
                     "--out", out, "--encoder", "cnn", "--steps", "3", "--batch-size", "16", "--no-progress")
    assert result.returncode == 0, result.stderr
    return out


def test_the_objective_trains_through_ident3d_train(run: Path) -> None:
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["objective"] == "align_uniform" and cfg["views"] == "mirror" and cfg["objective_args"] == {"t": 3.0}
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 3
    # the logged loss is the page's formula: alignment (in [0, 4]) plus a log mean potential (<= 0)
    assert all(0 <= r["alignment"] <= 4 and np.isfinite(r["loss"]) and r["loss"] <= r["alignment"] for r in rows)
    from ident3d.training.run_dir import RunDir

    assert type(RunDir(run).load().objective(image_size=16)).__name__ == "AlignUniform"


def test_the_objectives_declared_hyperparameter_is_checked_and_listed(my_parts: ModuleType, store: str,
                                                                       tmp_path: Path) -> None:
    result = run_cli("train", "--data", store, "--objective", "align_uniform", "--hp", "t=0", "--views", "mirror",
                     "--out", tmp_path / "bad")
    assert result.returncode == 2
    assert "align_uniform's hyperparameter t must be a finite number > 0, got 0" in result.stderr
    assert not (tmp_path / "bad").exists()
    listed = run_cli("train", "--list").stdout
    assert "Alignment plus uniformity of the normalised embeddings" in listed and "mirror" in listed


def test_the_view_maker_makes_its_views(my_parts: ModuleType) -> None:
    images = torch.randint(0, 256, (4, 8, 8, 3), dtype=torch.uint8)
    norm = Normalize((0.5, 0.4, 0.3), (0.2, 0.2, 0.2))
    first, second = make_view_maker("mirror", norm)({"images": images})
    expected = (images.permute(0, 3, 1, 2).float() / 255 - torch.tensor([0.5, 0.4, 0.3]).view(1, 3, 1, 1)) / 0.2
    assert torch.allclose(first, expected) and torch.equal(second, first.flip(-1))
    assert not torch.equal(second, first)  # random images are not symmetric: the second view differs


def test_the_metric_and_the_view_makers_style_show_in_the_evaluate_report(run: Path, store: str,
                                                                          tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    result = run_cli("evaluate", "--run", run, "--data", store, "--metrics", "max_corr", "--no-kernel",
                     "--out", report_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(report_path.read_text())
    numbers = report["metrics"]["max_corr"]
    assert numbers["n_score"] == report["n_score"] == 32 and 0 < numbers["max_corr"] <= 1
    assert "max_corr (output layer): max_corr " in result.stdout
    # the report asked the view maker: its `changes` (positions) are style, the rest content
    assert report["style_latents"] == ["pos_x", "pos_y", "pos_z", "spot_angle"]
    assert {c: m for c, m in report["column_marks"].items() if m == "S"} == {
        c: "S" for c in report["column_marks"] if c.startswith("positions")}
    unknown = run_cli("evaluate", "--run", run, "--data", store, "--metrics", "max_corr_unregistered")
    assert unknown.returncode == 2 and "unknown metric 'max_corr_unregistered'" in unknown.stderr


def test_the_entry_point_runs_the_command_line_with_the_parts(my_parts: ModuleType, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's ``my_ident3d.py`` (importing the my_parts.py above) runs ``train --list`` with the new parts."""
    script = tmp_path / "my_ident3d.py"
    script.write_text(page_code(ENTRY))
    monkeypatch.setitem(sys.modules, "my_parts", my_parts)
    monkeypatch.setattr(sys, "argv", [str(script), "train", "--list"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(script), run_name="__main__")
    assert exit_.value.code == 0
    assert "align_uniform" in out.getvalue() and "mirror" in out.getvalue()


# a file dropped into a package's folder, as the page says (each registered by its own decorator)
DROPPED = {"ident3d.training.objectives": '''
from ident3d.training.objective_parts.base import Objective
from ident3d.training.registry import OBJECTIVES


@OBJECTIVES.register("dropped_in")
class DroppedIn(Objective):
    """An objective in its own file of the folder."""
''', "ident3d.training.views": '''
from ident3d.training.registry import VIEWS, Registry
from ident3d.training.views.base import ViewMaker


@VIEWS.register("dropped_in")
class DroppedIn(ViewMaker):
    """A view maker in its own file of the folder."""

    changes = ()
'''}


@contextlib.contextmanager
def imported_with_extra_folder(package: str, folder: Path) -> Iterator[ModuleType]:
    """``package`` imported anew with ``folder`` as a second folder of its ``__path__`` (its own folder untouched):
    what importing it does when a file is added to its folder. The original module is back afterwards."""
    original = sys.modules[package]
    spec = importlib.util.spec_from_file_location(package, original.__file__,
                                                  submodule_search_locations=[*original.__path__, str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules[package] = original
        sys.modules.pop(f"{package}.dropped_in", None)


@pytest.mark.parametrize(("package", "registry"), [("ident3d.training.objectives", OBJECTIVES),
                                                   ("ident3d.training.views", VIEWS)], ids=["objectives", "views"])
def test_one_file_in_the_objectives_or_views_folder_is_registered(package: str, registry: Registry,
                                                                  tmp_path: Path) -> None:
    """The "one file" claim: the package imports every module of its folder, so a new file needs no other edit."""
    (tmp_path / "dropped_in.py").write_text(textwrap.dedent(DROPPED[package]))
    assert "dropped_in" not in registry.names()
    try:
        with imported_with_extra_folder(package, tmp_path):
            assert registry.get("dropped_in").__module__ == f"{package}.dropped_in"
    finally:
        if "dropped_in" in registry.names():
            registry.unregister("dropped_in")
