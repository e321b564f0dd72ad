"""The next_frame view maker: time-contrastive pairs from a sequence store, trained through the normal trainer."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr
from helpers import run_cli
from test_temporal_npz import citris_file

from ident3d.causal.errors import UserError
from ident3d.ingest.temporal_npz import import_temporal
from ident3d.store.info import store_info
from ident3d.training.data import StoreBatches
from ident3d.training.run_dir import RunDir
from ident3d.training.views import make_view_maker

LENGTH = 6


@pytest.fixture(scope="module")
def seq_store(tmp_path_factory):
    """12 imported sequences of 6 frames (16 px), 2 sequences a chunk (evaluation's score third: 48 frames, enough
    for MIG's 20 bins)."""
    root = tmp_path_factory.mktemp("next_frame")
    rng = np.random.default_rng(3)
    citris_file(root / "train.npz", n=12 * LENGTH, imgs=rng.integers(0, 256, (12 * LENGTH, 16, 16, 3),
                                                                      dtype=np.uint8))
    import_temporal(root / "train.npz", root / "s.zarr", length=LENGTH, sequences_per_chunk=2, progress=False)
    return root / "s.zarr"


@pytest.mark.parametrize("in_memory", [True, False])
def test_each_anchor_is_paired_with_its_neighbour_in_time_in_the_same_sequence(seq_store, in_memory):
    info = store_info(str(seq_store))
    ds = StoreBatches(info, 16, seed=0, in_memory=in_memory)
    make_view_maker("next_frame", lambda x: x).bind(ds, None, 0)
    g = zarr.open_group(str(seq_store), mode="r")
    seq, time, images, targets = g["sequence"][:], g["time"][:], g["images"][:], g["interventions"][:]
    seen_last = 0
    for step in range(6):
        b = ds.batch(step)
        rows, partners = b["index"].numpy(), b["pair/index"].numpy()
        assert (seq[partners] == seq[rows]).all()
        forward = time[rows] < LENGTH - 1
        assert (time[partners][forward] == time[rows][forward] + 1).all()
        assert (time[partners][~forward] == LENGTH - 2).all()
        seen_last += int((~forward).sum())
        assert np.array_equal(b["pair/images"].numpy(), images[partners])
        assert np.array_equal(b["pair/interventions"].numpy(), targets[np.maximum(rows, partners)])
    assert seen_last > 0  # the last-step branch was exercised


def test_an_iid_store_is_refused_in_one_line(tmp_path):
    from ident3d.ingest.datasets import ImageDataset, write_dataset_store

    rng = np.random.default_rng(0)
    ds = ImageDataset("toy", rng.integers(0, 256, (10, 8, 8, 3), np.uint8), {"digit": rng.integers(0, 3, 10)},
                      {"digit": ["a", "b", "c"]})
    write_dataset_store(ds, tmp_path / "iid.zarr", chunk_size=4)
    batches = StoreBatches(store_info(str(tmp_path / "iid.zarr")), 4, seed=0)
    with pytest.raises(UserError, match="next_frame needs a sequence store"):
        make_view_maker("next_frame", lambda x: x).bind(batches, None, 0)


def test_time_contrastive_infonce_trains_and_evaluates_through_the_cli(seq_store, tmp_path):
    run = tmp_path / "run"
    r = run_cli("train", "--data", seq_store, "--views", "next_frame", "--objective", "infonce", "--encoder", "cnn",
                "--steps", "3", "--batch-size", "16", "--out", run, "--no-progress", "--device", "cpu")
    assert r.returncode == 0 and "trained infonce with next_frame to step 3" in r.stdout, r.stderr
    r = run_cli("evaluate", "--run", run, "--data", seq_store, "--metrics", "citris,temporal", "--out",
                tmp_path / "report.json")
    assert r.returncode == 0 and "citris (output layer): r2_diag" in r.stdout, r.stdout + r.stderr
    temporal = json.loads((tmp_path / "report.json").read_text())["metrics"]["temporal"]
    assert temporal["variables"] == ["class", "position", "rotation", "spot_angle", "obj_hue", "spot_hue", "bg_hue"]
    assert np.asarray(temporal["r2"]).shape == (7, 7)
    assert temporal["assignment_kind"] == "post hoc"  # a model without an assignment of its own


def test_target_views_are_in_time_order_with_the_steps_variable_targets(seq_store):
    info = store_info(str(seq_store))
    ds = StoreBatches(info, 16, seed=1, in_memory=True)
    views = make_view_maker("next_frame_targets", lambda x: x)
    views.bind(ds, None, 0)
    g = zarr.open_group(str(seq_store), mode="r")
    time, images, nodes = g["time"][:], g["images"][:], g["interventions"][:]
    # temporal_causal3dident's 7 causal variables: the class, the position (x, y, z), the rotation (alpha, beta),
    # then the spotlight angle and the three hues (node order: class, pos_x..z, rot_alpha, rot_beta, spot, hues)
    groups = [[0], [1, 2, 3], [4, 5], [6], [7], [8], [9]]
    for step in range(4):
        b = ds.batch(step)
        x_t, x_t1, targets = views(b)
        rows, partners = b["index"].numpy(), b["pair/index"].numpy()
        earlier, later = np.minimum(rows, partners), np.maximum(rows, partners)
        assert (time[later] == time[earlier] + 1).all()
        assert np.allclose(x_t.numpy(), images[earlier].transpose(0, 3, 1, 2) / 255.0, atol=1e-6)
        assert np.allclose(x_t1.numpy(), images[later].transpose(0, 3, 1, 2) / 255.0, atol=1e-6)
        want = np.stack([nodes[later][:, g].any(1) for g in groups], 1)
        assert np.array_equal(targets.numpy(), want.astype(np.float32))


@pytest.mark.parametrize("objective", ["citris_vae", "ivae_temporal"])
def test_temporal_vaes_train_and_evaluate_through_the_cli(seq_store, tmp_path, objective):
    run = tmp_path / "run"
    r = run_cli("train", "--data", seq_store, "--views", "next_frame_targets", "--objective", objective,
                "--encoder", "cnn", "--out-dim", "12", "--steps", "3", "--batch-size", "16", "--out", run,
                "--no-progress", "--device", "cpu")
    assert r.returncode == 0 and f"trained {objective} with next_frame_targets to step 3" in r.stdout, r.stderr
    r = run_cli("evaluate", "--run", run, "--data", seq_store, "--metrics", "citris,temporal", "--out",
                tmp_path / "report.json")
    assert r.returncode == 0 and "citris (output layer): r2_diag" in r.stdout, r.stdout + r.stderr
    temporal = json.loads((tmp_path / "report.json").read_text())["metrics"]["temporal"]
    assert temporal["variables"] == ["class", "position", "rotation", "spot_angle", "obj_hue", "spot_hue", "bg_hue"]
    assert np.asarray(temporal["r2"]).shape == (7, 7) and len(temporal["assignment"]) == 12
    if objective == "citris_vae":  # scored under the model's own assignment of its 12 dimensions
        objective_ = RunDir(run).load().objective(image_size=16)
        assert temporal["assignment_kind"] == "learned"
        assert temporal["assignment"] == objective_.learner.assignment().tolist()
    else:
        assert temporal["assignment_kind"] == "post hoc"
    r = run_cli("train", "--data", seq_store, "--views", "next_frame_targets", "--objective", objective,
                "--hp", "n_vars=5", "--steps", "3", "--batch-size", "16", "--out", tmp_path / "bad", "--no-progress")
    assert r.returncode == 2 and "has 7 causal variables" in r.stderr and "n_vars=7" in r.stderr, r.stderr


def test_a_citris_run_saved_before_the_classifier_existed_evaluates_and_resumes(seq_store, tmp_path):
    run = tmp_path / "old"
    r = run_cli("train", "--data", seq_store, "--views", "next_frame_targets", "--objective", "citris_vae",
                "--hp", "beta_classifier=0", "--encoder", "cnn", "--out-dim", "12", "--steps", "2", "--batch-size",
                "8", "--out", run, "--no-progress", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    cfg = json.loads((run / "config.json").read_text())
    del cfg["objective_args"]["beta_classifier"]  # as saved before the argument existed: the default (2) applies
    (run / "config.json").write_text(json.dumps(cfg))
    r = run_cli("evaluate", "--run", run, "--data", seq_store, "--no-kernel")
    assert r.returncode == 0, r.stderr
    r = run_cli("train", "--data", seq_store, "--views", "next_frame_targets", "--objective", "citris_vae",
                "--encoder", "cnn", "--out-dim", "12", "--steps", "3", "--batch-size", "8", "--out", run,
                "--no-progress", "--device", "cpu", "--resume")
    assert r.returncode == 0 and "to step 3" in r.stdout, r.stderr
    objective = RunDir(run).load().objective(image_size=16)
    assert objective.learner.classifier is None  # it went on as it had trained


def test_a_run_trained_on_rendered_frames_evaluates_on_an_imported_store_and_back(seq_store, tmp_path):
    """Issue 32.4: evaluate compared the scene's name ("imported" vs "temporal_causal3dident") although the latents,
    groups, classes and size match; it now compares what the scores need, in both directions."""
    from ident3d.render.sequences import render_sequences

    rendered = tmp_path / "rendered.zarr"
    assert render_sequences(rendered, sequences=4, length=LENGTH, settings={"resolution": 16, "samples": 1},
                            workers=1, progress=False).ok
    assert store_info(str(rendered)).scene != store_info(str(seq_store)).scene
    for train, test in ((rendered, seq_store), (seq_store, rendered)):
        run = tmp_path / f"run_{train.stem}"
        r = run_cli("train", "--data", train, "--views", "next_frame", "--objective", "infonce", "--encoder", "cnn",
                    "--steps", "2", "--batch-size", "8", "--out", run, "--no-progress", "--device", "cpu")
        assert r.returncode == 0, r.stderr
        r = run_cli("evaluate", "--run", run, "--data", test, "--no-kernel")
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_a_split_of_a_sequence_store_cuts_between_sequences(seq_store, tmp_path):
    """Issue 32.10: --split train:0.3 cut 72 frames at row 22, inside a sequence, so a frame's partner lay in the test
    part; the cut now falls between whole sequences, and no pair crosses it."""
    for split in ("train:0.3", "test:0.3"):
        info = store_info(str(seq_store), split=split)
        assert info.rows.size % LENGTH == 0 and info.rows.size in (4 * LENGTH, 8 * LENGTH)
        ds = StoreBatches(info, 16, seed=0)
        make_view_maker("next_frame", lambda x: x).bind(ds, None, 0)
        for step in range(4):
            assert np.isin(ds.batch(step)["pair/index"].numpy(), info.rows).all()


def test_citris_vae_needs_a_latent_dimension_per_causal_variable(seq_store, tmp_path):
    r = run_cli("train", "--data", seq_store, "--views", "next_frame_targets", "--objective", "citris_vae",
                "--out-dim", "2", "--steps", "1", "--out", tmp_path / "r", "--no-progress")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--out-dim must be at least 7, got 2" in r.stderr
    assert not (tmp_path / "r").exists()
