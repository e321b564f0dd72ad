"""Issue 42 §1: `ident3d check` finds every damage of a multi-object store (real bpy, 16 px, 24 rows in chunks of 8,
one view, the scene's placement rules: masks, visibility, present and attempts, also under views/pos/): a deleted
chunk file of any per-row array (Zarr would read zeros), values no render writes (a mask value above the slot count,
negative visibility, a row without a draw, visibility that does not count the masks, visible objects marked absent),
and whole arrays of another dtype, resolution or row count (one line asking to render again with --overwrite, exit 2,
nothing changed). --repair plus the same render call gives back the clean store byte for byte. Every per-row array is
written with every chunk stored (attribute ``write_empty_chunks``); stores made before, without it, may lack
all-zero chunks and still check clean."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from helpers import copy_store, run_cli, store_bytes, tree_digest

from ident3d.render import render_store
from ident3d.render.api import plan_render
from ident3d.store.attrs import read_attrs
from ident3d.store.check import check_store
from ident3d.store.zarr_io import EVERY_CHUNK, ChunkData, prepare, row_arrays, write_chunk

RENDER = {"scene": "multi3dident", "scm": "multi3dident_independent", "n": 24, "chunk_size": 8, "seed": 0,
          "settings": {"resolution": 16, "samples": 1}, "views": "pos:positions", "workers": 1, "progress": False}
OBJECT_ARRAYS = ("masks", "visibility", "present", "attempts")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The undamaged store (about 2 s)."""
    out = tmp_path_factory.mktemp("multi_check") / "clean.zarr"
    assert render_store(out, **RENDER).ok
    return out


@pytest.fixture
def copy(clean, tmp_path):
    """A fresh copy of the clean store to damage."""
    return copy_store(clean, tmp_path)


def found(path) -> list[tuple[int, str]]:
    """(chunk, array) of every finding of `check`."""
    return [(b.chunk, b.array) for b in check_store(str(path)).bad]


def delete_band(store: Path, name: str, k: int) -> None:
    """Delete every chunk file of row band k of array ``name``."""
    files = [p for p in (store / name / "c" / str(k)).rglob("*") if p.is_file()] + \
        [p for p in [store / name / "c" / str(k)] if p.is_file()]
    assert files, (name, k)
    for f in files:
        f.unlink()


def edit(store: Path, name: str, rows: slice, change) -> None:
    """Rewrite rows of array ``name`` with ``change(values)`` (a plain Zarr write, as a stray tool would do)."""
    array = zarr.open_group(str(store), mode="r+")[name]
    values = array[rows]
    change(values)
    array[rows] = values


def remake(store: Path, name: str, shape: tuple[int, ...], dtype: str) -> None:
    """Replace array ``name`` with one of another shape or dtype (filled with ones)."""
    g = zarr.open_group(str(store), mode="r+")
    g.create_array(name, shape=shape, chunks=(8, *shape[1:]), dtype=dtype, overwrite=True)[:] = np.ones(shape, dtype)


def test_every_declared_array_of_a_done_chunk_has_its_files(clean):
    """The render wrote a file for every chunk of every per-row array, each marked as written that way."""
    g = zarr.open_group(str(clean), mode="r")
    names = [name for name, required in row_arrays(g, read_attrs(g)) if required]
    assert {*OBJECT_ARRAYS, *(f"views/pos/{n}" for n in OBJECT_ARRAYS)} <= set(names)
    for name in names:
        assert g[name].attrs[EVERY_CHUNK] is True, name
        for k in range(3):
            assert any(p.is_file() for p in [clean / name / "c" / str(k), *(clean / name / "c" / str(k)).rglob("*")])


def test_an_all_zero_chunk_is_written_as_a_file(tmp_path):
    """The store writer keeps an all-zero chunk (Zarr's fill value) as a file, so a done chunk proves each array was
    written: no bpy, the writer alone."""
    path = str(tmp_path / "zeros.zarr")
    plan = plan_render(path, scene="multi3dident", scm="multi3dident_independent", n=4, chunk_size=2,
                       settings={"resolution": 8})
    group = prepare(path, plan.attrs, plan.layout, overwrite=False)
    zeros = ChunkData(np.zeros((2, 8, 8, 3), np.uint8), np.zeros((2, len(plan.attrs.latent_names)), np.float32), None,
                      np.zeros((2, 8, 8), np.uint8), np.zeros((2, 4), np.int64), np.zeros((2, 4), bool),
                      np.ones(2, np.int64))
    write_chunk(group, 0, zeros, {})
    for name in ("images", "latents", "masks", "visibility", "present", "attempts"):
        assert [p.relative_to(tmp_path) for p in (tmp_path / "zeros.zarr" / name / "c").rglob("*") if p.is_file()], name
    report = check_store(path)
    assert report.ok and report.done == [0] and report.not_done == [1]


@pytest.mark.parametrize("name", [*OBJECT_ARRAYS, "latents", *(f"views/pos/{n}" for n in OBJECT_ARRAYS)])
def test_a_deleted_chunk_file_of_any_per_row_array_is_found(copy, name):
    delete_band(copy, name, 1)
    report = check_store(str(copy))
    assert [(b.chunk, b.array) for b in report.bad] == [(1, name)], report.bad
    assert "missing" in report.bad[0].error or "without a draw" in report.bad[0].error


def test_values_no_render_writes_are_found(copy):
    def too_high(m):
        m[0, 0, 0] = 9

    def negative(v):
        v[2, 1] = -3

    def no_draw(a):
        a[5] = 0

    def one_more(v):
        v[1, 0] += 1

    def absent(p):
        p[:, 0] = False  # object 0, in view in most rows

    edit(copy, "masks", slice(0, 8), too_high)
    edit(copy, "visibility", slice(8, 16), negative)
    edit(copy, "attempts", slice(16, 24), no_draw)
    edit(copy, "views/pos/visibility", slice(0, 8), one_more)
    edit(copy, "views/pos/present", slice(8, 16), absent)
    bad = {(b.chunk, b.array): b.error for b in check_store(str(copy)).bad}
    assert bad == {(0, "masks"): "mask value 9 above the 4 object slots (0: background, k + 1: slot k)",
                   (1, "visibility"): "negative visible pixel counts",
                   (2, "attempts"): "rows without a draw (attempts below 1; a lost chunk file reads as 0)",
                   (0, "views/pos/masks"): "visibility is not each slot's pixel count in masks (one of them was lost "
                                           "or changed)",
                   (1, "views/pos/present"): "objects with visible pixels are marked absent"}, bad


def test_repair_and_the_same_render_give_back_the_clean_store(clean, copy):
    delete_band(copy, "masks", 1)
    delete_band(copy, "views/pos/attempts", 1)
    edit(copy, "visibility", slice(16, 24), lambda v: v.__setitem__((0, 0), -1))
    shutil.rmtree(copy / "views/pos/present")  # a whole declared array deleted: every done chunk renders again
    r = run_cli("check", copy, "--no-progress")
    assert r.returncode == 1 and "chunk 1: masks: chunk file missing (reads as zeros)" in r.stdout, r.stdout
    assert "chunk 2: visibility: negative visible pixel counts" in r.stdout
    assert "chunk 0: views/pos/present: array missing" in r.stdout and "3 bad chunks (0-2)" in r.stdout
    assert run_cli("check", copy, "--repair", "--no-progress").returncode == 1
    again = check_store(str(copy))
    assert again.ok and again.not_done == [0, 1, 2]
    assert render_store(copy, **RENDER).rendered == [0, 1, 2]
    assert store_bytes(copy) == store_bytes(clean)
    assert run_cli("check", copy, "--no-progress").returncode == 0


@pytest.mark.parametrize("name, shape, dtype, says", [
    ("masks", (24, 8, 8), "uint8", "masks has shape (24, 8, 8), the store format declares (24, 16, 16)"),
    ("views/pos/masks", (24, 32, 32), "uint8", "views/pos/masks has shape (24, 32, 32)"),
    ("visibility", (24, 4), "int32", "visibility holds int32 values, the store format declares int64"),
    ("present", (24, 3), "bool", "present has shape (24, 3), the store format declares (24, 4)"),
    ("attempts", (16,), "int64", "attempts has 16 rows for the store's 24"),
    ("masks", (16, 16, 16), "uint8", "masks has 16 rows for the store's 24"),
])
def test_a_whole_array_not_as_declared_is_one_line_and_changes_nothing(copy, name, shape, dtype, says):
    remake(copy, name, shape, dtype)
    before = tree_digest(copy)
    for args in ((), ("--repair",)):
        r = run_cli("check", copy, "--no-progress", *args)
        err = r.stderr.strip()
        assert r.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert says in err and "render the store again with --overwrite" in err, err
    assert tree_digest(copy) == before


def unmark(store: Path) -> None:
    """Make the store look as stores made before issue 42: no array carries the write_empty_chunks attribute."""
    for meta in store.rglob("zarr.json"):
        spec = json.loads(meta.read_text())
        if spec.get("node_type") == "array" and EVERY_CHUNK in spec.get("attributes", {}):
            del spec["attributes"][EVERY_CHUNK]
            meta.write_text(json.dumps(spec))


def zero_objects(store: Path, k: int) -> None:
    """Rows of chunk k with no object: masks, visibility and present all zero, written by plain Zarr (which then
    keeps no file), as a store made before every chunk was written holds such a chunk."""
    g = zarr.open_group(str(store), mode="r+")
    for name in ("masks", "visibility", "present"):
        g[name][8 * k:8 * (k + 1)] = 0
        assert not [p for p in (store / name / "c" / str(k)).rglob("*") if p.is_file()], name


def test_stores_made_before_may_lack_all_zero_chunks_but_not_lose_data(copy, tmp_path):
    marked = tmp_path / "marked.zarr"
    shutil.copytree(copy, marked)
    zero_objects(marked, 1)  # in a store whose arrays say every chunk is written, those files are lost
    assert found(marked) == [(1, "masks"), (1, "present"), (1, "visibility")]
    unmark(copy)
    zero_objects(copy, 1)  # before: an all-zero chunk had no file, legitimately
    assert check_store(str(copy)).ok
    delete_band(copy, "masks", 2)  # ... but a lost masks file no longer matches visibility
    delete_band(copy, "present", 0)  # ... a lost present file leaves visible objects absent
    delete_band(copy, "views/pos/attempts", 2)  # ... and a row is never drawn 0 times
    assert found(copy) == [(0, "present"), (2, "masks"), (2, "views/pos/attempts")]
