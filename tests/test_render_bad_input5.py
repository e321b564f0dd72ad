"""Issue 42, the render side of bad input round 5: the Python API's own render inputs get the CLI's one-line
UserError (item a); every render setting is checked by type and range, and ``out`` must be a path (b); what
``ident3d sample`` writes for a multi-object SCM, ``render --latents`` reads (c); given latents must keep the SCM's
support and the scene's placement rules, or the first row that breaks one is refused (d); a multi-object scene with
an SCM without object plates is refused, a one-object scene's ``support:`` holds given rows too, and the rules given
rows cannot be held to are said in one note (e). Each refusal: one line, exit 2 (a UserError in Python), nothing
written. Real CLI in-process (helpers.run_cli), real SCMs and scenes; two real bpy renders of 4 images at 8 px."""

import math
import warnings

import numpy as np
import pytest
import yaml
import zarr
from helpers import assert_refused, multi3dident_without_rules, run_cli

from ident3d.causal import load_scm
from ident3d.causal.errors import UserError
from ident3d.causal.plates import expand_plates
from ident3d.render import plan_render, render_store
from ident3d.render.api import RenderNote
from ident3d.render.scene import load_scene
from ident3d.render.settings import FIELD_RULES, FLOATS, WHOLE, RenderSettings

SCM = "multi3dident_independent"
MULTI = ["--scene", "multi3dident", "--scm", SCM]
TINY = ["--resolution", "8", "--samples", "1", "--chunk-size", "4", "--no-progress"]


def refused_in_python(call, *fragments):
    """``call()`` raises a one-line UserError holding every fragment."""
    with pytest.raises(UserError) as info:
        call()
    text = str(info.value)
    assert "\n" not in text and all(f in text for f in fragments), text


def write_scene(path, data):
    """A scene YAML file (for --scene PATH)."""
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """`ident3d sample --scene multi3dident`: 8 rows of the plate SCM that keep the scene's placement rules, as the
    .npz it writes (latents, names, index, present)."""
    path = tmp_path_factory.mktemp("kept") / "kept.npz"
    r = run_cli("sample", "--scm", SCM, "--scene", "multi3dident", "--n", "8", "--out", path)
    assert r.returncode == 0, r.stderr
    return path


# ----- a: the Python API's own inputs get one-line UserErrors ---------------------------------------------------
@pytest.mark.parametrize("call", ["plan_render", "render_store"])
def test_a_bad_setting_through_the_api_is_a_one_line_user_error(tmp_path, call):
    fn = {"plan_render": lambda: plan_render(tmp_path / "s.zarr", n=4, settings={"filter_width": "abc"}),
          "render_store": lambda: render_store(tmp_path / "s.zarr", n=4, settings={"filter_width": "abc"}, workers=1,
                                               progress=False)}[call]
    refused_in_python(fn, "filter_width must be a finite number, got 'abc'")
    refused_in_python(lambda: plan_render(tmp_path / "s.zarr", n=4, settings="abc"), "settings must be a mapping")
    refused_in_python(lambda: plan_render(tmp_path / "s.zarr", n=4, preset=["fast"]), "unknown render preset")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("kwargs, message", [
    ({"scene": 5}, "scene must be a built-in scene's name, a scene YAML path, a Scene or its dict, got 5"),
    ({"meshes": 5}, "meshes must be {CLASS: PATH} or a list of 'CLASS=PATH', got 5"),
    ({"meshes": {"Teapot": None}}, "meshes: a class's mesh must be a file path, got None"),
    ({"meshes_dir": 5}, "meshes_dir must be a folder's path, got 5"),
    ({"views": {"a": 5}}, "views: view 'a' must change a change set (text) or a list of node names, got 5"),
    ({"overwrite": "no"}, "overwrite must be True or False, got 'no'"),
    ({"progress": "yes"}, "progress must be True or False, got 'yes'"),
    ({"scheduler": 5}, "scheduler must be a Dask scheduler's address"),
])
def test_the_apis_own_arguments_are_one_line_user_errors(tmp_path, kwargs, message):
    refused_in_python(lambda: render_store(tmp_path / "s.zarr", n=4, workers=1, **{"progress": False, **kwargs}),
                      message)
    assert not any(tmp_path.iterdir())


# ----- b: every render setting by type and range; out is a path ---------------------------------------------------
@pytest.mark.parametrize("setting, message", [
    ({"adaptive_threshold": math.nan}, "adaptive_threshold must be a finite number, got nan"),
    ({"adaptive_threshold": math.inf}, "adaptive_threshold must be a finite number, got inf"),
    ({"adaptive_threshold": 1.5}, "adaptive_threshold must be at most 1.0"),
    ({"tile_size": 8.5}, "tile_size must be a whole number, got 8.5"),
    ({"tile_size": 10**12}, "tile_size must be at most 8192 px (Cycles' limit)"),
    ({"adaptive_min_samples": 2.5}, "adaptive_min_samples must be a whole number, got 2.5"),
    ({"adaptive_sampling": "no"}, "adaptive_sampling must be true or false (a bool), got 'no'"),
    ({"light_tree": "yes"}, "light_tree must be true or false (a bool), got 'yes'"),
    ({"denoise": "no"}, "denoise must be true or false (a bool), got 'no'"),
    ({"denoise": 1}, "denoise must be true or false (a bool), got 1"),
    ({"filter_width": None}, "filter_width must be a finite number, got None"),
    ({"resolution": True}, "resolution must be a whole number, got True"),
    ({"samples": 2**30}, "samples must be at most 16777216"),
    ({"threads": -1}, "threads must be at least 0"),
    ({"device": 1}, "render device 1 is not one of auto, cpu, gpu"),
    ({"bogus": 1}, "unknown render setting(s) ['bogus']"),
])
def test_every_render_setting_is_checked_before_anything_is_written(tmp_path, setting, message):
    refused_in_python(lambda: render_store(tmp_path / "s.zarr", n=4, settings=setting, workers=1, progress=False),
                      message)
    if "bogus" not in setting:  # the one owner of the rules: a RenderSettings made directly is held to them too
        refused_in_python(lambda: RenderSettings(**setting), message)
    assert not any(tmp_path.iterdir())


def test_settings_are_stored_as_plain_values_and_every_field_has_a_rule():
    s = RenderSettings(resolution=np.int64(16), denoise=np.bool_(False), filter_width=np.float32(2))
    assert (type(s.resolution), type(s.denoise), type(s.filter_width)) == (int, bool, float)
    assert set(FIELD_RULES) == set(RenderSettings.__dataclass_fields__)


def test_the_numeric_bounds_are_cycles_own():
    """The hard limits Blender's RNA gives each knob (but resolution's, and threads' lower bound, which are ours)."""
    import bpy

    cycles = bpy.context.scene.cycles.bl_rna.properties
    render = bpy.types.RenderSettings.bl_rna.properties
    rna = {"samples": cycles["samples"], "max_bounces": cycles["max_bounces"], "threads": render["threads"],
           "adaptive_min_samples": cycles["adaptive_min_samples"], "tile_size": cycles["tile_size"],
           "resolution": render["resolution_x"], "adaptive_threshold": cycles["adaptive_threshold"],
           "filter_width": cycles["filter_width"]}
    ours = {"resolution": 8, "threads": 0}  # 8 px is our least image; threads 0 means "all cores" (Cycles' AUTO)
    for name, (low, high, _) in {**WHOLE, **FLOATS}.items():
        assert high is None and name == "resolution" or rna[name].hard_max == pytest.approx(high), name
        assert low == ours.get(name, pytest.approx(rna[name].hard_min, rel=1e-6)), name


@pytest.mark.parametrize("out", [5, "", None, b"s.zarr"])
def test_out_must_be_a_path_or_text(tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    refused_in_python(lambda: render_store(out, n=4, workers=1, progress=False),
                      "out must be the store's path or URL")
    assert not any(tmp_path.iterdir())  # no store named '5' (or anything else) in the working directory


# ----- c: what `sample` writes, `render --latents` reads -----------------------------------------------------------
def test_render_reads_what_sample_writes_for_a_multi_object_scm(tmp_path, kept):
    """The .npz of `ident3d sample` (with its `present` flags) renders on multi3dident: the store holds its rows and
    flags, and the rule given rows are not held to (min_visible) is said in one note line."""
    out = tmp_path / "s.zarr"
    r = run_cli("render", *MULTI, "--latents", kept, "--out", out, *TINY)
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if "note:" in line]
    assert len(notes) == 1 and "min_visible 0.005" in notes[0], r.stderr
    g, f = zarr.open_group(str(out), mode="r"), np.load(kept)
    assert np.array_equal(g["latents"][:], f["latents"]) and np.array_equal(g["present"][:], f["present"])


def test_sample_without_a_scene_reads_back_on_a_scene_without_rules(tmp_path):
    """Plain `sample` output of a plate SCM (no --scene) is read as it is where the scene has no placement rules."""
    path = tmp_path / "raw.npz"
    assert run_cli("sample", "--scm", SCM, "--n", "5", "--out", path).returncode == 0
    plan = plan_render(tmp_path / "s.zarr", scene=multi3dident_without_rules(), scm=SCM, latents=path)
    assert plan.job.n == 5 and np.array_equal(plan.latents, np.load(path)["latents"])
    assert not (tmp_path / "s.zarr").exists()


def test_sample_with_a_scene_gives_the_rows_render_n_stores(tmp_path):
    """`sample --scene` redraws rows as `render --n` does (same seeds, same attempts): equal latents."""
    data = {**multi3dident_without_rules(), "placement": {"min_distance": 2.5}}  # no min_visible: no render redraws
    scene = write_scene(tmp_path / "scene.yaml", data)
    r = run_cli("sample", "--scm", SCM, "--scene", scene, "--n", "4", "--seed", "3", "--out", tmp_path / "rows.npz")
    assert r.returncode == 0, r.stderr
    r = run_cli("render", "--scene", scene, "--scm", SCM, "--n", "4", "--seed", "3", "--out", tmp_path / "s.zarr",
                *TINY)
    assert r.returncode == 0, r.stderr
    stored = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")
    assert stored["attempts"][:].max() > 1  # some rows were redrawn
    assert np.array_equal(stored["latents"][:], np.load(tmp_path / "rows.npz")["latents"])


def test_placed_rows_do_not_depend_on_how_they_are_blocked(monkeypatch):
    from ident3d.render import placement

    scm, scene = load_scm(SCM), load_scene("multi3dident")
    whole = placement.sample_placed(scm, scene, scene.placement, 10, 3, start=5)
    monkeypatch.setattr(placement, "PLACED_BLOCK", 3)
    split = placement.sample_placed(scm, scene, scene.placement, 10, 3, start=5)
    assert np.array_equal(whole.latents, split.latents) and np.array_equal(whole.index, np.arange(5, 15))
    assert placement.latents_ok(scene.placement, scene, split.latents).all()


def test_sample_refuses_a_scene_that_does_not_bind_the_scm(tmp_path):
    out = tmp_path / "rows.npz"
    assert_refused(run_cli("sample", "--scm", "causal3dident", "--scene", "multi3dident", "--n", "4", "--out", out),
                   "scene multi3dident binds latents")
    assert not out.exists()


# ----- d: given rows keep the SCM's support and the scene's placement rules ---------------------------------------
def _col(names, name):
    """The column of latent ``name``."""
    return list(names).index(name)


def _fractional_class(x, n):
    """Object 1's class between two classes."""
    x[0, _col(n, "obj1_class")] = 2.5


def _overlap(x, n):
    """Object 1 where object 0 is."""
    for axis in ("x", "y", "z"):
        x[0, _col(n, f"obj1_pos_{axis}")] = x[0, _col(n, f"obj0_pos_{axis}")]


def _half_present(x, n):
    """Slot 2 half present."""
    x[0, _col(n, "present_2")] = 0.5


def _gap(x, n):
    """Slot 3 full after an empty slot 2."""
    x[0, _col(n, "present_2")], x[0, _col(n, "present_3")] = 0.0, 1.0


def _none_present(x, n):
    """No object at all (the SCM has at least 2)."""
    x[0, [_col(n, f"present_{k}") for k in range(4)]] = 0.0


def _absent_but_placed(x, n):
    """Slot 3 empty but its x not 0."""
    x[0, _col(n, "present_3")], x[0, _col(n, "obj3_pos_y")] = 0.0, 0.0
    x[0, _col(n, "obj3_pos_x")] = 0.5


CASES = {
    "fractional class": (_fractional_class, ["row 0 has obj1_class = 2.5", "a category index, a whole number 0..6"]),
    "overlap": (_overlap, ["row 0 has objects 0 and 1 0 apart", "min_distance 2.5",
                           "ident3d sample --scene multi3dident"]),
    "present 0.5": (_half_present, ["row 0 has present_2 = 0.5", "present (1) or absent (0)"]),
    "gap": (_gap, ["row 0 has present_3 = 1 after present_2 = 0", "without gaps"]),
    "none present": (_none_present, ["row 0 holds 0 object(s) but SCM multi3dident_independent has at least 2"]),
    "absent but placed": (_absent_but_placed, ["row 0 has obj3_pos_x = 0.5 but its object is absent (present_3 = 0)"]),
}


def four_objects_apart(names):
    """One row that keeps every rule: all four objects present, class 0, on the corners of a square 3.6 world units
    wide (positions +-0.6 raw, 3 units each), every other latent 0."""
    x = np.zeros((1, len(names)), np.float32)
    for k, (px, py) in enumerate([(-0.6, -0.6), (0.6, -0.6), (-0.6, 0.6), (0.6, 0.6)]):
        x[0, _col(names, f"present_{k}")] = 1.0
        x[0, _col(names, f"obj{k}_pos_x")], x[0, _col(names, f"obj{k}_pos_y")] = px, py
    return x


@pytest.mark.filterwarnings("ignore::ident3d.render.api.RenderNote")  # the rows that keep the rules: said elsewhere
@pytest.mark.parametrize("case", list(CASES))
def test_given_rows_outside_the_support_or_the_placement_rules_are_refused(tmp_path, case):
    change, fragments = CASES[case]
    names = load_scm(SCM).names
    x = four_objects_apart(names)
    path = tmp_path / "rows.npz"
    np.savez(path, latents=x, names=names)
    assert plan_render(tmp_path / "s.zarr", scene="multi3dident", scm=SCM, latents=path).job.n == 1  # it keeps them
    change(x, names)
    np.savez(path, latents=x, names=names)
    out = tmp_path / "never.zarr"
    assert_refused(run_cli("render", *MULTI, "--latents", path, "--out", out, *TINY), *fragments)
    assert not out.exists() and not (tmp_path / "s.zarr").exists()


def test_present_flags_that_disagree_with_the_rows_are_refused(tmp_path, kept):
    f = dict(np.load(kept))
    f["present"] = f["present"].copy()
    f["present"][2, 1] = False  # slot 1 is always full (min 2 objects)
    np.savez(tmp_path / "rows.npz", **f)
    out = tmp_path / "never.zarr"
    assert_refused(run_cli("render", *MULTI, "--latents", tmp_path / "rows.npz", "--out", out, *TINY),
                   "row 2's 'present' says slot 1 is empty but its present_1 is 1")
    assert not out.exists()


# ----- e: rules a render would skip are refused or said -----------------------------------------------------------
def test_a_multi_object_scene_needs_an_scm_with_object_plates(tmp_path):
    flat, _ = expand_plates(load_scm(SCM).spec)  # the same nodes, present_k included, without the plates
    refused_in_python(lambda: plan_render(tmp_path / "s.zarr", scene="multi3dident", scm={**flat, "name": "flat"}, n=4),
                      "scene multi3dident has object slots but SCM flat has no object plates")
    assert not any(tmp_path.iterdir())


def test_a_one_object_scenes_support_holds_given_rows(tmp_path):
    data = {**load_scene("causal3dident").to_dict(), "placement": {"support": {"only": {"pos_x": [0.5, 1.0]}}}}
    scene = write_scene(tmp_path / "scene.yaml", data)
    rows = load_scm("causal3dident").sample(3, seed=0)
    rows.latents[:, 0] = [0.7, 0.2, 0.9]
    np.savez(tmp_path / "rows.npz", latents=rows.latents, classes=rows.classes)
    out = tmp_path / "never.zarr"
    assert_refused(run_cli("render", "--scene", scene, "--latents", tmp_path / "rows.npz", "--out", out, *TINY),
                   "row 1 lies outside scene causal3dident's placement support only pos_x in [0.5, 1]")
    assert not out.exists()


def test_the_rules_given_rows_are_not_held_to_are_said_once(tmp_path, kept):
    with pytest.warns(RenderNote, match=r"min_visible 0.005 .*; min_distance 2.5 to the rows of views pos"):
        plan_render(tmp_path / "s.zarr", scene="multi3dident", scm=SCM, latents=kept, views="pos:positions")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RenderNote)  # a scene without rules: nothing to say
        plan_render(tmp_path / "s.zarr", scene=multi3dident_without_rules(), scm=SCM, latents=kept)
    assert not any(tmp_path.iterdir())
