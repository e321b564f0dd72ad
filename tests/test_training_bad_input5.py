"""Issue 42 §3, training's part: slot sizes meet the one memory bound before anything is allocated, the bound moves no
random stream (weights unchanged), and a slot learner on a store without objects says what it learns there."""

import numpy as np
import pytest
import torch
from helpers import peak_mb, run_cli

from ident3d.training.model_memory import check_model_memory, parameter_count, step_activations
from ident3d.training.objectives import OBJECTIVES

SLOT = ["--objective", "slot_attention", "--encoder", "slot_cnn", "--constraint", "none", "--views", "none",
        "--steps", "2", "--batch-size", "8", "--no-progress"]


@pytest.fixture(scope="module")
def digits_store(tmp_path_factory):
    """64 digits on 28 px canvases: a store with no object slots."""
    from ident3d.ingest.datasets import _subset, canvas, digits, write_dataset_store

    return write_dataset_store(canvas(_subset(digits(14), slice(0, 64)), 0), tmp_path_factory.mktemp("d") / "d.zarr")


@pytest.mark.parametrize("hp, says", [
    ("n_slots=100000", "objective slot_attention (154,638 parameters, 122,054,379,648 values a step at --batch-size 8)"),
    ("slot_dim=10000000", "objective slot_attention (700,011,380,160,270 parameters) needs"),  # a traceback before
])
def test_slot_sizes_no_machine_holds_are_one_line_before_anything_is_allocated(digits_store, tmp_path, hp, says):
    out = tmp_path / "run"
    r, peak = peak_mb(lambda: run_cli("train", "--data", digits_store, "--out", out, *SLOT, "--hp", hp))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"ident3d train: error: {says}") and "of memory but" in lines[0], lines[0]
    assert lines[0].endswith("lower the sizes given with --hp or --encoder-arg, or --batch-size")
    assert not out.exists() and peak < 512, peak  # imports included; the refused sizes need terabytes


def test_the_estimate_counts_parameters_and_one_steps_values_exactly():
    """On a model whose numbers are known by hand: a 10 -> 7 linear layer has 77 parameters; a forward pass of two
    views of (4, 3, 2, 2) images through flatten (12 values each) and the layer (7) outputs 2 x 4 x (12 + 7) values."""
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.flat, self.fc = torch.nn.Flatten(), torch.nn.Linear(12, 7)

        def forward(self, views, step=0, total=1):
            return {"loss": sum(self.fc(self.flat(v)).sum() for v in views)}

    module, params = parameter_count(lambda: (Tiny(), None))
    assert params == 12 * 7 + 7 and module.fc.weight.is_meta
    assert step_activations(module, 2, 4, 2) == 2 * 4 * (12 + 7)
    check_model_memory("tiny", lambda: (Tiny(), None), 4, 2, 2, available=91 * 16 + 152 * 8)  # exactly fits
    with pytest.raises(ValueError, match=r"^objective tiny \(91 parameters, 152 values a step at --batch-size 4\) "
                                         r"needs about 0.0 GB of memory but 0.0 GB is available"):
        check_model_memory("tiny", lambda: (Tiny(), None), 4, 2, 2, available=91 * 16 + 152 * 8 - 1)


def test_the_bound_moves_no_random_stream():
    """Slot Attention draws its initial slots in the forward pass: the check runs it on meta tensors with the streams
    saved, so the real model built after it gets the same weights and the same next draws."""
    from ident3d.training.encoders import build_encoder

    def build():
        encoder = build_encoder("slot_cnn", 8, 16, "none")
        return OBJECTIVES.get("slot_attention")(encoder, n_slots=3, slot_dim=8), encoder

    torch.manual_seed(0)
    np.random.seed(0)
    want = (torch.rand(3), np.random.rand(3))
    torch.manual_seed(0)
    np.random.seed(0)
    check_model_memory("slot_attention", build, 8, 16, 2)
    assert torch.equal(torch.rand(3), want[0]) and np.array_equal(np.random.rand(3), want[1])


def test_a_slot_learner_on_a_store_without_objects_says_what_it_learns(digits_store, tmp_path):
    r = run_cli("train", "--data", digits_store, "--out", tmp_path / "run", *SLOT)
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if "note:" in line]
    assert notes == ["ident3d train: note: slot_attention on a store without object slots (a single-object scene or a "
                     "dataset): with no objects to separate, its slots split each image into parts (object, "
                     "background, lighting), and the object metrics (fg_ari, sis, slot_r2) need a multi-object "
                     "store's masks and per-object latents; render one with --scene multi3dident"], r.stderr
    r = run_cli("train", "--data", digits_store, "--out", tmp_path / "vae", "--objective", "vae", "--steps", "2",
                "--batch-size", "8", "--no-progress")
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr  # other objectives: nothing to say
