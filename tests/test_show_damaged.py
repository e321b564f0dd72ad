"""Issue 42 §2 and §5 on a real multi-object store (bpy, 16 px, 24 rows in chunks of 8, the scene's placement rules):
`show` on a damaged store (a truncated present, visibility or attempts chunk, present deleted, masks of another
shape) and `evaluate --metrics fg_ari|slot_r2` on a store whose masks have another shape, are short or whose present
is gone are one line saying what is wrong and what to run, exit 2, nothing written; and `show`'s mask overlay rings
each object in its slot's full colour, so slots are told apart at small sizes."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from helpers import copy_store, run_cli, tree_digest

import ident3d
from ident3d.pipelines.show_masks import SLOT_COLOURS, outline, overlay
from ident3d.render import render_store

RENDER = {"scene": "multi3dident", "scm": "multi3dident_independent", "n": 24, "chunk_size": 8, "seed": 0,
          "settings": {"resolution": 16, "samples": 1}, "workers": 1, "progress": False}
# a tiny slot model: one step is enough, the store is what is tested
TRAIN = ["--objective", "slot_attention", "--steps", "1", "--encoder", "slot_cnn", "--encoder-arg", "width=8",
         "strides=[2,1]", "--batch-size", "4", "--no-progress", "--hp", "n_slots=4", "slot_dim=4", "decoder_width=8"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The undamaged store (about 2 s)."""
    out = tmp_path_factory.mktemp("show_damaged") / "clean.zarr"
    assert render_store(out, **RENDER).ok
    return out


@pytest.fixture(scope="module")
def run(clean, tmp_path_factory):
    """A slot_attention run trained one step on the clean store."""
    out = tmp_path_factory.mktemp("slot_run") / "run"
    r = run_cli("train", "--data", clean, "--out", out, *TRAIN)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture
def copy(clean, tmp_path):
    return copy_store(clean, tmp_path)


def truncate(store: Path, key: str) -> None:
    f = store / key
    f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])


def remake(store: Path, name: str, shape: tuple[int, ...]) -> None:
    """Replace array ``name`` with one of another shape (same dtype, filled with ones)."""
    g = zarr.open_group(str(store), mode="r+")
    dtype = g[name].dtype
    g.create_array(name, shape=shape, chunks=(8, *shape[1:]), dtype=dtype, overwrite=True)[:] = np.ones(shape, dtype)


DAMAGE = {
    "truncated present": (lambda s: truncate(s, "present/c/1/0"), "chunk 1 of present is corrupt"),
    "truncated visibility": (lambda s: truncate(s, "visibility/c/1/0"), "chunk 1 of visibility is corrupt"),
    "truncated attempts": (lambda s: truncate(s, "attempts/c/2"), "chunk 2 of attempts is corrupt"),
    "present deleted": (lambda s: shutil.rmtree(s / "present"), "has no present array"),
    "masks of another shape": (lambda s: remake(s, "masks", (24, 8, 8)),
                               "masks has shape (24, 8, 8), the store format declares (24, 16, 16)"),
    "masks short": (lambda s: remake(s, "masks", (16, 16, 16)), "masks has 16 rows for the store's 24"),
}
WAY_OUT = {"has no present array": "run `ident3d check {store} --repair`", "corrupt": "run `ident3d check {store} "
           "--repair`", "masks": "render the store again with --overwrite"}


def assert_one_line(r, says: str, store: Path) -> None:
    """Exit 2, one line on stderr without a traceback, saying what is wrong and what to run."""
    err = r.stderr.strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert says in err, err
    way_out = next(v for k, v in WAY_OUT.items() if k in says)
    assert way_out.format(store=store) in err, err


@pytest.mark.parametrize("damage", ["truncated present", "truncated visibility", "truncated attempts",
                                    "present deleted", "masks of another shape"])
def test_show_on_a_damaged_multi_object_store_is_one_line(copy, tmp_path, damage):
    apply, says = DAMAGE[damage]
    apply(copy)
    before = tree_digest(copy)
    r = run_cli("show", copy, "--out", tmp_path / "grid.png")
    assert_one_line(r, says, copy)
    assert not (tmp_path / "grid.png").exists() and tree_digest(copy) == before
    assert [p.name for p in tmp_path.iterdir()] == ["damaged.zarr"]


@pytest.mark.parametrize("metric", ["fg_ari", "slot_r2"])
@pytest.mark.parametrize("damage", ["masks of another shape", "masks short", "present deleted"])
def test_object_metrics_on_a_damaged_store_are_one_line(run, copy, tmp_path, damage, metric):
    apply, says = DAMAGE[damage]
    apply(copy)
    r = run_cli("evaluate", "--run", run, "--data", copy, "--metrics", metric, "--no-kernel", "--out",
                tmp_path / "report.json")
    assert_one_line(r, says, copy)
    assert not (tmp_path / "report.json").exists()


def test_the_clean_store_shows_and_scores(run, clean, tmp_path):
    """The same commands on the undamaged store work (what the refusals above are measured against)."""
    r = run_cli("show", clean, "--out", tmp_path / "grid.png", "--count", "4")
    assert r.returncode == 0 and (tmp_path / "grid.png").exists(), r.stderr
    r = run_cli("evaluate", "--run", run, "--data", clean, "--metrics", "fg_ari,slot_r2", "--no-kernel")
    assert r.returncode == 0 and "fg_ari (output layer)" in r.stdout, r.stderr


def test_the_overlay_rings_each_object_in_its_slots_full_colour(clean):
    """Every rim pixel of object k (next to the background or another object) is slot k's colour exactly, its inner
    pixels are blended half-way, the background is untouched; two runs draw the same bytes."""
    g = zarr.open_group(str(clean), mode="r")
    images, masks = g["images"][:], g["masks"][:]
    rgb = np.array([c for _, c in SLOT_COLOURS], np.uint8)
    rims = 0
    for image, mask in zip(images, masks, strict=True):
        drawn, rim = overlay(image, mask), outline(mask)
        assert np.array_equal(drawn, overlay(image, mask))  # deterministic
        assert np.array_equal(drawn[mask == 0], image[mask == 0])
        assert not rim[mask == 0].any() and np.array_equal(drawn[rim], rgb[mask[rim] - 1])
        inner = (mask > 0) & ~rim
        half = np.round(0.5 * image[inner] + 0.5 * rgb[mask[inner] - 1].astype(float)).astype(np.uint8)
        assert np.array_equal(drawn[inner], half)
        rims += int(rim.sum())
    assert rims > 50


def test_outline_marks_the_pixels_where_objects_meet_the_background_or_each_other():
    mask = np.zeros((6, 7), np.uint8)
    mask[1:5, 1:4] = 1  # object 0: a 4 x 3 block
    mask[1:5, 4:6] = 2  # object 1 right next to it
    rim = outline(mask)
    assert rim[1:5, 1].all() and rim[1:5, 3].all() and rim[1:5, 4].all() and rim[1:5, 5].all()
    assert not rim[2:4, 2].any()  # object 0's inside
    assert rim[1, 2] and rim[4, 2] and not rim[mask == 0].any()
    edge = np.ones((3, 3), np.uint8)  # an object filling the image: its border is no rim
    assert not outline(edge).any()


def test_the_object_metrics_inputs_hold_the_store_to_its_format(copy):
    """The metrics' own reader (``store_objects``, for API users who built their StoreInfo before the damage) and
    ``ident3d.open_store``: one line, not a KeyError or IndexError (or masks of the wrong rows)."""
    from ident3d.causal.errors import UserError
    from ident3d.evaluation.slot_metrics import store_objects
    from ident3d.store.info import store_info

    info = store_info(str(copy))
    masks, present = store_objects(info, np.arange(24))
    assert masks.shape == (24, 16, 16) and present.shape == (24, 4)
    for damage in ("present deleted", "masks short"):  # one on top of the other: a reshaped array is named first
        apply, says = DAMAGE[damage]
        apply(copy)
        for call in (lambda: store_objects(info, np.arange(24)), lambda: ident3d.open_store(copy).read("masks")):
            with pytest.raises(UserError, match=None) as err:
                call()
            assert says in str(err.value) and "\n" not in str(err.value)
