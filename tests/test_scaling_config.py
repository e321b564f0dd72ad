"""``ident3d scaling`` checks its whole config before any work: every point's paths (taken from the config file's
folder), its compare config, its ``paper`` lists against the columns they will be compared with and every folder it
will write; a refusal is one line, exit code 2, and creates or changes nothing. A finished output is not replaced by
another --layer without --overwrite. Tiny configs in tmp_path: every refusal comes before anything renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import run_cli, tree_digest
from test_experiment_kinds import compare_cfg

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("Class, positions: object, positions: spotlight, hues: object, hues: spotlight, hues: background, "
           "rotations: object")


@pytest.fixture(scope="module", autouse=True)
def warm_imports() -> None:
    """Import what checking a config imports (torch, the view makers, the renderer's plan) once, so each test's
    time is its own."""
    from ident3d.pipelines.kinds.compare import check_config

    check_config(compare_cfg("warm"), "warm")


def write_yaml(path: Path, data: object) -> Path:
    """``data`` as YAML at ``path`` (folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def scaling_config(folder: Path, points: list[dict], paper: str = "001", **rows_paper: list) -> Path:
    """A scaling config ``folder/scaling.yaml`` whose points p0, p1 are tiny compare configs in ``folder``;
    ``rows_paper``: {point name: paper list of its row}."""
    for i in range(2):
        cfg = compare_cfg(f"p{i}")
        if f"p{i}" in rows_paper:
            cfg["rows"][0]["paper"] = rows_paper[f"p{i}"]
        write_yaml(folder / f"p{i}.yaml", cfg)
    return write_yaml(folder / "scaling.yaml", {"name": "tiny", "paper": paper, "points": points})


def refused(r, message: str) -> None:
    """One line on stderr, exactly ``ident3d scaling: error: MESSAGE``, exit code 2, no traceback."""
    assert "Traceback" not in r.stderr
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert r.stderr.strip() == f"ident3d scaling: error: {message}"


@pytest.mark.parametrize(("key", "value"), [("config", 5), ("out", 5), ("config", ["p0.yaml"]), ("out", ["p0.yaml"]),
                                          ("config", None), ("out", {"a": 1})])
def test_a_point_path_that_is_not_text_is_one_line(tmp_path, key, value):
    scaling_config(tmp_path, [{"config": "p0.yaml", key: value}])
    r = run_cli("scaling", "--config", "scaling.yaml", "--out", "out", "--no-progress", cwd=tmp_path)
    from ident3d.training.hparams import show

    null = " or null" if key == "out" else ""  # a point's out is optional
    refused(r, f"config scaling.yaml: points[0].{key}: must be text{null}, got {show(value)}")
    assert not (tmp_path / "out").exists()


def test_a_paper_list_of_the_wrong_length_is_refused_before_anything_renders(tmp_path):
    """The second point's paper-000 row has 3 values for the test store's 7 columns: refused before the first
    point's stores render (not after every cell trained, with the point's tables rewritten)."""
    scaling_config(tmp_path, [{"config": "p0.yaml"}, {"config": "p1.yaml", "out": "runs/p1"}], paper="000",
                   p0=[0.5] * 7, p1=[1.0, 0.5, 0.5])
    r = run_cli("scaling", "--config", "scaling.yaml", "--out", "out", "--no-progress", cwd=tmp_path)
    refused(r, f"config scaling.yaml: points[1] (p1): row 'LT: change hues': paper has 3 values but the test store gives 7 "
               f"columns ({COLUMNS}); give one value per column")
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def bad_second_point(tmp: Path, case: str) -> tuple[list[dict], str]:
    """Points whose second one cannot be run (``case``), and the message (after ``config FILE: ``, for a point's
    config), with paths as seen from ``tmp``, where the command runs."""
    from ident3d.pipelines.experiment import claim_output
    from ident3d.pipelines.kinds.compare import Compare

    other = tmp / "other"
    points = [{"config": "p0.yaml"}, {"config": "p1.yaml", "out": "other"}]
    if case == "out is a file":
        other.write_text("mine")
        return points, "points: p1: out other is a file; choose a folder"
    if case == "out holds another compare experiment":
        claim_output(Compare(), other, "someone_else")
        return points, "points: p1: out: other holds the compare experiment 'someone_else', not 'p1'; choose another --out"
    if case == "out holds other files":
        other.mkdir()
        (other / "notes.txt").write_text("mine")
        return points, ("points: p1: out: other is not empty and not an ident3d compare output (it holds notes.txt); "
                        "choose a new or empty folder for --out")
    if case == "out is the first point's":
        return [{"config": "p0.yaml", "out": "other"}, {"config": "p1.yaml", "out": "other/p1"}], \
            "points: p1: out other/p1 overlaps the out of point 'p0' (other); give each point a folder of its own"
    if case == "out inside --out":
        return [{"config": "p0.yaml"}, {"config": "p1.yaml", "out": "out/tables"}], \
            ("points: p1: out out/tables overlaps --out out; give the point a folder outside --out (or no out: it then "
             "gets OUT/points/NAME)")
    if case == "no steps":
        cfg = compare_cfg("p1")
        del cfg["train"]["steps"]
        write_yaml(tmp / "nosteps.yaml", cfg)
        return [{"config": "p0.yaml"}, {"config": "nosteps.yaml"}], \
            ("points[1] (p1): config nosteps.yaml: train.steps must be given (the curves' x axis, pixels seen, is "
             "steps x batch x px^2)")
    if case == "config missing":
        return [{"config": "p0.yaml"}, {"config": "nope.yaml"}], \
            "points[1]: config nope.yaml not found; see configs/da_vs_lt_small.yaml for an example"
    (tmp / "bad.yaml").write_text("rows: [")
    return [{"config": "p0.yaml"}, {"config": "bad.yaml"}], \
        "points[1]: config bad.yaml: not valid YAML (expected the node content, but found '<stream end>')"


CASES = ["out is a file", "out holds another compare experiment", "out holds other files", "out is the first point's",
         "out inside --out", "no steps", "config missing", "config not yaml"]


@pytest.mark.parametrize("case", CASES)
def test_a_bad_second_point_creates_nothing_and_changes_nothing(tmp_path, case):
    """Refused before the first point's stores render or the marker is written: a new --out is not created, and an
    existing scaling output (its marker and curves) is left exactly as it was."""
    from ident3d.pipelines.experiment import claim_output
    from ident3d.pipelines.kinds.scaling import Scaling

    points, tail = bad_second_point(tmp_path, case)
    scaling_config(tmp_path, points)
    message = tail if tail.startswith("points: ") else f"config scaling.yaml: {tail}"
    out = tmp_path / "out"
    r = run_cli("scaling", "--config", "scaling.yaml", "--out", "out", "--no-progress", cwd=tmp_path)
    refused(r, message)
    assert not out.exists() and not (tmp_path / "p0").exists()
    before = {p.name for p in tmp_path.iterdir()}
    claim_output(Scaling(), out, "tiny")
    (out / "curves.json").write_text(json.dumps({"name": "tiny", "paper": "001", "layer": "output"}))
    digest = tree_digest(out)
    refused(run_cli("scaling", "--config", "scaling.yaml", "--out", "out", "--no-progress", cwd=tmp_path), message)
    assert tree_digest(out) == digest and sorted(p.name for p in out.iterdir()) == ["curves.json", "experiment.json"]
    assert {p.name for p in tmp_path.iterdir()} == before | {"out"}


def test_points_are_taken_from_the_config_files_folder(tmp_path, monkeypatch):
    """Relative paths in a scaling config are read from its folder whatever the working folder; absolute ones are
    kept as they are."""
    from ident3d.pipelines.kinds.scaling import load_config

    cfg = scaling_config(tmp_path / "cfgs", [{"config": "p0.yaml", "out": "../runs/p0"},
                                             {"config": str(tmp_path / "cfgs" / "p1.yaml"), "out": str(tmp_path / "x")}])
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    points = load_config(cfg).points
    assert [(p.name, p.config, p.out) for p in points] == [
        ("p0", tmp_path / "cfgs/p0.yaml", tmp_path / "runs/p0"), ("p1", tmp_path / "cfgs/p1.yaml", tmp_path / "x")]
    points = load_config("../cfgs/scaling.yaml").points  # a relative --config: its folder is relative too
    assert points[0].config == tmp_path / "cfgs/p0.yaml" and points[0].out == tmp_path / "runs/p0"


@pytest.mark.parametrize("name", ["paper000", "paper001"])
def test_the_shipped_scaling_configs_resolve_to_the_same_files_from_anywhere(tmp_path, monkeypatch, name):
    """From the repository root the shipped configs' points are the files their committed curves name; from another
    folder they are the same files."""
    from ident3d.pipelines.kinds.scaling import load_config, shown

    committed = json.loads((ROOT / f"results/scaling/{name}/curves.json").read_text())[name]["points"]
    monkeypatch.chdir(tmp_path)
    points = load_config(ROOT / f"configs/scaling/{name}.yaml").points
    assert [(p.config, p.out) for p in points] == [(ROOT / c["config"], ROOT / c["run"]) for c in committed]
    monkeypatch.chdir(ROOT)
    points = load_config(f"configs/scaling/{name}.yaml").points
    assert [(shown(p.config), shown(p.out)) for p in points] == [(c["config"], c["run"]) for c in committed]


def finished(out: Path, layer: str | None, point_out: Path | None = None) -> None:
    """A finished scaling output of the experiment 'tiny' made with ``layer`` (None: before the layer was
    recorded, i.e. the output layer), its point p0's compare output made with the same layer."""
    from ident3d.pipelines.experiment import claim_output
    from ident3d.pipelines.kinds.compare import Compare
    from ident3d.pipelines.kinds.scaling import Scaling

    claim_output(Scaling(), out, "tiny")
    curves = {"name": "tiny", "paper": "001", **({"layer": layer} if layer else {})}
    (out / "curves.json").write_text(json.dumps(curves))
    point = point_out or out / "points/p0"
    claim_output(Compare(), point, "p0")
    (point / "table.json").write_text(json.dumps({"layer": layer or "output", "columns": [], "table": {}}))


@pytest.mark.parametrize("made", ["output", None, "point's own out"])
def test_another_layer_never_replaces_a_finished_output_without_overwrite(tmp_path, made):
    out = tmp_path / "out"
    own = tmp_path / "runs/p0" if made == "point's own out" else None
    finished(out, "output" if made == "point's own out" else made, own)
    cfg = scaling_config(tmp_path, [{"config": "p0.yaml", **({"out": "runs/p0"} if own else {})}])
    if own:
        (out / "curves.json").unlink()  # only the point's tables are finished
    digests = tree_digest(tmp_path)
    r = run_cli("scaling", "--config", cfg.name, "--out", "out", "--layer", "inner", "--no-progress", cwd=tmp_path)
    where, fix = ("runs/p0", "give the point another out in the config") if own else ("out", "use another --out")
    refused(r, f"{where} holds finished tables of the output layer; pass --overwrite to replace them with the inner "
               f"layer's, or {fix}")
    assert tree_digest(tmp_path) == digests


def test_compare_refuses_another_layer_on_a_finished_output_without_overwrite(tmp_path):
    """The same rule for `ident3d compare` itself: --layer inner on a finished output replaced its tables."""
    from ident3d.pipelines.experiment import claim_output
    from ident3d.pipelines.kinds.compare import Compare

    claim_output(Compare(), tmp_path / "out", "tiny")
    (tmp_path / "out/table.json").write_text(json.dumps({"layer": "output", "columns": [], "table": {}}))
    digests = tree_digest(tmp_path)
    r = run_cli("compare", "--config", ROOT / "configs/da_vs_lt_small.yaml", "--out", tmp_path / "out", "--layer",
                "inner", "--no-progress")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{tmp_path / 'out'} holds finished tables of the output layer; pass --overwrite to replace them" in r.stderr
    assert tree_digest(tmp_path) == digests
