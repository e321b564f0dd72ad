"""Views rendered by a second mechanism (issue 44 §2), on real Blender renders (16 px, 4 Cycles samples, no denoiser,
so a pixel changes only where the mechanism touches what it shows): ``metal@material=metallic`` keeps the anchors'
latents and changes only the object, which the metal darkens (at the fast preset's 0 bounces a metal reflects only
the lamps; measured: 3-22 % of the pixels change, and their mean falls from 50-116 to 14-66 of 255, a ratio of
0.24-0.59); the control ``ctl@material=rubber``
equals its anchors bit for bit with ``--view-seeds shared``; ``near@material=metallic@camera=near:positions`` changes
the change set's latents only; anchors are those of a store without the views, and every array is the same however
chunked; the store records each view's mechanism and latent blocks (``StoreView``, ``ident3d show``, the
fingerprint); bad specs are one line, exit 2, nothing written; an experiment's store spec takes the mapping form."""

import numpy as np
import pytest
import zarr
from helpers import assert_refused, multi3dident_without_rules, run_cli, tree_digest

import ident3d
from ident3d.causal.errors import UserError
from ident3d.render import plan_render, render_store
from ident3d.store.attrs import read_attrs

N, SIZE = 6, 16
SETTINGS = {"resolution": SIZE, "samples": 4, "denoise": False}
VIEWS = "metal@material=metallic,ctl@material=rubber,near@material=metallic@camera=near:positions"
POSITIONS = ["pos_x", "pos_y", "pos_z", "spot_angle"]  # causal3dident's change set `positions`
CLI = ["render", "--scene", "causal3dident", "--n", N, "--resolution", SIZE, "--samples", 4, "--no-denoise",
       "--workers", 1, "--no-progress", "--view-seeds", "shared"]


def render(out, chunk_size=2, views=VIEWS):
    """The test's store: causal3dident rows rendered in one process (a chunk's anchors follow the previous chunk's
    views in the same renderer), each view with its anchor's Cycles seeds."""
    assert render_store(out, scene="causal3dident", n=N, settings=SETTINGS, chunk_size=chunk_size, views=views,
                        view_seeds="shared", workers=1, progress=False).ok
    return zarr.open_group(str(out), mode="r")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The store with mechanism views (chunks of 2 and of 3) and one of the same rows without views."""
    root = tmp_path_factory.mktemp("mechanisms")
    return {"views": render(root / "views.zarr"), "rechunked": render(root / "rechunked.zarr", chunk_size=3),
            "plain": render(root / "plain.zarr", views=None), "root": root}


def test_a_metallic_view_keeps_the_latents_and_darkens_only_the_object(stores):
    g = stores["views"]
    assert np.array_equal(g["views/metal/latents"][:], g["latents"][:])
    assert np.array_equal(g["views/metal/classes"][:], g["classes"][:])
    anchors, metal = g["images"][:].astype(float), g["views/metal/images"][:].astype(float)
    changed = np.any(anchors != metal, axis=-1)  # (N, H, W): the object's pixels (the ground is bit-identical)
    assert all(0 < share < 0.4 for share in changed.mean(axis=(1, 2))), changed.mean(axis=(1, 2))
    for a, m, where in zip(anchors, metal, changed, strict=True):
        assert m[where].mean() < 0.8 * a[where].mean(), (m[where].mean(), a[where].mean())


def test_the_rubber_control_equals_its_anchors_bit_for_bit(stores):
    g = stores["views"]
    for name in ("images", "latents", "classes"):
        assert np.array_equal(g[f"views/ctl/{name}"][:], g[name][:]), name


def test_lt_and_mechanism_together_change_only_the_change_sets_latents(stores):
    g = stores["views"]
    names = read_attrs(g).latent_names
    differ = (g["views/near/latents"][:] != g["latents"][:]).any(axis=0)
    assert [n for n, d in zip(names, differ, strict=True) if d] == POSITIONS
    assert np.array_equal(g["views/near/classes"][:], g["classes"][:])
    assert not np.array_equal(g["views/near/images"][:], g["views/metal/images"][:])


def test_anchors_do_not_see_the_views_and_chunking_changes_nothing(stores):
    views, plain, rechunked = stores["views"], stores["plain"], stores["rechunked"]
    for name in ("images", "latents", "classes"):
        assert np.array_equal(views[name][:], plain[name][:]), name
    for pre in ("", "views/metal/", "views/ctl/", "views/near/"):
        for name in ("images", "latents", "classes"):
            assert np.array_equal(views[pre + name][:], rechunked[pre + name][:]), pre + name


def test_object_slots_take_the_mechanism_too(tmp_path):
    """A multi-object scene: every slot's object turns metal (the masks, from geometry alone, stay the anchors'), and
    another camera sees the objects elsewhere (other masks)."""
    assert render_store(tmp_path / "multi.zarr", scene=multi3dident_without_rules(), scm="multi3dident_independent",
                        n=2, settings={**SETTINGS, "samples": 2}, views="metal@material=metallic,side@camera=side",
                        view_seeds="shared", workers=1, progress=False).ok
    g = zarr.open_group(str(tmp_path / "multi.zarr"), mode="r")
    assert np.array_equal(g["views/metal/masks"][:], g["masks"][:])
    assert not np.array_equal(g["views/metal/images"][:], g["images"][:])
    assert not np.array_equal(g["views/side/masks"][:], g["masks"][:])


def test_the_store_records_each_views_mechanism_and_blocks(stores):
    view = ident3d.open_store(stores["root"] / "views.zarr")
    assert view.view_mechanisms == {"metal": {"material": "metallic"}, "ctl": {"material": "rubber"},
                                    "near": {"material": "metallic", "camera": "near"}}
    every = ["class", *view.latent_names]
    assert view.view_blocks["metal"] == {"shared": every, "perturbed": [], "specific": []}
    assert view.view_blocks["near"]["perturbed"] == POSITIONS
    assert "view_mechanisms" in view.attrs.fingerprint() and "view_blocks" not in view.attrs.fingerprint()
    plain = ident3d.open_store(stores["root"] / "plain.zarr")
    assert plain.view_mechanisms == {} and plain.view_blocks == {}
    assert not {"view_mechanisms", "view_blocks"} & set(plain.attrs.fingerprint())
    r = run_cli("show", stores["root"] / "views.zarr")
    assert r.returncode == 0 and "metal: material=metallic" in r.stdout and "camera=near" in r.stdout, r.stdout


def test_resuming_with_another_mechanism_is_refused(stores):
    out = stores["root"] / "views.zarr"
    before = tree_digest(out)
    r = run_cli(*CLI, "--chunk-size", 2, "--out", out, "--views", VIEWS.replace("=metallic,", "=rubber,", 1))
    assert_refused(r, "view_mechanisms", "--overwrite")
    assert tree_digest(out) == before


@pytest.mark.parametrize("views, expected", [
    ("m@material=gold", "material must be one of rubber, metallic, got 'gold'"),
    ("m@colour=red", "unknown mechanism knob 'colour'; use one of material, camera, light"),
    ("m@resolution=32", "cannot change the resolution"),
    ("m@camera=above", "camera must be a preset (side, low, high, near)"),
    ("m@light=0", "light must be a positive energy factor"),
    ("m@material", "a mechanism is @KNOB=VALUE"),
    ("m@material=metallic@material=rubber", "sets material twice"),
    ("m:hues@material=metallic", "a mechanism goes after the name"),
    ("m@material=metallic:wheels", "unknown node, group or change set 'wheels'"),
])
def test_bad_mechanisms_are_one_line_exit_2_and_nothing_written(tmp_path, views, expected):
    out = tmp_path / "bad.zarr"
    assert_refused(run_cli(*CLI, "--out", out, "--views", views), expected)
    assert not out.exists()


@pytest.mark.parametrize("views, expected", [
    ({"m": {"mechanism": {"light": {"moon": 2}}}}, "light names lamp(s) moon the scene lacks"),
    ({"m": {"mechanism": {"camera": {"lens_mm": "long"}}}}, "camera.lens_mm must be a number"),
    ({"m": {"changes": "hues", "specific": ["obj_hue"]}}, "the change set's as perturbed"),
    ({"m": {"changes": "hues", "perturbed": ["pos_x"]}}, "the change set's as perturbed"),
    ({"m": {"specific": ["wheels"]}}, "specific names wheels, not latents"),
    ({"m": {"chnges": "hues"}}, "unknown key 'chnges'"),
])
def test_bad_mapping_views_are_one_line(tmp_path, views, expected):
    with pytest.raises(UserError) as err:
        plan_render(tmp_path / "x.zarr", n=2, views=views)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_declared_blocks_are_recorded_and_fingerprinted(tmp_path):
    names = ["class", "pos_x", "pos_y", "pos_z", "rot_alpha", "rot_beta", "rot_gamma", "spot_angle", "obj_hue",
             "spot_hue", "bg_hue"]
    side = {"changes": [], "mechanism": {"camera": "side", "light": 0.5}, "specific": ["bg_hue"]}
    attrs = plan_render(tmp_path / "x.zarr", n=2, views={"side": side}).attrs
    assert attrs.view_mechanisms == {"side": {"camera": "side", "light": 0.5}}
    assert attrs.view_blocks == {"side": {"shared": names[:-1], "perturbed": [], "specific": ["bg_hue"]}}
    assert attrs.fingerprint()["view_blocks"] == attrs.view_blocks
    default = plan_render(tmp_path / "x.zarr", n=2, views={"side": {**side, "specific": None}}).attrs
    assert "view_blocks" not in default.fingerprint() and default.differences(attrs) == ["view_blocks"]


def test_an_experiments_store_spec_takes_views_of_a_second_mechanism():
    from ident3d.pipelines.store_specs import Store, plan_store, render_args
    from ident3d.training.hparams import parse_config

    def spec(views):
        return parse_config(dict[str, Store], {"train": {"n": 4, "resolution": 16, "samples": 1, "views": views}},
                            "config grid.yaml: stores")["train"]

    mapping = spec({"metal": {"changes": [], "mechanism": {"material": "metallic"}}, "hues": "hues"})
    assert render_args(mapping, None)["views"]["metal"]["mechanism"] == {"material": "metallic"}
    metallic, rubber, none = (plan_store(spec(v), "train", None, "grid.yaml").digest for v in (
        "metal@material=metallic,hues", "metal@material=rubber,hues", {"metal": [], "hues": "hues"}))
    assert plan_store(mapping, "train", None, "grid.yaml").digest == metallic
    assert len({metallic, rubber, none}) == 3
    with pytest.raises(UserError, match=r"^grid.yaml: stores.train: views: view 'metal': unknown mechanism knob "
                                        r"'shine'; use one of material, camera, light$"):
        plan_store(spec({"metal": {"mechanism": {"shine": 1}}}), "train", None, "grid.yaml")
