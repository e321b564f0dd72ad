"""Object-wise exact LT views (issue 35 §2): ``obj1:positions`` redraws only object 1's position and ``shared:hues``
only the shared hues (bit for bit on sampled latents, rows without the object left as they were); a real render
(32 px, 4 Cycles samples) of view ``moved:obj1:positions`` changes the other objects' masks only where object 1
covers or uncovers them, which a view moving every position does not; LT training reads such a view; one-line
refusals; and ``ident3d show`` blends each slot's mask over the grid (``--no-masks``: the plain images).

Tolerance of the mask check: none. Masks come from Cycles' object index pass (each pixel's first sample), and
shadows, light and render noise do not touch it: measured on these renders with each view's own Cycles seeds (the
default), every pixel where the anchor's and the view's masks differ is object 1's in one of them."""

import numpy as np
import pytest
import zarr
from helpers import multi3dident_without_rules, run_cli
from PIL import Image

import ident3d
from ident3d.causal import load_scm
from ident3d.causal.errors import SpecError, UserError
from ident3d.metrics import style_of
from ident3d.pipelines.show import save_grid
from ident3d.pipelines.show_masks import overlay
from ident3d.render import parse_views, render_store
from ident3d.store.zarr_io import open_store, view_names

SCM = "multi3dident_independent"
OBJ1_POS = ["obj1_pos_x", "obj1_pos_y", "obj1_pos_z"]
N, SIZE = 6, 32
OBJ1 = 2  # object 1's mask value (k + 1)


def changed_columns(scm, change, seed=3, n=300):
    """(anchor samples, view samples, names of columns that differ in any row)."""
    a = scm.sample(n, seed=1)
    b = scm.transform(a, change, seed=seed)
    differ = (a.latents != b.latents).any(axis=0)
    return a, b, [name for name, d in zip(a.names, differ, strict=True) if d]


# ----- the change sets, on sampled latents ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["multi3dident_independent", "multi3dident_causal"])
def test_an_object_view_changes_only_that_objects_latents(name):
    scm = load_scm(name)
    assert scm.resolve("obj1:positions") == OBJ1_POS
    a, b, changed = changed_columns(scm, "obj1:positions")
    assert changed == OBJ1_POS  # every other latent equal, bit for bit (no propagation to descendants)
    cols = [a.names.index(n) for n in OBJ1_POS]
    assert a.present[:, 1].all() and (a.latents[:, cols] != b.latents[:, cols]).all()  # min 2 objects: always there
    assert np.array_equal(a.present, b.present) and np.array_equal(a.classes is None, b.classes is None)
    _, _, all_changed = changed_columns(scm, "positions")  # the whole group moves every object and the spotlight
    assert set(OBJ1_POS) < set(all_changed) and "obj0_pos_x" in all_changed and "spot_angle" in all_changed


def test_shared_hues_change_only_the_shared_hues_and_prefixes_combine():
    scm = load_scm(SCM)
    assert changed_columns(scm, "shared:hues")[2] == ["spot_hue", "bg_hue"]
    assert scm.resolve("obj0:positions+obj1:hues") == ["obj0_pos_x", "obj0_pos_y", "obj0_pos_z", "obj1_hue"]
    assert scm.resolve("obj2:class") == ["obj2_class"] and scm.resolve("shared:positions") == ["spot_angle"]
    assert scm.resolve("obj3:obj3_hue") == ["obj3_hue"]


def test_rows_without_the_object_are_left_as_they_are():
    scm = load_scm(SCM)
    a, b, changed = changed_columns(scm, "obj3:positions+obj3:class")
    absent = ~a.present[:, 3]
    assert 0.2 < absent.mean() < 0.9  # both kinds of rows are there
    assert np.array_equal(a.latents[absent], b.latents[absent])  # stored as 0 before and after
    assert not a.latents[absent][:, [a.names.index(n) for n in changed]].any()
    assert (a.latents[~absent] != b.latents[~absent]).any(axis=1).all()


@pytest.mark.parametrize("change, fragment", [
    ("obj9:positions", "'obj9:positions' names object 9, but SCM multi3dident_independent has object slots 0..3"),
    ("obj1:spot_hue", "'obj1:spot_hue' is empty: spot_hue (spot_hue) has no nodes of object 1"),
    ("shared:rotations", "'shared:rotations' is empty: rotations (obj0_rot_alpha"),
    ("box:hues", "unknown prefix 'box' in 'box:hues'; use objK:"),
    ("obj1:shared:hues", "has more than one prefix"),
])
def test_bad_object_change_sets_are_one_line_spec_errors(change, fragment):
    with pytest.raises(SpecError) as err:
        load_scm(SCM).resolve(change)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_a_prefix_needs_an_scm_with_plates():
    with pytest.raises(SpecError, match=r"'obj0:hues' names an object prefix, but SCM causal3dident has no object "
                                        r"plates .*; drop the 'obj0:' prefix$"):
        load_scm("causal3dident").resolve("obj0:hues")


def test_view_names_end_at_the_first_colon(tmp_path):
    scm = load_scm(SCM)
    views = parse_views("moved:obj1:positions, tint:shared:hues+obj0:hues", scm)
    assert views == {"moved": OBJ1_POS, "tint": ["spot_hue", "bg_hue", "obj0_hue"]}
    with pytest.raises(UserError, match=r"obj1:positions would name a view 'obj1' .* e\.g\. moved:obj1:positions$"):
        parse_views("obj1:positions", scm)
    r = run_cli("render", "--scene", "multi3dident", "--scm", SCM, "--n", "4", "--resolution", "32",
                "--views", "moved:obj9:positions", "--out", str(tmp_path / "s.zarr"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "names object 9" in r.stderr and not (tmp_path / "s.zarr").exists()


# ----- a real render --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory):
    scene = multi3dident_without_rules()  # rows as drawn: a placement rule's redraw would move more than object 1
    out = tmp_path_factory.mktemp("objviews") / "views.zarr"
    assert render_store(out, scene=scene, scm=SCM, n=N, chunk_size=3, seed=0, workers=1, progress=False,
                        settings={"resolution": SIZE, "samples": 4}, views="moved:obj1:positions,all:positions").ok
    return out


def outside_object1(anchor, view):
    """Per image, the pixels whose mask differs between anchor and view where neither shows object 1."""
    return ((anchor != view) & (anchor != OBJ1) & (view != OBJ1)).sum(axis=(1, 2))


def test_moving_object_1_changes_other_masks_only_where_it_covers_or_uncovers_them(store):
    g = zarr.open_group(str(store), mode="r")
    names = list(g.attrs["latent_names"]) if "latent_names" in g.attrs else load_scm(SCM).names
    a, moved = g["latents"][:], g["views/moved/latents"][:]
    cols = [names.index(n) for n in OBJ1_POS]
    keep = np.setdiff1d(np.arange(a.shape[1]), cols)
    assert np.array_equal(a[:, keep], moved[:, keep]) and (a[:, cols] != moved[:, cols]).all()
    masks = g["masks"][:]
    differ = (masks != g["views/moved/masks"][:]).sum(axis=(1, 2))
    assert (differ > 0).sum() >= N - 1  # object 1 moved visibly in (almost) every image
    assert not outside_object1(masks, g["views/moved/masks"][:]).any()
    broken = outside_object1(masks, g["views/all/masks"][:])  # every object moves: the property fails
    assert (broken > 0).sum() >= N // 2 and broken.sum() > 100, broken
    shuffled = g["views/moved/masks"][:][np.roll(np.arange(N), 1)]  # another row's view: fails too
    assert outside_object1(masks, shuffled).sum() > 100


def test_lt_training_reads_the_object_view(store):
    assert style_of("lt_exact:moved", store) == set(OBJ1_POS)
    assert style_of("lt_nn:obj1:positions", store) == set(OBJ1_POS)
    batch = next(iter(ident3d.loader(store, views="lt_exact:moved", batch_size=4)))
    g = zarr.open_group(str(store), mode="r")
    rows = batch["index"].numpy()
    assert np.array_equal(batch["views/moved/latents"].numpy(), g["views/moved/latents"][:][rows])
    assert not np.array_equal(batch["views/moved/latents"].numpy(), g["latents"][:][rows])


# ----- ident3d show ---------------------------------------------------------------------------------------------
def cells(png, boxes, height=SIZE, width=SIZE):
    """Each box's image sampled at its pixel centres, (H, W, 3) int per cell, ``cells[i][j]`` as the boxes."""
    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    out = []
    for row in boxes:
        out.append([])
        for x0, y0, x1, y1 in row:
            ys = (y0 + (np.arange(height) + 0.5) * (y1 - y0) / height).astype(int)
            xs = (x0 + (np.arange(width) + 0.5) * (x1 - x0) / width).astype(int)
            out[-1].append(img[np.ix_(ys, xs)])
    return out


def test_show_blends_each_objects_mask_over_the_grid_and_not_the_background(store, tmp_path):
    g = open_store(str(store))
    images, masks = g["images"][:].astype(int), g["masks"][:]
    view_images, view_masks = g["views/moved/images"][:].astype(int), g["views/moved/masks"][:]
    shown = save_grid(g, tmp_path / "grid.png", count=4, cols=6)  # per row: the anchor, then views moved and all
    plain = save_grid(g, tmp_path / "plain.png", count=4, cols=6, masks=False)
    drawn, raw = cells(tmp_path / "grid.png", shown), cells(tmp_path / "plain.png", plain)
    j = 1 + view_names(g).index("moved")
    checked = 0
    for i in range(4):
        for got, image, mask in ((drawn[i][0], images[i], masks[i]), (drawn[i][j], view_images[i], view_masks[i])):
            on = mask > 0
            assert on.sum() > 20 and (~on).sum() > 20
            assert np.abs(got[~on] - image[~on]).max() <= 1  # background untouched
            assert (np.abs(got[on] - image[on]).max(axis=1) >= 8).mean() > 0.95  # objects visibly tinted
            assert np.abs(got - overlay(image.astype(np.uint8), mask)).max() <= 1  # ... in their slot's colour
            checked += 1
        assert np.abs(raw[i][0] - images[i]).max() <= 1 and np.abs(raw[i][j] - view_images[i]).max() <= 1
    assert checked == 8
    wrong = overlay(images[0].astype(np.uint8), masks[1])  # another row's mask does not match the drawing
    assert np.abs(drawn[0][0] - wrong).max() > 8


def test_show_cli_overlays_by_default_and_no_masks_gives_the_plain_grid(store, tmp_path):
    g = open_store(str(store))
    r = run_cli("show", str(store), "--out", str(tmp_path / "cli.png"), "--count", "4", "--cols", "6")
    assert r.returncode == 0, r.stderr
    present, visible = g["present"][:], g["visibility"][:]
    assert f"4 slots, {present.sum(1).mean():.2f} objects per image, {visible[present].mean():.1f} visible px" in \
        " ".join(r.stdout.split())
    r = run_cli("show", str(store), "--out", str(tmp_path / "cli_plain.png"), "--count", "4", "--cols", "6",
                "--no-masks")
    assert r.returncode == 0, r.stderr
    save_grid(g, tmp_path / "api.png", count=4, cols=6)
    save_grid(g, tmp_path / "api_plain.png", count=4, cols=6, masks=False)

    def pixels(name):
        return np.asarray(Image.open(tmp_path / name).convert("RGB"))

    assert np.array_equal(pixels("cli.png"), pixels("api.png"))
    assert np.array_equal(pixels("cli_plain.png"), pixels("api_plain.png"))
    assert not np.array_equal(pixels("cli.png"), pixels("cli_plain.png"))


def test_show_refuses_masks_on_a_store_without_them(tmp_path):
    out = tmp_path / "one.zarr"
    assert render_store(out, scene="causal3dident", n=2, chunk_size=2, workers=1, progress=False,
                        settings={"resolution": 16, "samples": 1}).ok
    r = run_cli("show", str(out), "--out", str(tmp_path / "g.png"), "--masks")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert "has no object masks" in r.stderr and not (tmp_path / "g.png").exists()
    r = run_cli("show", str(out), "--out", str(tmp_path / "g.png"))  # default: no masks to draw, the plain grid
    assert r.returncode == 0 and (tmp_path / "g.png").exists() and "objects" not in r.stdout
