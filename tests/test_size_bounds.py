"""Sizes checked before any work (one memory bound, ``ident3d.store.memory.check_fits``, for rollouts, render workers and
chunk bookkeeping, training's view batch and dataset canvases: one line, nothing created, well under a second), and
a Ctrl-C while a render prepares its store: one line, exit 130, a store this run created removed, a resumed one
kept as it was and still resumable.

Bounds are tested with the available memory given; the commands with sizes no machine holds."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_refused, default_sigint, peak_mb, run_cli, tree_digest

import ident3d.pipelines.dataset  # noqa: F401 - imported here, so a refusal's time is its own, not the import's
import ident3d.pipelines.render  # noqa: F401
import ident3d.pipelines.train  # noqa: F401
import ident3d.render.driver as driver
from ident3d.causal import UserError
from ident3d.ingest.datasets import check_dataset_memory, digits, write_dataset_store
from ident3d.render import plan_render
from ident3d.render.sequences import check_rollout, plan_sequences
from ident3d.store.memory import check_fits
from ident3d.training.config import TrainConfig
from ident3d.training.objectives import OBJECTIVES
from ident3d.training.parts import check_view_batch

ROOT = Path(__file__).resolve().parents[1]
GB = 2**30


PEAK_MB = 512  # a refusal before the work (imports included); the refused work needs hundreds of GB and more


def measured_cli(*args):
    """``ident3d ARGS`` in this process and the peak MB it allocated (``peak_mb``)."""
    return peak_mb(lambda: run_cli(*args))


# ----- the one bound ---------------------------------------------------------------------------------------------
def test_the_bound_says_what_is_needed_what_is_available_and_what_to_lower():
    check_fits(GB, "a job needs", "lower --n", available=2 * GB)  # fits: nothing happens
    with pytest.raises(UserError) as exc:
        check_fits(3 * GB, "a job needs", "lower --n", available=2 * GB)
    assert str(exc.value) == "a job needs about 3.0 GB of memory but 2.0 GB is available; lower --n"


def test_the_render_bounds_share_it():
    layout = {"height": 224, "chunk_size": 4096, "views": ["hues"]}
    with pytest.raises(UserError, match=r"^1 worker\(s\) rendering 224 px images in chunks of 4,096 \(x2 with views\) "
                                        r"need about 1.5 GB of memory but 1.0 GB is available; lower --resolution, "
                                        r"--chunk-size or --workers$"):
        driver.check_memory(layout, workers=1, available=GB)
    driver.check_memory(layout, workers=1, available=2 * GB)


# ----- sequence rollouts -----------------------------------------------------------------------------------------
def test_a_rollout_is_bounded_by_sequences_length_and_nodes():
    check_rollout(500, 8, 10, available=GB)  # 4,000 frames: 1.3 MB
    with pytest.raises(UserError, match=r"^--sequences 1 x --length 100,000,000 \(100,000,000 frames of 10 nodes\) "
                                        r"need about 29.8 GB of memory but 20.0 GB is available; lower --sequences "
                                        r"or --length$"):
        check_rollout(1, 10**8, 10, available=20 * GB)  # the tester's command: silent for minutes before


@pytest.mark.parametrize("sequences, length, fragment", [
    (10**9, 8, "--sequences 1,000,000,000 x --length 8 (8,000,000,000 frames of 10 nodes) need about"),
    (10**12, 2, "--sequences 1,000,000,000,000 x --length 2 (2,000,000,000,000 frames of 10 nodes) need about"),
])
def test_render_refuses_a_rollout_no_machine_holds_before_drawing_it(tmp_path, sequences, length, fragment):
    out = tmp_path / "x.zarr"
    r, peak = measured_cli("render", "--sequences", sequences, "--length", length, "--out", out)
    assert_refused(r, fragment, "lower --sequences or --length")
    assert peak < PEAK_MB and not out.exists() and not any(tmp_path.iterdir()), peak


def test_a_sequence_chunk_no_worker_holds_is_refused_before_the_rollout(tmp_path):
    """One sequence of 10^7 steps in one chunk of 1,024 px frames: refused before its rollout (minutes of steps),
    naming the flags that make a sequence render's chunk."""
    out = tmp_path / "x.zarr"
    r, peak = measured_cli("render", "--sequences", 1, "--length", 10**7, "--sequences-per-chunk", 1,
                           "--resolution", 1024, "--out", out)
    assert_refused(r, "1 worker(s) rendering 1024 px images in chunks of 10,000,000 (x1 with views) need about",
            "lower --resolution, --sequences-per-chunk, --length or --workers")
    assert peak < PEAK_MB and not out.exists() and not any(tmp_path.iterdir()), peak


def test_a_new_store_of_two_million_images_is_prepared_without_reading_its_flags(tmp_path):
    """A store this run creates has no chunk done: its 31,250 flags are not read (Zarr held ~2.4 KB per chunk
    while it read them, 3-8 s here; a billion images would have taken 37 GB before the first render)."""
    plan = plan_render(tmp_path / "big.zarr", n=2_000_000, settings={"resolution": 16, "samples": 1})
    (_, done), peak = peak_mb(lambda: driver.prepare_store(plan, overwrite=False))
    assert peak < 20 and len(done) == 31_250 and not done.any(), peak  # reading the flags held about 75 MB


# ----- training's view batch -------------------------------------------------------------------------------------
def test_the_view_batch_is_bounded_by_batch_views_and_image_size():
    simvae = OBJECTIVES.get("simvae")
    cfg = TrainConfig(data="x", objective="simvae", batch_size=64, n_views=100_000)
    with pytest.raises(UserError, match=r"^--batch-size 64 x 100000 views \(6,400,000 images of 28 px\) need about "
                                        r"224.3 GB of memory but 24.0 GB is available; lower --batch-size or "
                                        r"--n-views$"):
        check_view_batch(cfg, simvae, 28, available=24 * GB)  # the tester's run: out of memory before
    check_view_batch(TrainConfig(data="x", objective="simvae", batch_size=128, n_views=10), simvae, 64,
                     available=2 * GB)  # paper 004's J = 10 at 64 px: 240 MB
    infonce = OBJECTIVES.get("infonce")  # a pair: n_views is the objective's; only --batch-size to lower
    with pytest.raises(UserError, match=r"on each of 4 ranks\) need about .* lower --batch-size$"):
        check_view_batch(TrainConfig(data="x", batch_size=4 * 10**6), infonce, 224, world=4, available=24 * GB)


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory):
    """64 of scikit-learn's digits at 8 px as a store."""
    ds = digits(8)
    ds = type(ds)(ds.name, ds.images[:64], {k: v[:64] for k, v in ds.labels.items()}, ds.label_names)
    return write_dataset_store(ds, tmp_path_factory.mktemp("digits") / "d.zarr", chunk_size=32)


def test_train_refuses_views_no_machine_holds_and_leaves_no_run_folder(tiny_store, tmp_path):
    out = tmp_path / "runs" / "simvae"
    digest = tree_digest(tiny_store)
    r, peak = measured_cli("train", "--data", tiny_store, "--objective", "simvae", "--views", "paper004_grey",
                           "--n-views", 10**7, "--encoder", "mlp_vae", "--encoder-arg", "channels=1", "--steps", 2,
                           "--batch-size", 64, "--device", "cpu", "--no-progress", "--out", out)
    assert_refused(r, "--batch-size 64 x 10000000 views (640,000,000 images of 8 px) need about",
            "lower --batch-size or --n-views")
    assert not out.exists() and not out.parent.exists() and tree_digest(tiny_store) == digest
    assert peak < PEAK_MB, peak


# ----- dataset canvases ------------------------------------------------------------------------------------------
def test_a_dataset_is_bounded_by_count_size_and_canvas():
    with pytest.raises(UserError, match=r"^mnist5k_canvas \(train split\) with 512 px digits needs about 38.1 GB of "
                                        r"memory but 24.0 GB is available; lower --size$"):
        check_dataset_memory("mnist5k_canvas", True, 512, available=24 * GB)  # the tester's ~28 GB of canvases
    check_dataset_memory("mnist5k_canvas", True, None, available=GB)  # 84 px canvases: 103 MB
    check_dataset_memory("mnist5k", False, 64, available=GB)  # 1,000 test digits at 64 px: 160 MB
    with pytest.raises(UserError, match=r"^celeba \(test split\) with 512 px images needs about 14.6 GB"):
        check_dataset_memory("celeba", False, 512, available=8 * GB)
    check_dataset_memory("no_such_set", True, 512, available=1)  # unknown: load_dataset says so


def test_dataset_refuses_canvases_no_machine_holds_before_reading_anything(tmp_path):
    out = tmp_path / "c.zarr"
    r, peak = measured_cli("dataset", "mnist_canvas", "--size", 512, "--out", out)  # 60,000 x 1,536^2 x 3 canvases
    assert_refused(r, "mnist_canvas (train split) with 512 px digits needs about 571.3 GB of memory", "lower --size")
    assert peak < PEAK_MB and not out.exists() and not any(tmp_path.iterdir()), peak


# ----- Ctrl-C while a render prepares its store ------------------------------------------------------------------
def test_ctrl_c_while_a_new_store_is_prepared_is_one_line_and_removes_it(tmp_path):
    """200,000 frames of given latents take seconds to write into a new store: Ctrl-C then (a real SIGINT to the
    real command) prints one line, exits 130 at once and leaves no skeleton store behind."""
    out = tmp_path / "seq.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "ident3d.pipelines.cli", "render", "--sequences", "25000", "--length", "8",
                             "--resolution", "16", "--samples", "1", "--workers", "1", "--no-progress",
                             "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_sigint, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not (out / "done" / "zarr.json").exists():
        time.sleep(0.02)
    time.sleep(0.5)  # writing the given latents (~15 s in all on 2 busy cores)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)  # a guard against a hang, not a speed bound
    finally:
        proc.kill()
    assert proc.returncode == 130 and err.count("\n") == 1 and "Traceback" not in err, (proc.returncode, err[-3000:])
    assert err == f"ident3d render: interrupted while preparing {out}, before any chunk was rendered; the partial " \
                  "store was removed: re-run the same command to start it\n"
    assert not out.exists() and not any(tmp_path.iterdir())


class InterruptOnCall:
    """Calls ``fn``, raising KeyboardInterrupt (a Ctrl-C, forced) on call number ``at`` instead."""

    def __init__(self, fn, at):
        self.fn, self.at, self.calls = fn, at, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.fn(*args, **kwargs)


def test_ctrl_c_while_a_resumed_store_is_prepared_keeps_it_and_it_resumes(tmp_path, monkeypatch):
    """A store being resumed, interrupted while its flags are read block by block: kept byte for byte, and the
    next start resumes it (the flags of a new store are not read at all)."""
    n = 3 * driver.DONE_BLOCK * 64  # three blocks of chunks of 64 rows
    plan = plan_render(tmp_path / "s.zarr", n=n, chunk_size=64, settings={"resolution": 16})
    group, done = driver.prepare_store(plan, overwrite=False)
    group["done"][5] = True
    digest = tree_digest(plan.job.out)
    with monkeypatch.context() as patch:
        reads = InterruptOnCall(driver.read_rows, at=2)
        patch.setattr(driver, "read_rows", reads)
        with pytest.raises(KeyboardInterrupt, match=r"the store is kept as it was: re-run the same command to resume$"):
            driver.prepare_store(plan, overwrite=False)
    assert reads.calls == 2 and tree_digest(plan.job.out) == digest
    _, done = driver.prepare_store(plan, overwrite=False)
    assert np.flatnonzero(done).tolist() == [5] and len(done) == 3 * driver.DONE_BLOCK


def test_ctrl_c_while_given_latents_are_written_removes_the_new_store_and_keeps_an_empty_folder(tmp_path,
                                                                                                 monkeypatch):
    out = tmp_path / "given"
    out.mkdir()  # an empty folder given as --out: the store is made inside it, and it stays an empty folder
    plan = plan_sequences(out, sequences=3 * driver.DONE_BLOCK, length=2, sequences_per_chunk=1,
                          settings={"resolution": 16})
    writes = InterruptOnCall(driver.write_given, at=2)
    monkeypatch.setattr(driver, "write_given", writes)
    with pytest.raises(KeyboardInterrupt, match=r"the partial store was removed: re-run the same command to start it$"):
        driver.prepare_store(plan, overwrite=False)
    assert writes.calls == 2 and out.is_dir() and not any(out.iterdir())
