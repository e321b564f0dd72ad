"""Report columns and content/style marks follow the store (its latent names, groups, change sets and
views), not Causal3DIdent's names: unit tests on attrs dicts and synthetic reports (fast), and one
tiny render -> train -> evaluate run of a custom scene whose latents have other names."""

import csv
import json
import math

import pytest
import yaml
from helpers import read_png, run_cli

from ident3d.causal import load_scm
from ident3d.causal.errors import UserError
from ident3d.evaluation.report import (
    PAPER_COLUMNS,
    columns,
    is_paper_layout,
    marks,
    resolve_style,
    titles,
)
from ident3d.pipelines.cli import main
from ident3d.pipelines.kinds import compare

# a custom scene: a ball (place, tint), a floor (tint) and a lamp whose angle is in no group
NAMES = ["ball_x", "ball_y", "lamp_angle", "ball_hue", "floor_hue"]
GROUPS = {"place": ["ball_x", "ball_y"], "tint": ["ball_hue", "floor_hue"]}
CUSTOM_TITLES = ["place: ball", "lamp_angle", "tint: ball", "tint: floor"]
# scene bindings of render/scenes/3dident.yaml renamed to the custom latents (targets kept)
RENAME = {"pos_x": "ball_x", "pos_y": "ball_y", "spot_angle": "lamp_angle", "obj_hue": "ball_hue",
          "bg_hue": "floor_hue"}


def custom_spec(change_sets: dict | None = None) -> dict:
    """A 3dident-like SCM (independent uniform latents) with the custom names and groups."""
    group_of = {n: g for g, ms in GROUPS.items() for n in ms}
    nodes = [{"name": n, "range": [-1, 1], "mechanism": {"type": "uniform"}} | (
        {"group": group_of[n]} if n in group_of else {}) for n in NAMES]
    return {"name": "toy", "nodes": nodes, "transform": {"sigma": 1.0},
            "change_sets": change_sets or {"place": ["place"], "tint": ["tint"]}}


# ----- columns -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,expected", [("causal3dident", list(PAPER_COLUMNS)), ("3dident", list(PAPER_COLUMNS[1:]))])
def test_builtin_stores_keep_the_paper_columns(name, expected):
    scm = load_scm(name)
    for groups in (scm.groups, dict(sorted(scm.groups.items()))):  # attrs may come back with sorted keys
        cols = columns(scm.names, groups)
        assert titles(cols, scm.class_node is not None) == expected
        assert is_paper_layout(titles(cols, True))
    by_title = {c.title: c.latents for c in cols}
    assert by_title["positions: object"] == ("pos_x", "pos_y", "pos_z")
    assert by_title["positions: spotlight"] == ("spot_angle",)
    assert by_title["rotations: object"] == ("rot_alpha", "rot_beta", "rot_gamma")
    assert by_title["hues: background"] == ("bg_hue",)


def test_custom_columns_come_from_the_store_groups_and_names():
    cols = columns(NAMES, GROUPS)
    assert [c.title for c in cols] == CUSTOM_TITLES  # store order; the ungrouped latent is its own column
    assert {c.title: c.latents for c in cols} == {"place: ball": ("ball_x", "ball_y"), "lamp_angle": ("lamp_angle",),
                                                  "tint: ball": ("ball_hue",), "tint: floor": ("floor_hue",)}
    assert not set(PAPER_COLUMNS) & {c.title for c in cols} and not is_paper_layout(titles(cols, True))
    # a label for a prefix, when given, replaces the prefix in the title
    assert [c.title for c in columns(NAMES, GROUPS, labels={"ball": "sphere"})][0] == "place: sphere"
    # paper labels only for 3DIdent-family names: a pos_ latent among custom ones keeps its prefix
    assert [c.title for c in columns(["pos_x", "ball_hue"], {"where": ["pos_x"]})] == ["where: pos", "ball_hue"]


def test_group_members_that_are_not_latents_are_ignored():
    cols = columns(NAMES, {**GROUPS, "class": ["class"], "empty": []})
    assert [c.title for c in cols] == CUSTOM_TITLES


# ----- content / style -----------------------------------------------------------------------------

def test_lt_views_mark_their_change_set_as_style():
    cols, spec = columns(NAMES, GROUPS), custom_spec()
    exact = resolve_style("lt_exact:tint", spec, {"tint": ["ball_hue", "floor_hue"]})
    assert exact.latents == {"ball_hue", "floor_hue"} and not exact.unmapped
    assert marks(cols, exact.latents) == {"place: ball": "C", "lamp_angle": "C", "tint: ball": "S", "tint: floor": "S"}
    nn = resolve_style("lt_nn:place+lamp_angle", spec, {})
    assert marks(cols, nn.latents) == {"place: ball": "S", "lamp_angle": "S", "tint: ball": "C", "tint: floor": "C"}
    assert marks(cols, {"ball_x"})["place: ball"] == "C/S"  # a column only partly changed


def test_da_recipes_resolve_through_the_scm_or_map_to_nothing():
    spec = custom_spec()
    st = resolve_style("crop_large+colour", spec, {})  # no positions/hues here: both recipes change nothing
    assert st.latents == set() and st.unmapped == ["crop_large", "colour"]
    assert set(marks(columns(NAMES, GROUPS), st.latents).values()) == {"C"}
    # a change set named like the default target maps the recipe through it
    st = resolve_style("colour", custom_spec({"hues": ["tint"], "place": ["place"]}), {})
    assert st.latents == {"ball_hue", "floor_hue"} and st.da_map == {"colour": ["ball_hue", "floor_hue"]}
    # an explicit da_style overrides the default (groups, change sets or nodes)
    st = resolve_style("crop_small+colour", spec, {}, da_style={"colour": ["tint"], "crop_small": "place+lamp_angle"})
    assert st.latents == {"ball_hue", "floor_hue", "ball_x", "ball_y", "lamp_angle"} and st.unmapped == []
    # the built-in mapping is unchanged for Causal3DIdent
    c3d = load_scm("causal3dident").spec
    assert resolve_style("rotation+colour", c3d, {}).latents == {"rot_alpha", "rot_beta", "rot_gamma", "obj_hue",
                                                                 "spot_hue", "bg_hue"}


@pytest.mark.parametrize("da_style,expected", [
    ({"colour": ["nope"]}, "da_style colour: change: unknown node, group or change set 'nope'"),
    ({"blur": ["tint"]}, "unknown DA recipe 'blur'"),
    ({"colour": [3]}, "give a name or a list of names"),
    (["colour"], "da_style must map a DA recipe"),
])
def test_bad_da_style_is_a_user_error(da_style, expected):
    with pytest.raises(UserError, match=expected.replace("(", r"\(")):
        resolve_style("colour", custom_spec(), {}, da_style=da_style)


def test_default_da_mapping_covers_every_da_recipe():
    from ident3d.training.views.augment import DA_RECIPES

    assert DA_RECIPES and all(r.targets for r in DA_RECIPES.values())  # each registered with what it changes


def test_compare_config_checks_da_style():
    cfg = yaml.safe_load(open("configs/da_vs_lt_small.yaml"))
    assert compare.check_config({**cfg, "da_style": {"colour": ["hues"]}}, "x").da_style == {"colour": ["hues"]}
    with pytest.raises(UserError, match="unknown DA recipe 'blur'"):
        compare.check_config({**cfg, "da_style": {"blur": "hues"}}, "x")


# ----- compare tables with custom columns ------------------------------------------------------------

def _report(values: dict) -> dict:
    return {"columns": list(values), "layers": {"output": {"table": values}}}


def _grid(cols: list[str], paper: list[float] | None = None) -> tuple[compare.CompareConfig, dict]:
    from ident3d.pipelines.store_specs import ImageStore

    store = ImageStore(n=64, resolution=16, samples=1)
    cfg = compare.CompareConfig(stores={"train": store, "test": store}, train={}, name="toy", seeds=(0, 1), rows=(
        compare.Row("LT: tint", "lt_exact:tint", paper=paper), compare.Row("DA: colour", "colour")))
    reports = {("LT: tint", s): _report({c: 0.1 * (j + 1) + 0.2 * s for j, c in enumerate(cols)}) for s in (0, 1)}
    reports |= {("DA: colour", s): _report({c: 0.9 for c in cols}) for s in (0, 1)}
    return cfg, reports


def test_compare_tables_use_the_reports_columns(tmp_path):
    cfg, reports = _grid(CUSTOM_TITLES)
    results = compare.aggregate(cfg, reports, "output")
    table = results.means()
    assert list(table) == ["LT: tint", "DA: colour"] and list(table["LT: tint"]) == CUSTOM_TITLES
    mean, std = table["LT: tint"]["tint: ball"]  # seeds give 0.3 and 0.5
    assert mean == pytest.approx(0.4) and std == pytest.approx(0.1)
    md = compare.markdown_table(results)
    assert md.splitlines()[0] == "| views generated by | " + " | ".join(CUSTOM_TITLES) + " |"
    assert "**0.90 ± 0.00**" in md and not any(t in md for t in PAPER_COLUMNS[1:])
    compare.write_csv(results, tmp_path / "t.csv")
    rows = list(csv.reader((tmp_path / "t.csv").open()))
    assert rows[0][:4] == ["row", "place: ball mean", "place: ball std", "place: ball n"] and len(rows[0]) == 1 + 3 * 4
    assert rows[1][0] == "LT: tint" and float(rows[1][7]) == pytest.approx(0.4) and rows[1][9] == "2"
    assert "No side-by-side with paper 000" in compare.side_by_side(cfg, table)
    compare.heatmap(results, tmp_path / "t.png", "toy")
    h, w, colours = read_png(tmp_path / "t.png")
    assert h > 100 and w > 300 and colours > 20


def test_compare_side_by_side_only_for_the_paper_layout():
    cfg, reports = _grid(list(PAPER_COLUMNS), paper=[1.0, 0.59, 0.91, 0.3, 0.0, 0.0, 0.3])
    text = compare.side_by_side(cfg, compare.aggregate(cfg, reports, "output").means())
    assert text.splitlines()[0] == "| views generated by | " + " | ".join(PAPER_COLUMNS) + " |"
    assert "| LT: tint | 0.20 / 1.00 | 0.30 / 0.59 |" in text and "| DA: colour | 0.90 / nan |" in text


def test_compare_refuses_cells_with_other_columns_and_reads_old_reports():
    cfg, reports = _grid(CUSTOM_TITLES)
    old = {k: {"layers": v["layers"]} for k, v in reports.items()}  # reports written before "columns" existed
    assert list(compare.aggregate(cfg, old, "output").means()["DA: colour"]) == CUSTOM_TITLES
    reports[("DA: colour", 1)] = _report({"place: ball": 0.5})
    with pytest.raises(UserError, match="cell 'DA: colour' seed 1 has columns"):
        compare.aggregate(cfg, reports, "output")


# ----- end to end on a tiny custom store -------------------------------------------------------------

def _write_custom_scene(tmp_path) -> tuple[str, str]:
    """The scene of render/scenes/3dident.yaml with its latent bindings renamed, and the custom SCM."""
    scene = yaml.safe_load(open("render/scenes/3dident.yaml"))
    scene["latents"] = [b | {"name": RENAME[b["name"]]} for b in scene["latents"] if b["name"] in RENAME]
    assert len(scene["latents"]) == len(NAMES)
    (tmp_path / "scene.yaml").write_text(yaml.safe_dump(scene))
    (tmp_path / "scm.yaml").write_text(yaml.safe_dump(custom_spec()))
    return str(tmp_path / "scene.yaml"), str(tmp_path / "scm.yaml")


def test_custom_store_report_end_to_end(tmp_path, capsys):
    scene, scm = _write_custom_scene(tmp_path)
    store, run = str(tmp_path / "toy.zarr"), str(tmp_path / "run")
    assert main(["render", "--scene", scene, "--scm", scm, "--n", "64", "--out", store, "--views", "tint:tint",
                 "--resolution", "32", "--samples", "4", "--chunk-size", "32", "--workers", "2", "--no-progress"]) == 0
    assert main(["train", "--data", store, "--out", run, "--encoder", "cnn", "--objective", "infonce",
                 "--views", "lt_exact:tint", "--steps", "20", "--batch-size", "32", "--lr", "1e-3",
                 "--no-progress"]) == 0
    capsys.readouterr()
    out = tmp_path / "report.json"
    assert main(["evaluate", "--run", run, "--data", store, "--no-kernel", "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["columns"] == CUSTOM_TITLES and rep["style_latents"] == ["ball_hue", "floor_hue"]
    assert rep["column_latents"]["place: ball"] == ["ball_x", "ball_y"]
    assert rep["column_marks"] == {"place: ball": "C", "lamp_angle": "C", "tint: ball": "S", "tint: floor": "S"}
    for layer in ("output", "inner"):
        row = rep["layers"][layer]["table"]
        assert list(row) == CUSTOM_TITLES and set(rep["layers"][layer]["r2_linear"]) == set(NAMES)
        if layer == "output":
            assert all(math.isfinite(v) and v <= 1 for v in row.values()), row
        else:  # 21 fit rows for 100 dimensions: a linear fit would interpolate, so no R^2, and the report says why
            assert all(math.isnan(v) for v in row.values()), row
            assert "(at least 102 for 100 code dimensions), got 21" in rep["layers"][layer]["r2_undefined"]["linear"]["ball_x"]
    printed = capsys.readouterr().out
    assert "tint: floor (S)" in printed and "place: ball (C)" in printed and "lamp_angle (C)" in printed
    assert not any(t in printed for t in PAPER_COLUMNS[1:])


@pytest.mark.parametrize("arg,expected", [("colour", "use RECIPE=NAMES"), ("blur=tint", "unknown DA recipe 'blur'")])
def test_evaluate_bad_da_style_exits_2(tmp_path, arg, expected):
    r = run_cli("evaluate", "--run", tmp_path, "--data", tmp_path / "none.zarr", "--da-style", arg)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and expected in r.stderr, r.stderr
