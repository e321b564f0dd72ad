"""Issue 9, the render side: every bad input or fault of ``ident3d render`` is one line on stderr (no traceback),
exit code 2 (130 for Ctrl-C), and nothing already written is lost: a finished store keeps its bytes, a bad command
creates nothing, a partial run resumes to the same store. Real commands (subprocesses), real bpy, Zarr and Dask;
faults that cannot be made for real (a full disk) are forced through the render job's ``before_commit`` hook."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from helpers import (
    FullDisk,
    KillOnce,
    cli_with_hook,
    default_sigint,
    inject_before_commit,
    peak_mb,
    run_cli,
    tree_digest,
)

ROOT = Path(__file__).resolve().parents[1]
N, CHUNK = 8, 1
BASE = ["render", "--scene", "causal3dident", "--n", str(N), "--resolution", "32", "--samples", "4", "--seed", "3",
        "--chunk-size", str(CHUNK), "--workers", "1", "--no-progress"]


def ident3d(*args, cwd=None, env=None):
    """``ident3d ARGS`` in-process (``helpers.run_cli``); its Dask workers are real processes."""
    return run_cli(*args, cwd=cwd, env=env)


def one_line(r, code=2):
    """The command failed with ``code`` and exactly one stderr line, no traceback; returns that line."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code and len(lines) == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    return lines[0]


def arrays(path):
    g = zarr.open_group(str(path), mode="r")
    return {k: g[k][:] for k in ("images", "latents", "classes", "done")}


def assert_same_store(ref, got):
    a, b = arrays(ref), arrays(got)
    assert b["done"].all()
    for k in ("images", "latents", "classes"):
        assert np.array_equal(a[k], b[k]), k


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One finished store on the local cluster: the target of bad commands and the bit-exact reference."""
    out = tmp_path_factory.mktemp("ref") / "ref.zarr"
    r = ident3d(*BASE, "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out


def _scene_yaml(tmp_path, edit):
    """The built-in causal3dident scene with one field broken by ``edit(dict)``, written as YAML."""
    import yaml

    from ident3d.render.scene import load_scene

    spec = load_scene("causal3dident").to_dict()
    edit(spec)
    path = tmp_path / "scene.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


SCENE_FAULTS = {
    "energy": (lambda s: s["lights"][2].update(energy="lots"), "lights[2].energy must be a number, got 'lots'"),
    "location": (lambda s: s["lights"][0].update(location=[1, 2]), "lights[0].location must be a list of 3 numbers"),
    "scale": (lambda s: s["classes"][1].update(scale="abc"), "classes[1].scale must be a number, got 'abc'"),
    "mesh": (lambda s: s["classes"][2].update(mesh=7), "classes[2].mesh must be a string, got 7"),
}


@pytest.mark.parametrize("case", sorted(SCENE_FAULTS))
def test_bad_scene_yaml_is_one_line_up_front(reference, tmp_path, case):
    edit, expected = SCENE_FAULTS[case]
    scene = _scene_yaml(tmp_path, edit)
    digest = tree_digest(reference)
    line = one_line(ident3d(*BASE, "--out", str(reference), "--scene", str(scene), "--scm", "causal3dident"))
    assert expected in line and str(scene) in line, line
    assert tree_digest(reference) == digest


def _bad_mesh(tmp_path, kind):
    """A file named like a mesh that is not one: text as .obj, an empty .ply, random bytes as .glb/.stl."""
    if kind == "text.obj":
        (tmp_path / kind).write_text("this is not a mesh\nf 1 2 3\n")
    elif kind == "empty.ply":
        (tmp_path / kind).write_bytes(b"")
    else:
        (tmp_path / kind).write_bytes(np.random.default_rng(0).bytes(777))
    return tmp_path / kind


@pytest.mark.parametrize("kind,expected", [("text.obj", "not a valid OBJ mesh (no vertex"),
                                           ("empty.ply", "not a valid PLY mesh (the file is empty)"),
                                           ("random.glb", "not a valid GLB mesh (no 'glTF' binary header)"),
                                           ("random.stl", "not a valid STL mesh")])
def test_bad_mesh_file_is_one_line_and_creates_nothing(tmp_path, kind, expected):
    mesh = _bad_mesh(tmp_path, kind)
    out = tmp_path / "new.zarr"
    line = one_line(ident3d(*BASE, "--out", str(out), "--meshes", f"Hare={mesh}"))
    assert expected in line and "class Hare" in line and str(mesh) in line, line
    assert not out.exists()


@pytest.mark.parametrize("extra,expected", [
    (["--resolution", "100000"], "lower --resolution, --chunk-size or --workers"),
    (["--retries", "-1"], "retries must be a non-negative integer, got -1"),
    (["--workers", "0"], "workers must be a positive number of processes, got 0"),
    (["--seed", "-1"], "seed must be a non-negative integer, got -1"),
    (["--chunk-size", "-4"], "chunk size must be a positive number of images, got -4"),
    (["--chunk-size", "nan"], "argument --chunk-size: invalid int value: 'nan'"),
    (["--connect-timeout", "0", "--scheduler", "tcp://127.0.0.1:1"], "connect timeout must be a positive number"),
])
def test_nonsense_numbers_are_one_line(reference, extra, expected):
    digest = tree_digest(reference)
    line = one_line(ident3d(*BASE, "--out", str(reference), *extra))
    assert expected in line, line
    assert tree_digest(reference) == digest


def test_too_large_for_memory_creates_nothing(tmp_path):
    out = tmp_path / "new.zarr"
    line = one_line(ident3d(*BASE, "--out", str(out), "--resolution", "60000", "--chunk-size", "64"))
    assert "need about" in line and "GB is available; lower --resolution, --chunk-size" in line, line
    assert not out.exists()


def _closed_port():
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("n", ["1000000000000", "100000000000000000"])
def test_huge_n_is_refused_at_once_and_creates_nothing(tmp_path, n):
    """Used to hang while memory grew (13.5 GB at 140 s): the chunk bookkeeping and the store must fit."""
    out = tmp_path / "huge.zarr"
    r, peak = peak_mb(lambda: ident3d(*BASE, "--out", str(out), "--n", n))
    line = one_line(r)
    assert f"--n {int(n):,}" in line and ("of memory but" in line or "of disk for the store" in line), line
    assert peak < 512 and not out.exists(), peak  # imports included; the bookkeeping grew to 13.5 GB before


def test_unreachable_scheduler_is_one_line_fast_and_creates_nothing(tmp_path, monkeypatch):
    """--connect-timeout reaches the client (a spy on the real one: the bound, not the machine's speed, is tested)."""
    import dask.distributed

    addr = f"tcp://127.0.0.1:{_closed_port()}"
    out = tmp_path / "new.zarr"
    timeouts, real = [], dask.distributed.Client

    def client(*args, **kwargs):
        timeouts.append(kwargs.get("timeout"))
        return real(*args, **kwargs)
    monkeypatch.setattr(dask.distributed, "Client", client)
    line = one_line(ident3d(*BASE, "--out", str(out), "--scheduler", addr, "--connect-timeout", "2"))
    assert f"cannot reach the Dask scheduler at {addr}" in line and "drop --scheduler" in line, line
    assert timeouts == [2.0] and not out.exists()


def test_worker_side_user_error_stops_at_once_without_retries(tmp_path):
    """A mesh that sniffs fine but Blender cannot use (one vertex) fails in the worker: one line, not retried (the
    worker returns the failure as a value, which Dask does not retry; a raised error would be retried 50 times and
    end as a failed-chunks report, not this line)."""
    mesh = tmp_path / "point.obj"
    mesh.write_text("v 0 0 0\n")
    out = tmp_path / "new.zarr"
    line = one_line(ident3d(*BASE, "--out", str(out), "--meshes", f"Hare={mesh}", "--retries", "50"))
    assert "degenerate" in line and "Hare" in line, line
    assert not zarr.open_group(str(out), mode="r")["done"][:].any()


def test_full_disk_is_one_line_and_the_store_resumes(reference, tmp_path, monkeypatch):
    out = tmp_path / "full.zarr"
    with monkeypatch.context() as patch:
        inject_before_commit(patch, FullDisk(3))  # writing chunk 3 fails with ENOSPC
        r = ident3d(*BASE, "--out", str(out))
    line = one_line(r)
    assert "no space left on the device holding" in line and str(out) in line and "re-run" in line, line
    done = zarr.open_group(str(out), mode="r")["done"][:]
    assert not done[3] and done.sum() < N
    resume = [a for a in BASE if a != "--no-progress"]  # with progress and a cluster: the dashboard link, once
    r = ident3d(*resume, "--out", str(out), "--workers", "2")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.count("Dask dashboard: http") == 1, r.stdout
    assert f"{int(done.sum())} chunks were already done" in r.stdout, r.stdout
    assert_same_store(reference, out)


@pytest.mark.parametrize("workers", ["1", "2"])  # in this process / on a local cluster
def test_ctrl_c_says_how_to_resume_and_the_rerun_completes_the_same_store(reference, tmp_path, workers):
    out = tmp_path / "int.zarr"
    # chunks from 2 on hold their done flag for a minute: the interrupt lands with some done and some in flight
    proc = subprocess.Popen([*cli_with_hook("helpers.SlowFrom(2, 60.0)"), *BASE, "--out", str(out), "--workers", workers],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_sigint,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])})
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if (out / "done" / "zarr.json").exists() and zarr.open_group(str(out), mode="r")["done"][:].any():
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the whole foreground group
    _, err = proc.communicate(timeout=60)
    lines = err.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1 and "Traceback" not in err, (proc.returncode, err)
    assert "interrupted:" in lines[0] and f"of {N} chunks done; re-run the same command to resume" in lines[0]
    done = zarr.open_group(str(out), mode="r")["done"][:]
    assert 1 <= done.sum() < N, done
    assert f"interrupted: {int(done.sum())} of {N}" in lines[0], (lines[0], done)  # counted after the workers stopped
    r = ident3d(*BASE, "--out", str(out))
    assert r.returncode == 0 and f"{int(done.sum())} chunks were already done" in r.stdout, r.stdout + r.stderr
    assert_same_store(reference, out)


def test_lost_worker_is_named_in_the_summary(reference, tmp_path, monkeypatch):
    out = tmp_path / "lost.zarr"
    inject_before_commit(monkeypatch, KillOnce(2, str(tmp_path / "killed")))
    r = ident3d(*BASE, "--out", str(out), "--workers", "2")
    assert r.returncode == 0 and (tmp_path / "killed").exists(), r.stderr
    assert "1 worker process(es) died during the run" in r.stdout, r.stdout
    assert_same_store(reference, out)


def test_farm_workers_in_another_directory_render_a_relative_out(reference, tmp_path):
    """A scheduler and two workers started as separate programs in another cwd; --out is relative to ours."""
    farm, here = tmp_path / "farm", tmp_path / "here"
    farm.mkdir()
    here.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    sched_file = farm / "scheduler.json"
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--port", "0",
                               "--dashboard-address", ":0", "--scheduler-file", str(sched_file)],
                              cwd=farm, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.time() + 60
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.1)
        # one worker with two Dask threads: its chunks render one at a time (bpy is process-global), 2 Cycles threads
        procs += [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--nthreads", str(t),
                                    "--nworkers", "1", "--scheduler-file", str(sched_file)],
                                   cwd=farm, env={**env, "OMP_NUM_THREADS": ""}, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                  for t in (1, 2)]
        import json

        from distributed import Client

        addr = json.loads(sched_file.read_text())["address"]
        with Client(addr, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        r = ident3d(*BASE, "--out", "rel.zarr", "--scheduler", addr, cwd=here)
        assert r.returncode == 0, r.stdout + r.stderr
        assert (here / "rel.zarr").is_dir() and not (farm / "rel.zarr").exists()
        assert_same_store(reference, here / "rel.zarr")
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def test_a_finished_store_resumes_without_blender_and_a_new_one_is_refused(reference, tmp_path, monkeypatch):
    """Where bpy is missing (a GPU machine training on carried stores; forced here), re-running a finished store's
    command renders nothing and succeeds; a store with chunks left is refused in one line before anything is
    written."""
    import importlib.util

    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bpy" else find(name, *a))
    before = tree_digest(reference)
    r = ident3d(*BASE, "--out", str(reference))
    assert r.returncode == 0, r.stderr
    assert tree_digest(reference) == before
    fresh = tmp_path / "fresh.zarr"
    assert "rendering needs Blender as a Python module" in one_line(ident3d(*BASE, "--out", str(fresh)))
    assert not fresh.exists()
