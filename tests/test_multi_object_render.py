"""Multi-object scenes (issue 35 §1-§2): the built-in scene multi3dident binds an SCM with object plates slot by slot,
and real bpy renders (32 px, a handful of images) give masks from Cycles' object index pass that agree with the
latents, visible pixel counts and presence per slot, written into the store as bytes that do not depend on how the
rows were split over workers or resumed."""

import itertools
import shutil

import numpy as np
import pytest
import zarr
from helpers import run_cli, store_bytes

from ident3d.causal import load_scm
from ident3d.causal.errors import UserError
from ident3d.render import render_store
from ident3d.render.api import plan_render
from ident3d.render.projection import slot_pixels
from ident3d.render.scene import SceneError, load_scene, pose, presence, scene_from_dict
from ident3d.store.check import check_store

SIZE = 32
ARGS = {"scene": "multi3dident", "scm": "multi3dident_independent", "n": 12, "chunk_size": 4, "seed": 0,
        "settings": {"resolution": SIZE, "samples": 4}, "views": "pos:positions", "progress": False}
MIN_VISIBLE = 20  # px of 32 x 32: objects seen well enough for their mask centroid to locate them
NEAR = 5.0  # px: a well-seen object's mask centroid lies this close to where its latents put its origin


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory):
    out = tmp_path_factory.mktemp("multi") / "one.zarr"
    assert render_store(out, workers=1, **ARGS).ok
    return out


@pytest.fixture(scope="module")
def store(one_worker):
    g = zarr.open_group(str(one_worker), mode="r")
    return {k: g[k][:] for k in ("images", "latents", "masks", "visibility", "present", "done", "attempts")}


# ----- the scene model (no bpy) -----------------------------------------------------------------------------------
def test_scene_binds_the_plate_scms_columns_in_order():
    scene = load_scene("multi3dident")
    for name in ("multi3dident_independent", "multi3dident_causal"):
        assert scene.latent_names == tuple(load_scm(name).names)
    assert scene.slots == 4 and scene_from_dict(scene.to_dict()) == scene
    assert "objects" not in load_scene("causal3dident").to_dict()  # one-object scenes' specs are as before
    rows = load_scm("multi3dident_independent").sample(20, seed=3)
    assert np.array_equal(presence(scene, rows.latents), rows.present)
    p = pose(scene, rows.latents[0].tolist())
    assert [o.present for o in p.objects] == rows.present[0].tolist()
    names = list(rows.names)
    assert p.objects[1].location[0] == pytest.approx(3.0 * rows.latents[0, names.index("obj1_pos_x")])
    assert p.objects[1].class_index == int(rows.latents[0, names.index("obj1_class")])
    assert p.location == p.objects[0].location  # the spotlight tracks object 0


@pytest.mark.parametrize("change, message", [
    ({"present": "present"}, "must name the slot with {k}"),
    ({"slots": 9}, "objects.slots must be 1..8"),
    ({"latents": [{"name": "obj{k}_hue", "target": "ground.hue"}]}, "targets 'ground.hue', not one of"),
    ({"colour": 1}, "objects: unknown key(s) ['colour']"),
])
def test_bad_object_slots_are_one_line_errors(change, message):
    data = load_scene("multi3dident").to_dict()
    data["objects"] = {**data["objects"], **change}
    with pytest.raises(SceneError, match=None) as err:
        scene_from_dict(data)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_scene_and_scm_that_disagree_are_refused_before_rendering(tmp_path):
    data = load_scene("multi3dident").to_dict()
    data["classes"] = data["classes"][:3]
    with pytest.raises(UserError, match="obj0_class has 7 categories but scene multi3dident has 3 classes"):
        plan_render(tmp_path / "s.zarr", scene=data, scm="multi3dident_independent", n=4)
    with pytest.raises(UserError, match="binds latents"):
        plan_render(tmp_path / "s.zarr", scene="multi3dident", scm="causal3dident", n=4)
    assert not (tmp_path / "s.zarr").exists()


# ----- rendered masks --------------------------------------------------------------------------------------------
def test_masks_agree_with_the_latents(store):
    """Each well-seen object's mask centroid lies near its projected origin; pairing objects with the masks of the
    next object in the same image fails that check for most of them."""
    scene = load_scene("multi3dident")
    where = slot_pixels(scene, store["latents"], SIZE)
    right, wrong, tried = [], 0, 0
    for i, masks in enumerate(store["masks"]):
        seen = [k for k in range(scene.slots) if store["visibility"][i, k] >= MIN_VISIBLE]
        centroid = {k: np.argwhere(masks == k + 1).mean(axis=0) for k in seen}
        right += [np.linalg.norm(centroid[k] - where[i, k]) for k in seen]
        for k, other in zip(seen, seen[1:] + seen[:1], strict=True):
            if other != k:
                tried += 1
                wrong += np.linalg.norm(centroid[k] - where[i, other]) > NEAR
        if len(seen) > 1:  # the latents' pairing is the closest of all pairings of objects to masks
            cost = {p: sum(np.linalg.norm(centroid[k] - where[i, q]) for k, q in zip(seen, p, strict=True))
                    for p in itertools.permutations(seen)}
            assert min(cost, key=cost.get) == tuple(seen), i
    assert len(right) >= 20 and max(right) <= NEAR, right
    assert tried >= 15 and wrong >= 0.75 * tried, (wrong, tried)


def test_absent_objects_have_no_pixels_and_visibility_counts_the_masks(store, one_worker):
    present, visibility, masks = store["present"], store["visibility"], store["masks"]
    assert present.shape == visibility.shape == (12, 4) and masks.shape == (12, SIZE, SIZE)
    assert masks.dtype == np.uint8 and visibility.dtype == np.int64 and present.dtype == bool
    scm = load_scm("multi3dident_independent")
    assert np.array_equal(present, presence(load_scene("multi3dident"), store["latents"]))
    first = store["attempts"] == 1  # the scene's placement rules redrew the others (tests/test_placement.py)
    assert first.any() and np.array_equal(present[first], scm.sample(12, seed=0).present[first])
    counts = np.stack([np.bincount(m.ravel(), minlength=6)[1:5] for m in masks])
    assert np.array_equal(visibility, counts)
    assert masks.max() <= 4 and not visibility[~present].any()
    assert (masks == 0).any(axis=(1, 2)).all()  # the ground is background
    assert (visibility[:, 0] > 0).mean() >= 0.75  # object 0 is in view in most images
    assert store["done"].all()
    report = check_store(str(one_worker))
    assert {"masks", "visibility", "present", "views/pos/masks", "views/pos/visibility", "views/pos/present"} <= \
        set(report.arrays) and not report.bad
    view = zarr.open_group(str(one_worker), mode="r")["views/pos"]
    assert np.array_equal(view["present"][:], present)  # a change of positions moves objects, adds or removes none
    assert np.array_equal(view["visibility"][:], np.stack([np.bincount(m.ravel(), minlength=6)[1:5]
                                                            for m in view["masks"][:]]))


# ----- the store: split-invariant and resumable ------------------------------------------------------------------
def test_two_workers_and_a_resume_write_the_same_bytes(one_worker, tmp_path):
    two = tmp_path / "two.zarr"
    assert render_store(two, workers=2, **ARGS).ok
    assert store_bytes(two) == store_bytes(one_worker)
    resumed = tmp_path / "resumed.zarr"
    shutil.copytree(one_worker, resumed)
    g = zarr.open_group(str(resumed), mode="r+")
    g["done"][1] = False
    for name in ("images", "masks", "visibility", "present", "views/pos/masks"):
        shutil.rmtree(resumed / name / "c" / "1")  # chunk 1's files, as a killed worker leaves them (or none)
    report = render_store(resumed, workers=1, **ARGS)
    assert report.ok and report.rendered == [1]
    assert store_bytes(resumed) == store_bytes(one_worker)


def test_another_chunk_size_gives_the_same_arrays(store, tmp_path):
    """One chunk of 12 rows renders as frame sequences of 8 and 4 (chunks of 4: one sequence each): same pixels,
    masks, visibility and presence."""
    out = tmp_path / "one_chunk.zarr"
    assert render_store(out, workers=1, **{**ARGS, "chunk_size": 12}).ok
    g = zarr.open_group(str(out), mode="r")
    for name in ("images", "latents", "masks", "visibility", "present"):
        assert np.array_equal(g[name][:], store[name]), name


def test_the_multi_object_scene_without_an_scm_names_the_ones_that_fit(tmp_path):
    """`--scene multi3dident` alone: one line naming the two plate SCMs that bind to it, exit 2, nothing written."""
    r = run_cli("render", "--scene", "multi3dident", "--n", "4", "--resolution", "16", "--samples", "1",
                "--out", str(tmp_path / "m.zarr"), "--no-progress")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "e.g. multi3dident_causal or multi3dident_independent" in r.stderr and not any(tmp_path.iterdir())


def test_the_mask_pass_leaves_the_images_as_they_are():
    """masks=False (what benchmarks/mask_cost.py times the pass against) renders the same pixels, without masks."""
    from ident3d.render.blender import build_renderer

    rows = load_scm("multi3dident_independent").sample(3, seed=2)
    images = {}
    for masks in (True, False):
        r = build_renderer("multi3dident", {"resolution": 24, "samples": 2}, masks=masks)
        try:
            images[masks], got = r.render_batch_masks(rows.latents, seeds=np.arange(3))
        finally:
            r.close()
        assert (got is not None) == masks
    assert np.array_equal(images[True], images[False])
