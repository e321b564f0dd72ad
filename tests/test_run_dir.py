"""The run directory has one owner (``ident3d.training.run_dir``): it decides new run vs resume with the compatibility
check for `train` and for every grid cell, loads runs for every evaluator, and types the data a run trains on."""

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from test_hparams import TINY_SYNTHETIC

from ident3d.causal.errors import UserError
from ident3d.training.config import TrainConfig
from ident3d.training.run_dir import RunDir, StoreData, SyntheticData, data_spec


def test_data_spec_types_the_data():
    assert data_spec(TrainConfig(data="synthetic", source={"kind": "latent_pairs"})) == \
        SyntheticData({"kind": "latent_pairs"})
    spec = data_spec(TrainConfig(data="/x/s.zarr", split="train:0.9", allow_partial=True))
    assert spec == StoreData("/x/s.zarr", "train:0.9", True) and spec.kind == "store"


def test_start_new_resume_and_refuse(tmp_path):
    run = RunDir(tmp_path / "run")
    cfg = TrainConfig(data="synthetic", views="synthetic", lr=0.01)
    assert run.start(cfg, resume=False) is False  # nothing there: a new run
    run.path.mkdir()
    run.config_path.write_text(json.dumps(asdict(cfg)))
    with pytest.raises(UserError, match="already holds a run; pass --resume"):
        run.start(cfg, resume=False)
    assert run.start(TrainConfig(data="synthetic", views="synthetic", lr=0.01, steps=5000), resume=True) is False
    run.checkpoint_path.write_bytes(b"")
    assert run.start(cfg, resume=True) is True  # steps may change, a checkpoint is there: resume
    with pytest.raises(UserError, match=r"cannot resume .*run: lr differ from the saved run"):
        run.start(TrainConfig(data="synthetic", views="synthetic", lr=0.02), resume=True)


def test_load_is_one_line_without_config_or_checkpoint(tmp_path):
    with pytest.raises(UserError, match="is not a run directory"):
        RunDir(tmp_path).load()
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UserError, match="has no checkpoint.pt yet"):
        RunDir(tmp_path).load()


def test_a_synthetic_cell_resumes_only_its_own_run(tmp_path):
    """A grid cell's folder whose saved run differs from the cell's config (edited, or left by other code with the
    same cell key) is refused, not resumed into a mixed run; a matching one resumes and scores."""
    from ident3d.pipelines.kinds.synthetic import check_config, run_cell

    cfg = check_config(json.loads(json.dumps(TINY_SYNTHETIC)), "tiny")
    row = cfg.rows[0]
    cell = tmp_path / "cell"
    first = run_cell(cfg, row, 0, cell, steps=10, device="cpu")
    assert first["linear_r2"] > 0 and (cell / "checkpoint.pt").exists()
    (cell / "scores.json").unlink()
    saved = json.loads((cell / "config.json").read_text())
    again = run_cell(cfg, row, 0, cell, steps=20, device="cpu")  # resumes from step 10 with the same settings
    assert json.loads((cell / "config.json").read_text())["steps"] == 20 and again["linear_r2"] > 0
    (cell / "scores.json").unlink()
    (cell / "config.json").write_text(json.dumps({**saved, "lr": 0.5}))
    with pytest.raises(UserError, match="lr differ from the saved run"):
        run_cell(cfg, row, 0, cell, steps=20, device="cpu")


def test_every_evaluator_loads_runs_through_run_dir():
    """No evaluator reads config.json or a checkpoint itself, and none rebuilds the normalisation."""
    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / "evaluation").glob("*.py")):
        text = path.read_text()
        assert "config.json" not in text and "load_checkpoint" not in text, path.name
        assert "Normalize(tuple(" not in text, path.name  # the normalisation comes from training.run_dir.normalizer
