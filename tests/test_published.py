"""`ident3d import` / `ident3d export` on generated folders in the published 3DIdent and Causal3DIdent layouts
(tiny random PNGs written with PIL, random latents): round trips are pixel- and value-identical, bad inputs are
one line with exit code 2 and leave no store marked complete, interrupted or failed imports resume, and an
imported Causal3DIdent store trains (lt_nn) and evaluates."""

import hashlib
import math
import shutil
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import zarr
from helpers import run_cli, tree_digest
from PIL import Image

import ident3d.ingest.published as published
import ident3d.ingest.published_import as published_import
from ident3d.pipelines.cli import main

C3D_PER_CLASS = (6, 5, 6, 4, 7, 6, 5)  # rows of raw_latents_0..6 (unequal, so classes must line up)


# ----- generated folders -------------------------------------------------------------------------
def write_part(folder: Path, raw_name: str, n: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n random PNGs (odd rows RGBA, so alpha must be dropped) named as the loaders expect, and raw latents."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    width = int(math.ceil(math.log10(n)))
    images = rng.integers(0, 256, (n, size, size, 4), np.uint8)
    for i in range(n):
        Image.fromarray(images[i] if i % 2 else images[i, ..., :3]).save(folder / f"{str(i).zfill(width)}.png")
    latents = rng.uniform(-1, 1, (n, 10))
    np.save(folder.parent / raw_name, latents)
    np.save(folder.parent / raw_name.replace("raw_", ""), latents * 3)
    return images[..., :3], latents


def make_3dident(root: Path, n: int = 24, size: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A 3DIdent split folder: images/NN.png, raw_latents.npy, latents.npy."""
    return write_part(root / "images", "raw_latents.npy", n, size, seed)


def make_c3d(root: Path, size: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A Causal3DIdent folder: images_K/N.png, raw_latents_K.npy, latents_K.npy for K = 0..6."""
    parts = [write_part(root / f"images_{k}", f"raw_latents_{k}.npy", n, size, 10 + k)
             for k, n in enumerate(C3D_PER_CLASS)]
    classes = np.concatenate([np.full(n, k) for k, n in enumerate(C3D_PER_CLASS)])
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), classes


@pytest.fixture(scope="module")
def scheduler():
    """One in-process Dask cluster (2 single-thread workers) that the imports join, to keep the tests fast."""
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def run_import(src, out, fmt, scheduler, *extra):
    """`ident3d import` in-process, on the shared cluster, chunks of 8."""
    return main(["import", "--format", fmt, str(src), "--out", str(out), "--chunk-size", "8", "--scheduler",
                 scheduler, "--no-progress", *extra])


def one_line_error(capsys, rc, *fragments):
    """Exit code 2 and exactly one stderr line holding every fragment."""
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1, err
    for f in fragments:
        assert f in err, err
    return err


def complete(store) -> bool:
    """Whether a store exists with every chunk marked done."""
    return (Path(store) / "zarr.json").is_file() and bool(zarr.open_group(str(store), mode="r")["done"][:].all())


# ----- round trips -----------------------------------------------------------------------------------
def test_3dident_import_export_round_trip(tmp_path, scheduler, capsys):
    images, latents = make_3dident(tmp_path / "src")
    store = tmp_path / "s.zarr"
    assert run_import(tmp_path / "src", store, "3dident", scheduler) == 0
    assert "imported 3 chunks (24 images)" in capsys.readouterr().out
    g = zarr.open_group(str(store), mode="r")
    assert np.array_equal(g["images"][:], images)
    assert np.array_equal(g["latents"][:], latents.astype(np.float32))
    assert "classes" not in g and g["done"][:].all()
    a = dict(g.attrs)
    assert (a["scene"], a["source_format"], a["source"]) == ("imported", "3dident", str((tmp_path / "src").resolve()))
    assert a["source_sha256"]["raw_latents.npy"] == hashlib.sha256((tmp_path / "src/raw_latents.npy").read_bytes()).hexdigest()
    assert a["latent_names"][:3] == ["pos_x", "pos_y", "pos_z"] and a["latent_groups"]["hues"] == ["obj_hue", "spot_hue", "bg_hue"]
    assert a["source_layout"]["scaled_latents_match_scene"] is False  # the test's latents.npy is raw * 3

    assert main(["export", str(store), "--format", "3dident", "--out", str(tmp_path / "exp"), "--no-progress"]) == 0
    assert sorted(p.name for p in (tmp_path / "exp/images").iterdir()) == sorted(p.name for p in (tmp_path / "src/images").iterdir())
    back_images, back_latents, back_classes = published.load_published(tmp_path / "exp", "3dident")
    assert np.array_equal(back_images, images) and back_classes is None
    assert np.array_equal(np.load(tmp_path / "exp/raw_latents.npy"), latents.astype(np.float32))
    scaled = np.load(tmp_path / "exp/latents.npy")  # the scene's bindings: pos_x * 3, pos_z * 3 + 2.221
    assert np.allclose(scaled[:, 0], 3 * latents[:, 0], atol=1e-5) and np.allclose(scaled[:, 2], 3 * latents[:, 2] + 2.221, atol=1e-5)


def test_compression_level_changes_the_codec_not_the_pixels(tmp_path, scheduler, capsys):
    """--compression-level sets the image chunks' zstd level; pixels stay lossless. A level zstd does not have
    is one line, and no store."""
    images, _ = make_3dident(tmp_path / "src")
    for level in (1, 19):
        store = tmp_path / f"l{level}.zarr"
        assert run_import(tmp_path / "src", store, "3dident", scheduler, "--compression-level", str(level)) == 0
        arr = zarr.open_group(str(store), mode="r")["images"]
        assert [c.level for c in arr.compressors] == [level]
        assert np.array_equal(arr[:], images)
    for bad in ("0", "23"):
        one_line_error(capsys, run_import(tmp_path / "src", tmp_path / "bad.zarr", "3dident", scheduler,
                                          "--compression-level", bad), "--compression-level must be")
        assert not (tmp_path / "bad.zarr").exists()


def test_causal3dident_import_export_round_trip(tmp_path, scheduler):
    images, latents, classes = make_c3d(tmp_path / "src", size=16)
    store = tmp_path / "c.zarr"
    assert run_import(tmp_path / "src", store, "causal3dident", scheduler) == 0
    g = zarr.open_group(str(store), mode="r")
    assert np.array_equal(g["images"][:], images) and np.array_equal(g["classes"][:], classes)
    assert np.array_equal(g["latents"][:], latents.astype(np.float32))
    assert g.attrs["class_names"] == ["Teapot", "Hare", "Dragon", "Cow", "Armadillo", "Horse", "Head"]
    assert sorted(g.attrs["source_sha256"]) == sorted([f"raw_latents_{k}.npy" for k in range(7)] + [f"latents_{k}.npy" for k in range(7)])

    assert main(["export", str(store), "--format", "causal3dident", "--out", str(tmp_path / "exp"), "--no-progress"]) == 0
    back = published.load_published(tmp_path / "exp", "causal3dident")
    assert np.array_equal(back[0], images) and np.array_equal(back[1], latents.astype(np.float32))
    assert np.array_equal(back[2], classes)
    for k in range(7):
        assert np.array_equal(np.load(tmp_path / f"exp/raw_latents_{k}.npy"), np.load(tmp_path / f"src/raw_latents_{k}.npy").astype(np.float32))
        assert sorted(p.name for p in (tmp_path / f"exp/images_{k}").iterdir()) == sorted(p.name for p in (tmp_path / f"src/images_{k}").iterdir())


def test_parent_folder_needs_a_split(tmp_path, scheduler, capsys):
    make_3dident(tmp_path / "dl/trainset", n=16, seed=1)
    _, test_latents = make_3dident(tmp_path / "dl/testset", n=9, seed=2)
    rc = run_import(tmp_path / "dl", tmp_path / "s.zarr", "3dident", scheduler)
    one_line_error(capsys, rc, "holds the splits testset, trainset", "--split")
    assert not (tmp_path / "s.zarr").exists()
    assert run_import(tmp_path / "dl", tmp_path / "s.zarr", "3dident", scheduler, "--split", "testset") == 0
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")
    assert np.array_equal(g["latents"][:], test_latents.astype(np.float32)) and g.attrs["source_layout"]["split"] == "testset"


# ----- bad input: one line, exit 2, no store marked complete ------------------------------------------------
def _garbage_png(src):
    """Replace one PNG by text (a bad header)."""
    (src / "images/05.png").write_bytes(b"not a png at all, just text")


def _odd_size(src):
    """One image of another size."""
    Image.fromarray(np.zeros((16, 12, 3), np.uint8)).save(src / "images/09.png")


def _rows(src):
    """One latents row fewer than images."""
    np.save(src / "raw_latents.npy", np.load(src / "raw_latents.npy")[:23])


def _columns(src):
    """Nine latent columns instead of ten."""
    np.save(src / "raw_latents.npy", np.load(src / "raw_latents.npy")[:, :9])


def _nan(src):
    """A NaN in row 4, column obj_hue."""
    x = np.load(src / "raw_latents.npy")
    x[4, 7] = np.nan
    np.save(src / "raw_latents.npy", x)


BAD = {
    "missing SRC": (lambda src: shutil.rmtree(src), ["not found"]),
    "unknown layout": (lambda src: shutil.rmtree(src / "images"), ["not a published 3dident folder", "images/NNNNNN.png", "raw_latents.npy"]),
    "missing image": (lambda src: (src / "images/07.png").unlink(), ["missing image", "images/07.png"]),
    "not a PNG": (_garbage_png, ["images/05.png", "not a PNG"]),
    "odd size": (_odd_size, ["images/09.png is 12x16 px", "one size"]),
    "wrong row count": (_rows, ["raw_latents.npy has 23 rows, expected 24"]),
    "wrong column count": (_columns, ["raw_latents.npy has 9 columns, expected 10"]),
    "non-finite": (_nan, ["raw_latents.npy", "row 4 has a non-finite value (nan) in obj_hue"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_source_is_one_line_and_creates_no_store(tmp_path, scheduler, capsys, case):
    make_3dident(tmp_path / "src")
    spoil, fragments = BAD[case]
    spoil(tmp_path / "src")
    one_line_error(capsys, run_import(tmp_path / "src", tmp_path / "s.zarr", "3dident", scheduler), *fragments)
    assert not (tmp_path / "s.zarr").exists()


def test_unwritable_out_and_a_rerun_on_a_complete_store(tmp_path, scheduler, capsys):
    make_3dident(tmp_path / "src")
    (tmp_path / "file").write_text("x")
    one_line_error(capsys, run_import(tmp_path / "src", tmp_path / "file/s.zarr", "3dident", scheduler), "cannot create the store")
    store = tmp_path / "s.zarr"
    assert run_import(tmp_path / "src", store, "3dident", scheduler) == 0
    capsys.readouterr()
    before = tree_digest(store)
    assert run_import(tmp_path / "src", store, "3dident", scheduler) == 0  # same source and settings: as render does
    out, err = capsys.readouterr()
    assert out == f"{store} is complete (24 images, 3 chunks); nothing to do (--overwrite imports it again)\n" and not err
    one_line_error(capsys, run_import(tmp_path / "src", store, "3dident", scheduler, "--chunk-size", "4"),
                   "was rendered with different chunk_size", "--overwrite")
    one_line_error(capsys, run_import(tmp_path / "src", store, "3dident", scheduler, "--compression-level", "3"),
                   "was imported with different --compression-level", "--overwrite")
    assert tree_digest(store) == before
    assert run_import(tmp_path / "src", store, "3dident", scheduler, "--overwrite") == 0 and complete(store)
    assert "imported 3 chunks" in capsys.readouterr().out


# ----- resuming ------------------------------------------------------------------------------------
def arrays(store) -> dict[str, bytes]:
    """Every array's bytes, to compare stores."""
    g = zarr.open_group(str(store), mode="r")
    return {k: g[k][:].tobytes() for k in ("images", "latents", "classes", "done") if k in g}


def test_truncated_png_leaves_its_chunk_undone_and_a_rerun_resumes(tmp_path, scheduler, capsys):
    make_3dident(tmp_path / "src")
    clean = tmp_path / "clean.zarr"
    assert run_import(tmp_path / "src", clean, "3dident", scheduler) == 0
    good = (tmp_path / "src/images/13.png").read_bytes()
    (tmp_path / "src/images/13.png").write_bytes(good[: len(good) // 2])  # header intact, pixel data cut
    store = tmp_path / "s.zarr"
    one_line_error(capsys, run_import(tmp_path / "src", store, "3dident", scheduler), "images/13.png is corrupt")
    assert not complete(store) and not zarr.open_group(str(store), mode="r")["done"][1]  # rows 8..15
    (tmp_path / "src/images/13.png").write_bytes(good)
    capsys.readouterr()
    assert run_import(tmp_path / "src", store, "3dident", scheduler) == 0
    assert "imported" in capsys.readouterr().out
    assert arrays(store) == arrays(clean)


def test_interrupted_import_resumes_only_missing_chunks(tmp_path, scheduler, capsys):
    make_3dident(tmp_path / "src", n=40)
    clean = tmp_path / "clean.zarr"
    assert run_import(tmp_path / "src", clean, "3dident", scheduler) == 0
    store = tmp_path / "s.zarr"
    shutil.copytree(clean, store)
    g = zarr.open_group(str(store), mode="r+")
    for k in (1, 3):  # as if the import stopped before these chunks were committed
        g["done"][k] = False
        g["images"][k * 8:(k + 1) * 8] = 0
    capsys.readouterr()
    assert run_import(tmp_path / "src", store, "3dident", scheduler) == 0
    out = capsys.readouterr().out
    assert "imported 2 chunks (16 images)" in out and "3 chunks were already done" in out
    assert arrays(store) == arrays(clean)


def test_worker_fault_fails_one_chunk_and_a_rerun_completes_it(tmp_path, scheduler, capsys):
    make_3dident(tmp_path / "src")
    clean = tmp_path / "clean.zarr"
    assert run_import(tmp_path / "src", clean, "3dident", scheduler) == 0
    real = published.decode_chunk

    def faulty(files, size):
        """decode_chunk, failing on the chunk holding row 17."""
        if any(f.endswith("/17.png") for f in files):
            raise MemoryError("forced fault")
        return real(files, size)

    store = tmp_path / "s.zarr"
    with mock.patch.object(published_import, "decode_chunk", faulty):  # in-process workers see the patch
        one_line_error(capsys, run_import(tmp_path / "src", store, "3dident", scheduler), "chunk 2: MemoryError: forced fault")
    assert not zarr.open_group(str(store), mode="r")["done"][2]
    assert run_import(tmp_path / "src", store, "3dident", scheduler) == 0
    assert arrays(store) == arrays(clean)


def test_store_is_bit_identical_with_one_local_worker_process(tmp_path, scheduler):
    make_c3d(tmp_path / "src", size=16)
    assert run_import(tmp_path / "src", tmp_path / "a.zarr", "causal3dident", scheduler) == 0
    assert main(["import", "--format", "causal3dident", str(tmp_path / "src"), "--out", str(tmp_path / "b.zarr"),
                 "--chunk-size", "8", "--workers", "1", "--no-progress"]) == 0  # the default LocalCluster path
    for name in ("images", "latents", "classes", "done"):
        assert tree_digest(tmp_path / "a.zarr" / name) == tree_digest(tmp_path / "b.zarr" / name)


# ----- export refusals -----------------------------------------------------------------------------
def test_export_refuses_what_the_layout_cannot_hold(tmp_path, scheduler, capsys):
    from ident3d.ingest.datasets import digits, write_dataset_store

    make_3dident(tmp_path / "src")
    store = tmp_path / "s.zarr"
    assert run_import(tmp_path / "src", store, "3dident", scheduler) == 0
    one_line_error(capsys, main(["export", str(store), "--format", "causal3dident", "--out", str(tmp_path / "e")]),
                   "needs a store with classes")
    ds = digits(8)
    write_dataset_store(type(ds)("digits", ds.images[:20], {"digit": ds.classes[:20]}, ds.label_names), tmp_path / "d.zarr", 8)
    one_line_error(capsys, main(["export", str(tmp_path / "d.zarr"), "--format", "3dident", "--out", str(tmp_path / "e")]),
                   "needs the 10 latents pos_x")
    zarr.open_group(str(store), mode="r+")["done"][1] = False
    one_line_error(capsys, main(["export", str(store), "--format", "3dident", "--out", str(tmp_path / "e")]), "is incomplete (2/3")
    zarr.open_group(str(store), mode="r+")["done"][1] = True
    (tmp_path / "e").mkdir()
    (tmp_path / "e/keep.txt").write_text("mine")
    one_line_error(capsys, main(["export", str(store), "--format", "3dident", "--out", str(tmp_path / "e")]), "not empty", "--overwrite")
    assert [p.name for p in (tmp_path / "e").iterdir()] == ["keep.txt"]
    assert not list(tmp_path.glob(".e.partial-*"))


def test_help_has_examples(capsys):
    for cmd in ("import", "export"):
        with pytest.raises(SystemExit) as exit_:
            main([cmd, "--help"])
        assert exit_.value.code == 0 and f"ident3d {cmd} " in capsys.readouterr().out


# ----- training and evaluation on an imported Causal3DIdent store ---------------------------------
def test_lt_nn_training_and_evaluation_on_an_imported_causal3dident_store(tmp_path, scheduler):
    import torch

    from ident3d.evaluation.run_report import evaluate_run
    from ident3d.training.trainer import CHECKPOINT, TrainConfig, train

    make_c3d(tmp_path / "src", size=32)
    store = tmp_path / "c.zarr"
    assert run_import(tmp_path / "src", store, "causal3dident", scheduler) == 0
    cfg = TrainConfig(data=str(store), views="lt_nn:hues", encoder="cnn", steps=5, batch_size=16, device="cpu",
                      checkpoint_every=5, log_every=5)
    train(cfg, tmp_path / "run", progress=False)
    assert torch.load(tmp_path / "run" / CHECKPOINT, weights_only=False)["step"] == 5
    report = evaluate_run(str(tmp_path / "run"), str(store), kernel=False, device="cpu")
    out = report["layers"]["output"]
    names = zarr.open_group(str(store), mode="r").attrs["latent_names"]
    assert list(out["r2_linear"]) == names and all(np.isfinite(v) for v in out["r2_linear"].values())
    hits = out["class_accuracy"] * report["n_score"]  # counted over the scored images
    assert hits == pytest.approx(round(hits), abs=1e-9) and 0 < round(hits) <= report["n_score"]
    assert report["style_latents"] == ["bg_hue", "obj_hue", "spot_hue"]


@pytest.mark.parametrize("spoil,fragment", [
    (lambda src: (src / "raw_latents_3.npy").unlink(), "raw_latents_3.npy not found"),
    (lambda src: shutil.rmtree(src / "images_2"), "has raw_latents_2.npy but no images_2/ folder"),
    (lambda src: (src / "images_5/3.png").unlink(), "missing image"),
])
def test_bad_causal3dident_folder_is_one_line(tmp_path, scheduler, capsys, spoil, fragment):
    make_c3d(tmp_path / "src", size=16)
    spoil(tmp_path / "src")
    one_line_error(capsys, run_import(tmp_path / "src", tmp_path / "c.zarr", "causal3dident", scheduler), fragment)
    assert not (tmp_path / "c.zarr").exists()


def test_scaled_latents_follow_a_rendered_stores_scene():
    from ident3d.render.scene import load_scene

    raw = np.random.default_rng(0).uniform(-1, 1, (5, 10)).astype(np.float32)
    rendered = published.scaled_latents(raw, load_scene("3dident").to_dict(), "3dident")  # a rendered store's scene_spec
    assert np.array_equal(rendered, published.scaled_latents(raw, {"imported": "3dident"}, "3dident"))
    assert np.allclose(rendered[:, 3], raw[:, 3] * np.pi / 2) and np.allclose(rendered[:, 7], raw[:, 7] / 4)


def test_dataset_takes_an_empty_folder_as_export_does_and_a_rerun_does_nothing(tmp_path):
    """Issue 32.12: `dataset` refused an empty folder that `export` accepts; one rule for every writer: a new or empty
    folder is written, a complete store of the same dataset and settings is left as it is (exit 0, nothing to do)."""
    (tmp_path / "d").mkdir()
    r = run_cli("dataset", "digits", "--size", "8", "--out", tmp_path / "d")
    assert r.returncode == 0 and "wrote" in r.stdout, r.stderr
    digest = tree_digest(tmp_path / "d")
    r = run_cli("dataset", "digits", "--size", "8", "--out", tmp_path / "d")
    assert r.returncode == 0 and "is complete (1797 images); nothing to do" in r.stdout, r.stderr
    r = run_cli("dataset", "digits", "--size", "12", "--out", tmp_path / "d")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--overwrite" in r.stderr
    assert tree_digest(tmp_path / "d") == digest
