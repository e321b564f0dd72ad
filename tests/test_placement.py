"""Placement rules (issue 35 §1, "placement that users can trust"): a scene's min_distance, min_visible and support
region are kept by every stored row, rejected rows are redrawn deterministically (the same store however rows are
chunked, split over workers or resumed), each row's draws are recorded, impossible rules are refused before anything
is written, and placement_summary's numbers are those numpy gives by hand. Real bpy renders of a dozen 32 px images."""

import json
import shutil

import numpy as np
import pytest
import yaml
import zarr
from helpers import multi3dident_without_rules, run_cli, store_bytes

from ident3d.causal import load_scm
from ident3d.causal.errors import UserError
from ident3d.render import render_store
from ident3d.render.api import plan_render
from ident3d.render.placement import (
    gap_ok,
    placement_seed,
    placement_summary,
    preflight,
    support_ok,
    visible_ok,
)
from ident3d.render.placement_rules import PlacementRules, parse_rules, parse_support, support_from_flags
from ident3d.render.scene import SceneError, load_scene, scene_from_dict

SIZE = 32
NEED = 6  # px: min_visible 0.005 of a 32 x 32 frame (5.12) rounded up
ARGS = {"scene": "multi3dident", "scm": "multi3dident_independent", "n": 12, "chunk_size": 4, "seed": 0,
        "settings": {"resolution": SIZE, "samples": 4}, "views": "pos:positions", "progress": False}
CORNER = {"obj0_pos_x": [0.2, 1.0], "obj1_pos_x": [0.2, 1.0]}


def centres_by_hand(latents, names):
    """(N, 4, 3) object centres from the scene YAML's bindings (x, y: 3 raw; z: 3 raw + 2.221), NaN when absent."""
    col = {n: j for j, n in enumerate(names)}
    out = np.stack([np.stack([3.0 * latents[:, col[f"obj{k}_pos_x"]], 3.0 * latents[:, col[f"obj{k}_pos_y"]],
                              3.0 * latents[:, col[f"obj{k}_pos_z"]] + 2.221], axis=1) for k in range(4)], axis=1)
    present = latents[:, [col[f"present_{k}"] for k in range(4)]] > 0.5
    return np.where(present[..., None], out, np.nan)


def min_gap(latents, names):
    """Each row's least distance between two present objects' centres (inf with fewer than two)."""
    c = centres_by_hand(np.asarray(latents, float), names)
    d = np.linalg.norm(c[:, :, None] - c[:, None], axis=-1)
    d[:, np.arange(4), np.arange(4)] = np.inf
    return np.nanmin(np.where(np.isnan(d), np.inf, d), axis=(1, 2))


@pytest.fixture(scope="module")
def placed(tmp_path_factory):
    out = tmp_path_factory.mktemp("placement") / "one.zarr"
    assert render_store(out, workers=1, **ARGS).ok
    return out


@pytest.fixture(scope="module")
def arrays(placed):
    g = zarr.open_group(str(placed), mode="r")
    return {k: g[k][:] for k in ("latents", "visibility", "present", "attempts", "views/pos/latents",
                                 "views/pos/visibility", "views/pos/present", "views/pos/attempts")}


# ----- a rendered store keeps the rules ----------------------------------------------------------------------------
def test_every_present_object_is_visible_and_far_enough_from_the_others(arrays):
    names = load_scm("multi3dident_independent").names
    for pre in ("", "views/pos/"):
        vis, present = arrays[f"{pre}visibility"], arrays[f"{pre}present"]
        assert present.sum() >= 24 and (vis[present] >= NEED).all(), pre
        assert (min_gap(arrays[f"{pre}latents"], names) >= 2.5).all(), pre
        assert visible_ok(vis, present, 0.005, SIZE * SIZE).all()
    assert arrays["attempts"].min() >= 1 and (arrays["attempts"] > 1).any()
    assert arrays["views/pos/attempts"].min() >= 1 and (arrays["views/pos/attempts"] > 1).any()
    moved = load_scm("multi3dident_independent").resolve("positions")
    keep = [j for j, n in enumerate(names) if n not in moved]  # a redrawn view keeps the anchor's other latents
    assert np.array_equal(arrays["views/pos/latents"][:, keep], arrays["latents"][:, keep])


def test_without_the_rules_the_same_seed_hides_objects_and_packs_them_close(tmp_path):
    """The checks above can fail: without rules, seed 0's rows have objects under 6 px (some fully hidden) and
    objects closer than 2.5."""
    out = tmp_path / "free.zarr"
    assert render_store(out, workers=1, **{**ARGS, "scene": multi3dident_without_rules(), "views": None}).ok
    g = zarr.open_group(str(out), mode="r")
    vis, present = g["visibility"][:], g["present"][:]
    assert (vis[present] < NEED).sum() >= 2 and (vis[present] == 0).any()
    assert not visible_ok(vis, present, 0.005, SIZE * SIZE).all()
    assert (min_gap(g["latents"][:], load_scm("multi3dident_independent").names) < 2.5).any()
    assert "attempts" not in g and "placement" not in dict(g.attrs)["scene_spec"]


def test_each_row_is_its_last_draw_of_the_counter_based_stream(arrays):
    """Row i with a draws is row i of the SCM sampled with placement_seed(seed, a - 1): attempt 0 is the store's seed,
    so rows accepted at once are the rows a render without rules stores."""
    scm = load_scm("multi3dident_independent")
    for i, a in enumerate(arrays["attempts"]):
        row = scm.sample(1, seed=placement_seed(0, int(a) - 1), start=i).latents[0]
        assert np.array_equal(arrays["latents"][i], row), i
    assert placement_seed(0, 0) == 0 and len({placement_seed(0, r) for r in range(50)}) == 50


# ----- the same bytes however the rows are split -------------------------------------------------------------------
def test_one_chunk_two_workers_and_a_resume_write_the_same_bytes(placed, tmp_path):
    two = tmp_path / "two.zarr"
    assert render_store(two, workers=2, **ARGS).ok
    assert store_bytes(two) == store_bytes(placed)
    one = tmp_path / "one_chunk.zarr"
    assert render_store(one, workers=1, **{**ARGS, "chunk_size": 12}).ok
    a, b = zarr.open_group(str(one), mode="r"), zarr.open_group(str(placed), mode="r")
    for name in ("images", "latents", "masks", "visibility", "present", "attempts", "views/pos/images",
                 "views/pos/attempts"):
        assert np.array_equal(a[name][:], b[name][:]), name
    resumed = tmp_path / "resumed.zarr"
    shutil.copytree(placed, resumed)
    zarr.open_group(str(resumed), mode="r+")["done"][2] = False
    for name in ("images", "latents", "attempts", "views/pos/attempts"):  # chunk 2's files, as a killed worker
        chunk = resumed / name / "c" / "2"
        shutil.rmtree(chunk) if chunk.is_dir() else chunk.unlink()
    report = render_store(resumed, workers=1, **ARGS)
    assert report.ok and report.rendered == [2] and report.placed_rows == 4 and report.placement_draws >= 4
    assert store_bytes(resumed) == store_bytes(placed)


def test_other_rules_do_not_resume_the_store(placed):
    with pytest.raises(UserError, match="rendered with different .*placement") as err:
        render_store(placed, workers=1, **ARGS, support={"exclude": CORNER})
    assert "\n" not in str(err.value)


# ----- support regions ---------------------------------------------------------------------------------------------
def test_support_exclude_through_the_cli_leaves_the_corner_empty(tmp_path):
    out = tmp_path / "train.zarr"
    r = run_cli("render", "--scene", "multi3dident", "--scm", "multi3dident_causal", "--n", "8", "--resolution", SIZE,
                "--samples", "2", "--chunk-size", "4", "--out", out, "--no-progress", "--workers", "1",
                "--support-exclude", "obj0_pos_x=0.2:1,obj1_pos_x=0.2:1")
    assert r.returncode == 0, r.stderr
    assert "placement: " in r.stdout and "draws rejected" in r.stdout
    g = zarr.open_group(str(out), mode="r")
    names = load_scm("multi3dident_causal").names
    x0, x1 = (g["latents"][:, names.index(n)] for n in CORNER)
    assert not ((x0 >= 0.2) & (x1 >= 0.2)).any()
    assert dict(g.attrs)["placement"]["support"] == {"exclude": CORNER}


def test_support_only_keeps_every_row_inside_also_in_a_one_object_scene(tmp_path):
    out = tmp_path / "test.zarr"
    box = {"pos_x": [0.5, 1.0], "pos_y": [-1.0, 0.0]}
    assert render_store(out, scene="causal3dident", n=8, chunk_size=8, settings={"resolution": 16, "samples": 1},
                        support={"only": box}, workers=1, progress=False).ok
    g = zarr.open_group(str(out), mode="r")
    names = load_scm("causal3dident").names
    x, y = g["latents"][:, names.index("pos_x")], g["latents"][:, names.index("pos_y")]
    assert ((x >= 0.5) & (y <= 0.0)).all() and (g["attempts"][:] > 1).any()
    assert "masks" not in g  # a one-object scene: the support rule only, no masks


def test_support_ok_treats_absent_objects_as_outside_and_fails_on_shuffled_rows():
    scene = load_scene("multi3dident")
    rows = load_scm("multi3dident_independent").sample(400, seed=5)
    col = {n: j for j, n in enumerate(rows.names)}
    box = {"obj0_pos_x": [0.0, 1.0], "obj2_pos_x": [-0.5, 0.5]}
    inside = (rows.latents[:, col["obj0_pos_x"]] >= 0) & rows.present[:, 2] & \
        (np.abs(rows.latents[:, col["obj2_pos_x"]]) <= 0.5)
    assert np.array_equal(support_ok(parse_support({"only": box}), scene, rows.latents), inside)
    assert np.array_equal(support_ok(parse_support({"exclude": box}), scene, rows.latents), ~inside)
    shuffled = rows.latents.copy()
    shuffled[:, col["obj0_pos_x"]] = np.random.default_rng(0).permutation(shuffled[:, col["obj0_pos_x"]])
    assert not np.array_equal(support_ok(parse_support({"only": box}), scene, shuffled), inside)


def test_gap_ok_is_the_brute_force_distance_rule_and_fails_on_shuffled_rows():
    scene = load_scene("multi3dident")
    rows = load_scm("multi3dident_causal").sample(300, seed=2)
    by_hand = min_gap(rows.latents, rows.names) >= 2.5
    assert np.array_equal(gap_ok(scene, rows.latents), by_hand) and 0.2 < by_hand.mean() < 0.8
    shuffled = rows.latents[np.random.default_rng(1).permutation(300)]
    assert not np.array_equal(gap_ok(scene, shuffled), by_hand)


# ----- refusals ----------------------------------------------------------------------------------------------------
def test_impossible_placement_is_refused_in_one_line_before_anything_is_written(tmp_path):
    data = load_scene("multi3dident").to_dict()
    data["placement"] = {**data["placement"], "min_distance": 50}
    scene = tmp_path / "far.yaml"
    scene.write_text(yaml.safe_dump(data))
    out = tmp_path / "far.zarr"
    r = run_cli("render", "--scene", scene, "--scm", "multi3dident_independent", "--n", "16", "--resolution", SIZE,
                "--out", out, "--no-progress")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "0.0% of 2,000 rows" in r.stderr and "lower min_distance" in r.stderr and not out.exists()
    r = run_cli("render", "--scene", "multi3dident", "--scm", "multi3dident_independent", "--n", "16", "--out", out,
                "--support-only", "obj0_pos_x=0.999:1,obj1_pos_x=0.999:1", "--no-progress")
    assert r.returncode == 2 and "widen the support" in r.stderr and not out.exists()


def test_the_preflight_weighs_the_rows_left_against_the_retries():
    """p ~ 0.55 passes with 100 retries; with 2 retries 10,000 rows leave ~1,000 failing rows and are refused."""
    scene, scm = load_scene("multi3dident"), load_scm("multi3dident_independent")
    assert 0.5 < preflight(scene.placement, scene, scm, 10_000, 0) < 0.6
    with pytest.raises(UserError, match=r"about .* of 10,000 rows would still break them after 3 draws"):
        preflight(PlacementRules(min_distance=2.5, retries=2), scene, scm, 10_000, 0)


def test_a_row_that_cannot_be_seen_fails_its_chunk_in_one_line(tmp_path):
    data = load_scene("multi3dident").to_dict()
    data["placement"] = {"min_visible": 0.6, "retries": 1}  # no object covers 60% of the frame
    with pytest.raises(UserError, match=r"row 0 still has an object under min_visible 0.6 \(615 px\) after 2 draws"):
        render_store(tmp_path / "s.zarr", scene=data, scm="multi3dident_independent", n=2, chunk_size=2,
                     settings={"resolution": SIZE, "samples": 1}, workers=1, progress=False)


@pytest.mark.parametrize("placement, message", [
    ({"min_distance": -1}, "placement.min_distance must be a number >= 0"),
    ({"min_visible": 1.5}, "placement.min_visible must be a number in [0, 1)"),
    ({"retries": 2.5}, "placement.retries must be a whole number >= 0"),
    ({"gap": 1}, "placement: unknown key(s) ['gap']"),
    ({"support": {"inside": {}}}, "placement.support must be {exclude:"),
    ({"support": {"only": {"obj0_pos_x": [1, 0]}}}, "obj0_pos_x must be an interval [LOW, HIGH]"),
])
def test_bad_rules_in_a_scene_are_one_line_errors(placement, message):
    data = {**load_scene("multi3dident").to_dict(), "placement": placement}
    with pytest.raises(SceneError) as err:
        scene_from_dict(data)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_rules_that_do_not_fit_the_render_are_refused(tmp_path):
    one = {**load_scene("causal3dident").to_dict(), "placement": {"min_distance": 1}}
    with pytest.raises(SceneError, match="need object slots"):
        scene_from_dict(one)
    with pytest.raises(UserError, match="unknown latent 'obj9_pos_x'"):
        plan_render(tmp_path / "s.zarr", scene="multi3dident", scm="multi3dident_independent", n=4,
                    support={"exclude": {"obj9_pos_x": [0, 1]}})
    rows = load_scm("multi3dident_independent").sample(4, seed=0)
    with pytest.raises(UserError, match="given latents are rendered as given"):
        plan_render(tmp_path / "s.zarr", scene="multi3dident", scm="multi3dident_independent", latents=rows,
                    support={"exclude": CORNER})
    kept = rows.latents[gap_ok(load_scene("multi3dident"), rows.latents)]  # given rows must keep min_distance
    plan = plan_render(tmp_path / "s.zarr", scene="multi3dident", scm="multi3dident_independent", latents=kept)
    assert plan.job.placement is None and plan.attrs.placement is None  # given latents: rendered as given
    with pytest.raises(UserError, match="not both"):
        support_from_flags("obj0_pos_x=0:1", "obj0_pos_x=0:1")
    assert support_from_flags("obj0_pos_x=-1:0.5", None) == {"exclude": {"obj0_pos_x": [-1.0, 0.5]}}
    plan = plan_render(tmp_path / "s.zarr", scene="causal3dident", n=4)
    assert plan.job.placement is None and "placement" not in plan.attrs.fingerprint()  # no rules: as before
    assert not any(tmp_path.iterdir())


def test_rules_round_trip_through_their_plain_form():
    rules = parse_rules({"min_distance": 2, "support": {"only": CORNER}})
    assert rules.to_dict() == {"min_distance": 2.0, "retries": 100, "support": {"only": CORNER}}
    assert parse_rules(rules.to_dict()) == rules and json.loads(json.dumps(rules.to_dict())) == rules.to_dict()


# ----- placement_summary -------------------------------------------------------------------------------------------
def test_placement_summary_matches_numpy_by_hand():
    rng = np.random.default_rng(3)
    names = ["shared", "present_0", "present_1", "present_2", "a_x", "a_y", "b_x", "b_y", "c_x", "c_y"]
    objects = (("a_x", "a_y"), ("b_x", "b_y"), ("c_x", "c_y"))
    latents = rng.normal(size=(40, len(names)))
    latents[:, 6] = 0.8 * latents[:, 4] + 0.2 * rng.normal(size=40)  # b_x follows a_x
    latents[:, 9] = -latents[:, 7] + 0.05 * rng.normal(size=40)  # c_y follows b_y, negatively
    present = np.ones((40, 3), bool)
    present[:10, 2] = False
    present[30:, 1] = False
    attempts = rng.integers(1, 5, size=40)
    out = placement_summary(latents, present, attempts, names, objects)
    assert out["rows"] == 40 and out["draws"] == attempts.sum()
    assert out["rejection_rate"] == pytest.approx(1 - 40 / attempts.sum())
    assert out["mean_attempts"] == pytest.approx(attempts.mean())
    assert out["object_counts"] == {2: 0.5, 3: 0.5}  # rows 0-9 and 30-39 hold two objects
    both01 = present[:, 0] & present[:, 1]
    assert set(out["correlation"]) == {"x", "y"}
    assert out["correlation"]["x"]["obj0_obj1"] == pytest.approx(np.corrcoef(latents[both01, 4],
                                                                              latents[both01, 6])[0, 1])
    both12 = present[:, 1] & present[:, 2]
    r12 = np.corrcoef(latents[both12, 7], latents[both12, 9])[0, 1]
    assert out["correlation"]["y"]["max_abs"] == pytest.approx(abs(r12)) and r12 < -0.9
    assert out["correlation"]["y"]["pair"] == [1, 2] and out["correlation"]["x"]["pair"] == [0, 1]
    assert out["correlation"]["y"]["pair_rows"] == both12.sum() == 20
    shuffled = latents.copy()
    shuffled[:, 6:] = latents[rng.permutation(40), 6:]  # objects b and c moved to other rows than a's
    shuffled = placement_summary(shuffled, present, attempts, names, objects)
    assert abs(shuffled["correlation"]["x"]["obj0_obj1"]) < 0.5 < out["correlation"]["x"]["obj0_obj1"]


def test_a_store_spec_passes_its_support_into_the_render_and_its_digest():
    """An experiment config's `support:` key is checked with the spec, reaches the render's arguments and changes the
    store's fingerprint digest (a cell keyed on the store sees the held-out corner)."""
    from ident3d.pipelines.store_specs import Store, plan_store, render_args
    from ident3d.training.hparams import parse_config

    def check_spec(raw: dict):
        return parse_config(dict[str, Store], {"train": raw}, "config grid.yaml: stores")["train"]

    spec = {"n": 8, "resolution": 16, "samples": 1}
    held = {**spec, "support": {"exclude": {"pos_x": [0.2, 1.0]}}}
    assert render_args(check_spec(held), "causal3dident")["support"] == held["support"]
    with pytest.raises(UserError, match=r"config grid.yaml: stores: train.support: must be \{exclude"):
        check_spec({**spec, "support": {"inside": {"pos_x": [0, 1]}}})
    plain, corner = (plan_store(check_spec(s), "train", "causal3dident", "grid.yaml").digest for s in (spec, held))
    assert plain != corner and plain == plan_store(check_spec({**spec, "support": None}), "train", "causal3dident",
                                                   "grid.yaml").digest


def test_show_reports_the_stores_rejection_rate_and_object_counts(placed, arrays):
    """`ident3d show`'s placement line: the numbers of placement_summary over the finished rows (the CLI's table
    holds the same line)."""
    from ident3d.pipelines.show_masks import placement_line
    from ident3d.store.attrs import read_attrs

    g = zarr.open_group(str(placed), mode="r")
    line = placement_line(g, np.arange(len(arrays["attempts"])), read_attrs(g, str(placed)).scm)
    attempts = arrays["attempts"]
    rate = 1 - len(attempts) / attempts.sum()
    assert line.startswith(f"{rate:.1%} of {attempts.sum()} draws rejected ({attempts.mean():.2f} per row)"), line
    counts = arrays["present"].sum(1)
    assert f"{int(counts.min())}: {(counts == counts.min()).mean():.0%}" in line
    r = run_cli("show", str(placed), env={"COLUMNS": "400"})
    assert r.returncode == 0 and line in r.stdout, r.stdout
