"""Bad input, round 5 (issue 42), the GPU kit (benchmarks/gpu/): ``pack.py --tiny-data --work DIR`` with a relative
DIR packs the tiny stores it rendered (not empty parts); ``pack.py`` refuses a store ``ident3d check`` finds unfinished
or damaged; ``run.py`` on a pack whose data parts hold no store (what the old kit packed from a relative DIR) or lack a
part says so. Each refusal one line, exit 2, nothing created or changed. The stores are real Blender renders at
16-32 px; the unfinished one is a damaged one after ``ident3d check --repair``, as a user gets it."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest
from helpers import run_cli, tree_digest

import ident3d
from ident3d.store.check import check_store

KIT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"
sys.path.insert(0, str(KIT))

fmt = importlib.import_module("kit_pack_format")
pack = importlib.import_module("pack")
run = importlib.import_module("run")


def one_line(code: int, err: str, says: str) -> None:
    """A refusal: exit 2, one line on stderr with ``says``, no traceback."""
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err, err


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """A finished 64-image store of two chunks, the same with chunk 1's images garbled, with that chunk file
    deleted, and the garbled one after ``ident3d check --repair`` (chunk 1 not done: unfinished)."""
    base = tmp_path_factory.mktemp("kit_stores")
    good = base / "good.zarr"
    assert ident3d.render_store(good, scene="causal3dident", n=64, chunk_size=32, settings={"resolution": 16,
                                "samples": 1}, workers=1, progress=False).ok
    garbled, deleted, unfinished = base / "garbled.zarr", base / "deleted.zarr", base / "unfinished.zarr"
    for copy in (garbled, deleted):
        shutil.copytree(good, copy)
    chunk = garbled / "images" / "c" / "1" / "0" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    (deleted / "images" / "c" / "1" / "0" / "0" / "0").unlink()
    shutil.copytree(garbled, unfinished)
    assert run_cli("check", unfinished, "--repair", "--no-progress").returncode == 1
    assert check_store(str(unfinished)).not_done == [1]
    return {"good": good, "garbled": garbled, "deleted": deleted, "unfinished": unfinished}


def test_a_relative_work_folder_packs_the_tiny_stores_it_rendered(stores, tmp_path, monkeypatch, capsys):
    tiny = tmp_path / "rel" / "tiny"
    shutil.copytree(stores["good"], tiny / "test.zarr")  # the test store as an earlier run left it: one render here
    (tiny / "test.done").write_text("[]\n")
    monkeypatch.chdir(tmp_path)
    assert pack.main(["--no-wheels", "--tiny-data", "--work", "rel", "--out", "pk"]) == 0, capsys.readouterr().err
    assert "carry 1" in capsys.readouterr().out
    assert (tiny / "train.zarr" / "zarr.json").is_file()  # rendered where --work says, not below the render's cwd
    manifest = fmt.read_manifest(tmp_path / "pk")
    assert fmt.data_names(manifest) == ["tiny.train", "tiny.test"]
    for name in manifest["data"]:
        unpacked = tmp_path / "unpacked" / name
        fmt.untar_parts([tmp_path / "pk" / p["path"] for p in fmt.data_parts(manifest, name)], unpacked)
        report = check_store(str(unpacked))
        assert report.ok and report.n == 64 and not report.not_done, name


@pytest.mark.parametrize("store, says", [
    ("garbled", "is damaged (1 bad chunks, the first: chunk 1 of images: RuntimeError: Zstd decompression error"),
    ("deleted", "is damaged (1 bad chunks, the first: chunk 1 of images: chunk file missing (reads as zeros))"),
    ("unfinished", "is unfinished (1 of its 2 chunks not done: 1); finish its render"),
])
def test_pack_refuses_a_damaged_or_unfinished_store(stores, tmp_path, capsys, store, says):
    before = tree_digest(stores[store])
    argv = ["--no-wheels", "--data", f"s={stores['good']}", "--data", f"x={stores[store]}", "--out", str(tmp_path / "p")]
    code = pack.main(argv)
    one_line(code, capsys.readouterr().err, f"pack.py: error: data x ({stores[store]}) {says}")
    assert not (tmp_path / "p").exists() and tree_digest(stores[store]) == before


def test_run_refuses_a_pack_whose_data_parts_hold_no_store_or_lack_one(stores, tmp_path, capsys):
    # the pack the old kit built from a relative --work: tar parts of folders that were not there
    empty = tmp_path / "empty_pack"
    pack.build_pack(empty, {"tiny.train": tmp_path / "absent", "tiny.test": tmp_path / "absent"}, wheels=False)
    argv = ["--device", "cpu", "--tiny", "--job", "throughput", "--out", str(tmp_path / "out"), "--work"]
    code = run.main([*argv, str(tmp_path / "w1"), "--pack", str(empty)])
    one_line(code, capsys.readouterr().err, "run.py: error: the pack's data tiny.train holds no Zarr store: its parts "
                                            "(data/tiny.train.tar.000) unpack to 0 files and no zarr.json")
    assert not (tmp_path / "out").exists() and not (tmp_path / "w1" / "data" / "tiny.train.zarr").exists()
    # a pack of real stores with a data part that was not carried
    real = tmp_path / "real_pack"
    pack.build_pack(real, {"tiny.train": stores["good"], "tiny.test": stores["good"]}, wheels=False)
    (real / "data" / "tiny.train.tar.000").unlink()
    code = run.main([*argv, str(tmp_path / "w2"), "--pack", str(real)])
    one_line(code, capsys.readouterr().err, "pack part data/tiny.train.tar.000 (data:tiny.train) is missing from")
    assert not (tmp_path / "out").exists()
