"""Issue 42 §0: every registered objective, killed mid-run and resumed, ends with the uninterrupted run's weights,
bit for bit. Slot Attention's initial slots and the VAEs' posterior noise draw from torch's global generator, whose
state the checkpoint now carries; before, a resumed slot_attention or vae run drifted from the uninterrupted one.

Each objective trains 4 steps at toy size (checkpoint every 2) on a store it accepts; the crash is a
KeyboardInterrupt at step 3, the fault a SIGKILL or Ctrl-C would leave (the checkpoint of step 2 on disk)."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from ident3d.training.objectives import OBJECTIVES
from ident3d.training.trainer import TrainConfig, TrainingInterrupted, train

SLOT = {"views": "none", "encoder": "slot_cnn", "constraint": "none", "objective_args": {"n_slots": 3, "slot_dim": 8}}
# objective -> (store, TrainConfig fields): "image" a digit canvas, "sequence" imported sequences, "captioned" images
# with captions, None synthetic
SETUPS: dict[str, tuple[str | None, dict]] = {
    "additive_ae": ("image", SLOT),
    "slot_attention": ("image", SLOT),
    "align_maxent": ("image", {}),
    "barlow_twins": ("image", {}),
    "byol": ("image", {}),
    "infonce": ("image", {}),
    "lp_infonce": ("image", {}),
    "vicreg": ("image", {}),
    "supervised": ("image", {"views": "labels"}),
    "moco_v2": ("image", {"objective_args": {"queue_size": 16}}),
    "vae": ("image", {}),
    "beta_vae": ("image", {}),
    "cr_vae": ("image", {}),
    "simvae": ("image", {}),
    "crl_tac": ("image", {"views": "learned_crop", "encoder": "tac_cnn"}),
    "multimodal_infonce": ("captioned", {"views": "image_text"}),
    "clip": ("captioned", {"views": "image_text"}),
    "citris_vae": ("sequence", {"views": "next_frame_targets", "out_dim": 8}),
    "ivae_temporal": ("sequence", {"views": "next_frame_targets"}),
    "gin_nll": (None, {"data": "synthetic", "views": "synthetic", "encoder": "gin", "out_dim": 10, "batch_size": 16,
                       "encoder_args": {"blocks": 2}, "source": {"kind": "gmm_sets", "augment_dims": [0, 1]}}),
    "multimodal_lp_infonce": (None, {"data": "synthetic", "views": "synthetic", "encoder": "mlp", "out_dim": 2,
                                     "batch_size": 16, "encoder_args": {"hidden": [16]},
                                     "source": {"kind": "multimodal", "content": 2, "style": 2, "specific": 2}}),
}


def test_the_table_covers_every_registered_objective():
    """A new objective joins this test (and so proves its resume) by joining SETUPS."""
    assert set(SETUPS) == set(OBJECTIVES.names())


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A 64-digit canvas store (14 px digits on 28 px canvases), 8 imported sequences of 6 16-px frames and 24
    captioned 16 px multimodal3dident images."""
    from test_next_frame import citris_file

    from ident3d.ingest.datasets import _subset, canvas, digits, write_dataset_store
    from ident3d.ingest.temporal_npz import import_temporal

    root = tmp_path_factory.mktemp("resume_all")
    image = write_dataset_store(canvas(_subset(digits(14), slice(0, 64)), 0), root / "image.zarr")
    rng = np.random.default_rng(3)
    citris_file(root / "seq.npz", n=48, imgs=rng.integers(0, 256, (48, 16, 16, 3), dtype=np.uint8))
    import_temporal(root / "seq.npz", root / "seq.zarr", length=6, sequences_per_chunk=2, progress=False)
    from ident3d.render import render_store

    assert render_store(root / "mm.zarr", scene="multimodal3dident", n=24, settings={"resolution": 16, "samples": 1},
                        workers=1, progress=False).ok
    return {"image": str(image), "sequence": str(root / "seq.zarr"), "captioned": str(root / "mm.zarr")}


def crash_at(step: int):
    """A step generator that dies at ``step`` the way a killed process stops: mid-run, after a checkpoint."""
    import ident3d.training.trainer as trainer

    real = trainer.view_generator

    def dying(seed: int, at: int, rank: int = 0) -> torch.Generator:
        if at == step:
            raise KeyboardInterrupt
        return real(seed, at, rank)
    return dying


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_killed_and_resumed_equals_uninterrupted(name, stores, tmp_path, monkeypatch):
    import ident3d.training.trainer as trainer

    store, fields = SETUPS[name]
    base = TrainConfig(data=stores[store] if store else "", objective=name, views="crop_large+colour", encoder="cnn",
                       out_dim=6, steps=4, batch_size=8, lr=1e-3, seed=0, checkpoint_every=2, log_every=1,
                       device="cpu")
    cfg = replace(base, **fields)
    torch.manual_seed(123)  # what ran before in this process must not matter
    train(cfg, tmp_path / "full", progress=False)
    with monkeypatch.context() as m:
        m.setattr(trainer, "view_generator", crash_at(3))
        with pytest.raises(TrainingInterrupted):
            train(cfg, tmp_path / "part", progress=False)
    assert torch.load(tmp_path / "part" / "checkpoint.pt", weights_only=False)["step"] == 2
    torch.manual_seed(456)  # a fresh process: the global generator in another state
    train(cfg, tmp_path / "part", resume=True, progress=False)
    a = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=False)
    b = torch.load(tmp_path / "part" / "checkpoint.pt", weights_only=False)
    assert a["step"] == b["step"] == 4 and a["model"].keys() == b["model"].keys()
    differ = [k for k, v in a["model"].items() if torch.is_tensor(v) and not torch.equal(v, b["model"][k])]
    assert not differ, differ
