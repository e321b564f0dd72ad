"""The render pipeline end to end with real bpy, real Zarr and a real Dask LocalCluster:
split-invariance, resume after a killed worker or driver, self-describing stores, bad inputs."""

import os
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import zarr
from helpers import KillOnce, inject_before_commit, run_cli, tree_digest

from ident3d.causal import load_scm
from ident3d.pipelines.cli import main
from ident3d.render.worker import view_seed

BASE = ["render", "--scene", "causal3dident", "--n", "10", "--resolution", "32", "--samples", "4",
        "--seed", "5", "--no-progress"]


def render(out, *extra):
    return main([*BASE, "--out", str(out), *extra])


def arrays(path):
    g = zarr.open_group(str(path), mode="r")
    out = {k: g[k][:] for k in ("images", "latents", "classes", "done")}
    for v in g.attrs.get("views", {}):
        for k in ("images", "latents", "classes"):
            out[f"views/{v}/{k}"] = g[f"views/{v}/{k}"][:]
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "ref.zarr"
    assert render(out, "--workers", "1", "--chunk-size", "10", "--views", "hues:hues") == 0
    return out


def test_store_is_self_describing_and_matches_the_scm(reference):
    g = zarr.open_group(str(reference), mode="r")
    a = dict(g.attrs)
    assert a["format_version"] == 1 and a["scene"] == "causal3dident" and a["seed"] == 5
    assert a["latent_names"][:3] == ["pos_x", "pos_y", "pos_z"] and a["class_names"][0] == "Teapot"
    assert a["latent_groups"]["hues"] == ["obj_hue", "spot_hue", "bg_hue"]
    assert a["meshes"]["Teapot"] == "builtin:teapot" and a["software"]["blender"] == metadata.version("bpy")
    assert a["render"]["resolution"] == 32 and a["views"] == {"hues": ["obj_hue", "spot_hue", "bg_hue"]}
    scm = load_scm(a["scm"])  # the full spec is in the store: no side files needed
    s = scm.sample(10, seed=5)
    assert np.array_equal(g["latents"][:], s.latents) and np.array_equal(g["classes"][:], s.classes)
    moved = scm.transform(s, a["views"]["hues"], seed=view_seed(5, "hues"))
    assert np.array_equal(g["views/hues/latents"][:], moved.latents)
    imgs = g["images"][:]
    assert imgs.shape == (10, 32, 32, 3) and imgs.dtype == np.uint8 and g["done"][:].all()
    assert len({im.tobytes() for im in imgs}) == 10 and imgs.std() > 10  # real, distinct renders
    # the hue view differs from its anchor in colour, not in geometry (no position change)
    views = g["views/hues/images"][:]
    assert np.abs(views.astype(int) - imgs.astype(int)).mean() > 5
    same = [edge_correlation(imgs[i], views[i]) for i in range(10)]
    shuffled = [edge_correlation(imgs[i], views[(i + 1) % 10]) for i in range(10)]  # another scene's geometry
    assert min(same) > 0.7 and max(shuffled) < 0.6, (same, shuffled)


def edge_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Correlation of two images' edge maps (summed colour change to the right and below neighbours): where
    surfaces meet, i.e. the geometry, whatever their colours."""
    def edges(x: np.ndarray) -> np.ndarray:
        x = x.astype(float)
        return (np.abs(np.diff(x, axis=1)).sum(-1)[:-1, :] + np.abs(np.diff(x, axis=0)).sum(-1)[:, :-1]).ravel()

    return float(np.corrcoef(edges(a), edges(b))[0, 1])


def test_workers_and_chunk_sizes_give_identical_arrays(reference, tmp_path):
    out = tmp_path / "split.zarr"
    assert render(out, "--workers", "2", "--chunk-size", "3", "--views", "hues:hues") == 0
    ref, got = arrays(reference), arrays(out)
    assert got["done"].shape == (4,) and got["done"].all()
    for k in ("images", "latents", "classes", "views/hues/images", "views/hues/latents"):
        assert np.array_equal(ref[k], got[k]), k


def test_killed_worker_mid_chunk_is_retried_to_the_same_store(reference, tmp_path, monkeypatch):
    marker = tmp_path / "killed"
    inject_before_commit(monkeypatch, KillOnce(1, str(marker)))  # a worker dies after chunk 1's data, before its flag
    out = tmp_path / "killed.zarr"
    assert render(out, "--workers", "2", "--chunk-size", "4", "--views", "hues:hues") == 0
    assert marker.exists(), "the fault was not injected"
    ref, got = arrays(reference), arrays(out)
    assert got["done"].all()
    for k in ("images", "latents", "views/hues/images"):
        assert np.array_equal(ref[k], got[k]), k


def test_interrupted_run_resumes_without_losing_or_redoing_chunks(reference, tmp_path):
    out = tmp_path / "resume.zarr"
    args = [*BASE, "--out", str(out), "--workers", "1", "--chunk-size", "2", "--views", "hues:hues"]
    proc = subprocess.Popen([sys.executable, "-m", "ident3d.pipelines.cli", *args], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    done = np.zeros(5, bool)
    while time.time() < deadline and proc.poll() is None:
        if (out / "done" / "zarr.json").exists():
            done = zarr.open_group(str(out), mode="r")["done"][:]
            if 1 <= done.sum() < 5:
                break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its workers die mid-run
    proc.wait()
    done = zarr.open_group(str(out), mode="r")["done"][:]
    assert 1 <= done.sum() < 5, f"could not interrupt mid-run (done={done})"
    before = {k: zarr.open_group(str(out), mode="r")["images"][2 * k:2 * k + 2] for k in np.flatnonzero(done)}

    from ident3d.render import render_store

    report = render_store(out, scene="causal3dident", n=10, settings={"resolution": 32, "samples": 4}, seed=5,
                          workers=1, chunk_size=2, views="hues:hues", progress=False)
    assert report.ok and sorted(report.skipped) == list(np.flatnonzero(done))
    assert sorted(report.rendered) == list(np.flatnonzero(~done))  # nothing rendered twice
    ref, got = arrays(reference), arrays(out)
    assert got["done"].all()
    for k in ("images", "latents", "classes", "views/hues/images"):
        assert np.array_equal(ref[k], got[k]), k
    for k, imgs in before.items():  # finished chunks were not touched
        assert np.array_equal(got["images"][2 * k:2 * k + 2], imgs)


def test_rerunning_a_finished_store_does_nothing(reference, capsys):
    digest = tree_digest(reference)
    assert render(reference, "--workers", "1", "--chunk-size", "10", "--views", "hues:hues") == 0
    assert "nothing to do" in capsys.readouterr().out and tree_digest(reference) == digest


@pytest.mark.parametrize("extra,expected", [
    (["--n", "0"], "n must be a positive number of images, got 0"),
    (["--resolution", "0"], "resolution must be at least 8 px"),
    (["--chunk-size", "0"], "chunk size must be a positive"),
    (["--hue-mode", "original"], "rendered with different render"),
    (["--view-seeds", "shared"], "rendered with different view_seeds"),
    (["--scm", "content_style"], "but SCM content_style samples"),
    (["--scene", "kitchen"], "no scene 'kitchen'"),
    (["--seed", "6"], "rendered with different seed"),
    (["--resolution", "48"], "rendered with different render"),
    (["--meshes", "Teapot=/nonexistent/teapot.obj"], "not found: /nonexistent/teapot.obj"),
    (["--views", "hues:wheels"], "unknown node, group or change set 'wheels'"),
])
def test_bad_input_one_line_exit_2_and_store_intact(reference, extra, expected):
    digest = tree_digest(reference)
    r = run_cli(*BASE, "--out", reference, "--workers", "1", "--chunk-size", "10", "--views", "hues:hues", *extra)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], r.stderr
    assert tree_digest(reference) == digest


@pytest.mark.parametrize("target,expected", [("file", "is a file"), ("proc", "cannot create the store")])
def test_unwritable_store_path(tmp_path, target, expected):
    f = tmp_path / "plain.txt"
    f.write_text("keep me")
    out = f if target == "file" else Path("/proc/ident3d_test.zarr")
    r = run_cli(*BASE, "--out", out, "--workers", "1")
    assert r.returncode == 2 and expected in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f.read_text() == "keep me"
