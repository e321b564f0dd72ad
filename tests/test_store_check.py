"""Store integrity on real renders (bpy, Zarr, Dask): `ident3d check` finds exactly the damaged chunks,
`--repair` plus the same render call makes the store bit-identical to a clean one, readers name a corrupt
chunk in one line, and xarray reads the stores with named dimensions."""

import json
from pathlib import Path

import numpy as np
import pytest
import zarr
from helpers import copy_store, run_cli

from ident3d.causal.errors import UserError
from ident3d.pipelines.cli import main
from ident3d.render import render_store
from ident3d.store.check import check_store, ranges
from ident3d.store.zarr_io import CorruptChunkError, done_mask

# 20 rows in chunks of 8: chunk 2 is a short last chunk (rows 16-19)
RENDER = {"scene": "causal3dident", "n": 20, "settings": {"resolution": 32, "samples": 4}, "seed": 3,
          "chunk_size": 8, "views": "hues:hues", "workers": 1, "progress": False}
ARRAYS = ("images", "latents", "classes", "done", "views/hues/images", "views/hues/latents", "views/hues/classes")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    out = tmp_path_factory.mktemp("check") / "clean.zarr"
    assert render_store(out, **RENDER).ok
    return out


@pytest.fixture
def copy(clean, tmp_path):
    """A fresh copy of the clean store to damage."""
    return copy_store(clean, tmp_path)


def arrays(path):
    g = zarr.open_group(str(path), mode="r")
    return {k: g[k][:] for k in ARRAYS}


def truncate(path, key):
    f = Path(path) / key
    data = f.read_bytes()
    f.write_bytes(data[:len(data) // 2])


def flip(path, key, count=1):
    """Flip ``count`` bytes in the middle of a chunk file (the file keeps its size)."""
    f = Path(path) / key
    data = bytearray(f.read_bytes())
    mid = len(data) // 2
    for i in range(mid, mid + count):
        data[i] ^= 0x5A
    f.write_bytes(bytes(data))


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err


def test_check_repair_and_rerender_give_the_clean_store(clean, copy, capsys):
    ref = arrays(clean)
    assert check_store(str(clean)).bad == [] and main(["check", str(clean), "--no-progress"]) == 0
    assert "ok: every array of the 3 done chunks decodes" in capsys.readouterr().out
    truncate(copy, "images/c/1/0/0/0")     # chunk 1's images: a cut-off file
    flip(copy, "latents/c/2/0", count=4)   # chunk 2's latents (the short last chunk): garbled bytes

    report = check_store(str(copy))
    assert [(b.chunk, b.array) for b in report.bad] == [(1, "images"), (2, "latents")]
    assert report.done == [0, 1, 2] and report.not_done == [] and report.bad_chunks == [1, 2]
    assert main(["check", str(copy), "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "chunk 1: images: RuntimeError: Zstd" in out and "chunk 2: latents: RuntimeError: Zstd" in out
    assert "2 bad chunks (1-2); run `ident3d check" in out and "chunk 0:" not in out

    assert main(["check", str(copy), "--repair", "--no-progress"]) == 1
    assert "cleared the done flags of chunks 1-2" in capsys.readouterr().out
    g = zarr.open_group(str(copy), mode="r")
    assert done_mask(g).tolist() == [True, False, False]
    assert not (copy / "images/c/1/0/0/0").exists() and not (copy / "latents/c/2/0").exists()
    assert (copy / "images/c/2/0/0/0").exists() and (copy / "latents/c/1/0").exists()  # only the damaged ones

    again = render_store(copy, **RENDER)  # the same call that made the store
    assert again.ok and again.rendered == [1, 2] and again.skipped == [0]
    got = arrays(copy)
    for k in ARRAYS:
        assert got[k].dtype == ref[k].dtype and np.array_equal(got[k], ref[k]), k
    assert main(["check", str(copy), "--no-progress"]) == 0 and check_store(str(copy)).ok


def test_check_finds_a_flipped_byte_a_missing_file_and_a_bad_flag(clean, copy):
    flip(copy, "views/hues/images/c/0/0/0/0")  # one byte: caught by the zstd checksum
    (copy / "images/c/2/0/0/0").unlink()        # a done chunk whose images were never written
    (copy / "done/c/1").write_bytes(b"garbage")  # a flag that does not decode
    report = check_store(str(copy))
    assert [(b.chunk, b.array) for b in report.bad] == [(0, "views/hues/images"), (1, "done"), (2, "images")]
    assert "checksum" in report.bad[0].error and "missing" in report.bad[2].error
    assert report.done == [0, 2] and report.bad_chunks == [0, 1, 2]
    assert main(["check", str(copy), "--repair", "--no-progress"]) == 1
    repaired = check_store(str(copy))
    assert repaired.ok and repaired.done == [] and repaired.not_done == [0, 1, 2]
    assert render_store(copy, **RENDER).rendered == [0, 1, 2]
    got, ref = arrays(copy), arrays(clean)
    assert all(np.array_equal(got[k], ref[k]) for k in ARRAYS)


def test_check_reports_chunks_not_done_and_refuses_what_is_not_a_store(clean, copy, tmp_path, capsys):
    g = zarr.open_group(str(copy), mode="r+")
    g["done"][1] = False
    assert main(["check", str(copy), "--no-progress"]) == 0
    assert "2 chunks done, not done: 1" in capsys.readouterr().out
    (tmp_path / "folder").mkdir()
    assert_one_line_error(run_cli("check", tmp_path / "folder"), "is not a Zarr store")
    assert_one_line_error(run_cli("check", tmp_path / "nowhere.zarr"), "is not a Zarr store")
    assert ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8" and ranges([]) == "-"


def test_train_evaluate_and_show_name_the_corrupt_chunk(clean, copy, tmp_path):
    run = tmp_path / "run"
    assert main(["train", "--data", str(clean), "--out", str(run), "--encoder", "cnn", "--batch-size", "8",
                 "--steps", "2", "--views", "crop_large", "--no-progress"]) == 0
    truncate(copy, "images/c/0/0/0/0")
    needles = (f"{copy}: chunk 0 of images is corrupt (RuntimeError: Zstd decompression error",
               f"run `ident3d check {copy} --repair`, then re-run the render command")
    assert_one_line_error(run_cli("train", "--data", copy, "--out", tmp_path / "run2", "--encoder", "cnn",
                              "--batch-size", "8", "--steps", "2", "--no-progress"), *needles)
    assert_one_line_error(run_cli("evaluate", "--run", run, "--data", copy), *needles)
    assert_one_line_error(run_cli("show", copy, "--out", tmp_path / "grid.png"), *needles)
    assert not (tmp_path / "grid.png").exists() and not (tmp_path / "run2" / "checkpoint.pt").exists()


def test_loader_workers_and_in_memory_reads_raise_one_line(copy):
    from ident3d.store.info import store_info
    from ident3d.training.data import StoreBatches, make_loader

    truncate(copy, "images/c/0/0/0/0")
    info = store_info(str(copy))
    with pytest.raises(CorruptChunkError) as memory:
        StoreBatches(info, batch_size=8, seed=0, in_memory=True).rows(np.arange(20))
    streamed = StoreBatches(info, batch_size=8, seed=0, in_memory=False)
    with pytest.raises(UserError) as worker:  # raised in a DataLoader worker process, re-raised here
        for _, _ in zip(range(10), make_loader(streamed, num_workers=1), strict=False):
            pass
    for exc in (memory.value, worker.value):
        assert isinstance(exc, CorruptChunkError) and "\n" not in str(exc), str(exc)
        assert str(exc).startswith(f"{copy}: chunk 0 of images is corrupt"), str(exc)


def test_xarray_reads_named_dimensions_with_zarrs_values(clean):
    xr = pytest.importorskip("xarray")
    g = zarr.open_group(str(clean), mode="r")
    ds = xr.open_zarr(str(clean), consolidated=False)
    assert ds["images"].dims == ("sample", "y", "x", "channel") and ds["latents"].dims == ("sample", "latent")
    assert ds["classes"].dims == ("sample",) and ds["done"].dims == ("chunk",)
    assert dict(ds.sizes) == {"sample": 20, "y": 32, "x": 32, "channel": 3, "latent": 10, "chunk": 3}
    assert ds.attrs["latent_names"] == g.attrs["latent_names"]
    view = xr.open_zarr(str(clean), group="views/hues", consolidated=False)
    assert view["images"].dims == ("sample", "y", "x", "channel") and view.sizes["sample"] == 20
    for name in ("images", "latents", "classes", "done"):
        assert np.array_equal(ds[name].values, g[name][:]), name
    assert np.array_equal(view["latents"].values, g["views/hues/latents"][:])


def test_stores_without_dimension_names_stay_readable(copy):
    """Stores made before dimension names (and checksums) still check, train and show."""
    from ident3d.store.info import store_info

    for meta in copy.rglob("zarr.json"):
        spec = json.loads(meta.read_text())
        if spec.get("node_type") == "array":
            spec.pop("dimension_names", None)
            meta.write_text(json.dumps(spec))
    assert zarr.open_group(str(copy), mode="r")["images"].metadata.dimension_names is None
    assert check_store(str(copy)).ok and store_info(str(copy)).rows.size == 20
    assert main(["show", str(copy)]) == 0


def test_show_draws_a_grid_of_an_iid_store(clean, tmp_path):
    """Issue 32.1: `show STORE --out grid.png` crashed on every i.i.d. store (StoreAttrs has no .get); the README's
    gallery is made with it. The grid holds the anchors and their hues view, captioned, under the scene's name."""
    from helpers import read_png

    r = run_cli("show", clean, "--out", tmp_path / "grid.png", "--count", "4")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    height, width, colours = read_png(tmp_path / "grid.png")
    assert height > 200 and width > 400 and colours > 500
