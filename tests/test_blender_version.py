"""A store records the Blender that rendered it; resuming it with another Blender is refused in one line unless
``--allow-blender-change``; a Python without bpy (3.12) is told in one line that rendering needs 3.11 or 3.13."""

import subprocess
import sys

import numpy as np
import pytest
import zarr
from helpers import run_cli, tree_digest

from ident3d.store.attrs import read_attrs, software_versions

ARGS = ("render", "--scene", "3dident", "--n", "3", "--chunk-size", "1", "--resolution", "16", "--samples", "1",
        "--workers", "1", "--no-progress")
OTHER = "4.2.0"  # a Blender version this environment does not have


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 3-chunk store and its images."""
    out = tmp_path_factory.mktemp("bv") / "s.zarr"
    assert run_cli(*ARGS, "--out", out).returncode == 0
    return out, zarr.open_group(str(out), mode="r")["images"][:]


def _unfinished_by_other_blender(src, dst):
    """A copy of ``src`` whose last chunk is not done and whose stamp names another Blender (what a store started
    with another bpy and interrupted looks like)."""
    import shutil

    shutil.copytree(src, dst)
    group = zarr.open_group(str(dst), mode="r+")
    group["done"][2] = False
    group["images"][2:3] = 0
    group.attrs["software"] = {**read_attrs(group).software, "blender": OTHER}
    return dst


def test_the_store_records_this_blender(finished):
    out, _ = finished
    blender = read_attrs(zarr.open_group(str(out), mode="r")).software["blender"]
    assert blender == software_versions()["blender"] != "unknown"
    assert blender.split(".")[:2] in (["5", "0"], ["5", "3"])


def test_resuming_with_another_blender_is_refused_then_allowed(finished, tmp_path):
    out, images = finished
    store = _unfinished_by_other_blender(out, tmp_path / "s.zarr")
    before = tree_digest(store)
    refused = run_cli(*ARGS, "--out", store)
    assert refused.returncode == 2 and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"Blender {OTHER}" in refused.stderr and "--allow-blender-change" in refused.stderr
    assert tree_digest(store) == before  # nothing written

    allowed = run_cli(*ARGS, "--out", store, "--allow-blender-change")
    assert allowed.returncode == 0, allowed.stderr
    assert "rendered 1 chunks" in allowed.stdout
    group = zarr.open_group(str(store), mode="r")
    assert bool(group["done"][:].all())
    np.testing.assert_array_equal(group["images"][:], images)  # the same Blender renders the same bits
    now = software_versions()["blender"]
    assert read_attrs(group).software["blender"] == f"{OTHER}, {now}"

    group = zarr.open_group(str(store), mode="r+")  # either version named in the stamp may resume it now
    group["done"][2] = False
    again = run_cli(*ARGS, "--out", store)
    assert again.returncode == 0, again.stderr
    assert read_attrs(group).software["blender"] == f"{OTHER}, {now}"


def test_a_finished_store_of_another_blender_is_only_skipped(finished, tmp_path):
    out, _ = finished
    store = _unfinished_by_other_blender(out, tmp_path / "s.zarr")
    zarr.open_group(str(store), mode="r+")["done"][2] = True
    before = tree_digest(store)
    skipped = run_cli(*ARGS, "--out", store)
    assert skipped.returncode == 0 and "nothing to do" in skipped.stdout
    assert tree_digest(store) == before


def test_the_python_api_takes_the_keyword(finished, tmp_path):
    from ident3d.causal.errors import UserError
    from ident3d.render import render_store

    out, images = finished
    store = _unfinished_by_other_blender(out, tmp_path / "s.zarr")
    kw = {"scene": "3dident", "n": 3, "chunk_size": 1, "settings": {"resolution": 16, "samples": 1}, "workers": 1,
          "progress": False}
    with pytest.raises(UserError, match="allow-blender-change"):
        render_store(store, **kw)
    assert render_store(store, allow_blender_change=True, **kw).rendered == [2]
    np.testing.assert_array_equal(zarr.open_group(str(store), mode="r")["images"][:], images)


def test_without_bpy_rendering_is_one_line_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "bpy", None)  # the fault: a Python without bpy (3.12)
    for args in (ARGS, ("render", "--sequences", "1", "--length", "2", "--resolution", "16", "--no-progress")):
        r = run_cli(*args, "--out", tmp_path / "s.zarr")
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "needs Blender as a Python module" in r.stderr
        assert "Python 3.11 (bpy 5.0) or Python 3.13 (bpy 5.3)" in r.stderr
        assert not (tmp_path / "s.zarr").exists()


def test_a_worker_without_bpy_fails_its_chunk_in_one_line():
    code = ("import sys; sys.modules['bpy'] = None\n"
            "from ident3d.render import plan_render\n"
            "from ident3d.jobs.cluster import ChunkFailure\nfrom ident3d.render.worker import render_chunk\n"
            "job = plan_render('/nonexistent/s.zarr', scene='3dident', n=1, chunk_size=1).job\n"
            "r = render_chunk(job, 0); assert isinstance(r, ChunkFailure), r; print(r.message)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("rendering needs Blender as a Python module") and r.stdout.count("\n") == 1
