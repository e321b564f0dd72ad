"""A cell's training and its scoring are keyed apart (``ident3d.pipelines.cells``): a metric's new version, another
metric or another test store re-scores a finished cell from its trained weights and runs no training step; a change
to what is trained trains again; cells keyed before the two keys were apart keep their trained runs."""

import json

import pytest
from test_hparams import TINY_SYNTHETIC

from ident3d.evaluation import metric_base
from ident3d.evaluation.metric_base import METRICS
from ident3d.pipelines.cells import canonical, cell_key, keyed, matches, scoring_key, split_settings
from ident3d.training import trainer


@pytest.fixture
def steps_run(monkeypatch):
    """How many optimiser steps the trainer takes from here on (every training step goes through ``_optimise``)."""
    count = [0]
    real = trainer._optimise

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer, "_optimise", counted)
    return count


def tiny(metrics=None):
    cfg = json.loads(json.dumps(TINY_SYNTHETIC))
    if metrics:
        cfg["metrics"] = metrics
    return cfg, cfg["rows"][0]


def typed(cfg: dict, row: dict) -> tuple:
    """The config (a dict, as a YAML file gives it) and its row, parsed as the engine reads them."""
    from ident3d.pipelines.kinds.synthetic import check_config

    config = check_config(cfg, "tiny")
    return config, next(r for r in config.rows if r.name == row["name"])


def run(cfg, row, cell):
    from ident3d.pipelines.kinds.synthetic import run_cell

    return run_cell(*typed(cfg, row), 0, cell, steps=None, device="cpu")


def synthetic_settings(cfg: dict, row: dict) -> dict:
    from ident3d.pipelines.kinds.synthetic import cell_settings

    return cell_settings(*typed(cfg, row), 0, None)


def weights_and_log(cell):
    return (cell / "checkpoint.pt").read_bytes(), (cell / "metrics.jsonl").read_text()


def test_a_new_metric_version_rescores_a_finished_cell_without_training(tmp_path, monkeypatch, steps_run):
    cfg, row = tiny(["mig"])
    cell = tmp_path / "cell"
    first = run(cfg, row, cell)
    assert steps_run[0] == 40
    before = weights_and_log(cell)
    assert run(cfg, row, cell) == first and steps_run[0] == 40  # same keys: the saved scores, nothing run
    # a corrected metric: its version goes up, and the finished cell is scored again from its weights
    monkeypatch.setattr(METRICS.get("mig"), "version", METRICS.get("mig").version + 1)
    rescored = run(cfg, row, cell)
    assert steps_run[0] == 40, "re-scoring trained again"
    assert weights_and_log(cell) == before
    assert rescored["scoring_key"] != first["scoring_key"]
    assert json.loads((cell / "scores.json").read_text())["scoring_key"] == rescored["scoring_key"]
    assert rescored["linear_r2"] == first["linear_r2"]  # the same weights give the same numbers


def test_changing_the_builtin_scores_or_the_metrics_rescores_and_changing_training_retrains(tmp_path, monkeypatch,
                                                                                         steps_run):
    cfg, row = tiny()
    cell = tmp_path / "cell"
    run(cfg, row, cell)
    monkeypatch.setattr(metric_base, "BUILTIN_SCORES_VERSION", metric_base.BUILTIN_SCORES_VERSION + 1)
    run(cfg, row, cell)
    assert steps_run[0] == 40
    cfg_m, row_m = tiny(["sap"])
    scores = run(cfg_m, row_m, cell)
    assert steps_run[0] == 40 and "sap/sap" in scores
    cfg_m["evaluate"]["fit"] = 400  # evaluation settings shape only the scores
    run(cfg_m, row_m, cell)
    assert steps_run[0] == 40
    cfg_m["train"]["lr"] = 0.002  # what is trained: the old cell is set aside and the cell trains again
    run(cfg_m, row_m, cell)
    assert steps_run[0] == 80 and (tmp_path / "cell.stale-1" / "checkpoint.pt").exists()


def test_a_cell_keyed_before_training_and_scoring_were_apart_keeps_its_run(tmp_path, steps_run):
    """A cell.json recorded with one key over everything (training, evaluation, metrics) is re-keyed by its
    training settings: its run is kept (no step), its scores are made again (they have no scoring key)."""
    cfg, row = tiny(["mig"])
    cell = tmp_path / "cell"
    run(cfg, row, cell)
    before = weights_and_log(cell)
    full = keyed(synthetic_settings(cfg, row))
    (cell / "cell.json").write_text(json.dumps({"key": cell_key(full), "settings": json.loads(canonical(full))}))
    scores = json.loads((cell / "scores.json").read_text())
    del scores["scoring_key"]
    (cell / "scores.json").write_text(json.dumps(scores))
    again = run(cfg, row, cell)
    assert steps_run[0] == 40 and weights_and_log(cell) == before and not (tmp_path / "cell.stale-1").exists()
    assert again["scoring_key"] == scoring_key(synthetic_settings(cfg, row))
    assert json.loads((cell / "cell.json").read_text())["key"] == cell_key(keyed(split_settings(full)[0]))
    # a legacy cell whose *training* differs is still set aside
    full_other = json.loads(canonical(full))
    full_other["train"]["lr"] = 0.5
    (cell / "cell.json").write_text(json.dumps({"key": cell_key(full_other), "settings": full_other}))
    assert not matches(cell, synthetic_settings(cfg, row))


def test_compare_keys_put_test_stores_evaluation_and_metrics_in_scoring_only(monkeypatch):
    import yaml
    from test_synthetic_cells import REPO

    from ident3d.pipelines.kinds.compare import CompareConfig
    from ident3d.pipelines.kinds.compare import cell_settings as compare_settings
    from ident3d.training.hparams import parse_config

    def cell_settings(raw: dict, row: int, seed: int, stores: dict) -> dict:
        config = parse_config(CompareConfig, raw, "x")
        return compare_settings(config, config.rows[row], seed, stores)

    cfg = yaml.safe_load((REPO / "configs/da_vs_lt_small.yaml").read_text())
    row, stores = 0, {"train": "sha-train", "test": "sha-test"}
    base = cell_settings(cfg, row, 0, stores)
    training = cell_key(split_settings(base)[0])
    for changed in (cell_settings(cfg, row, 0, {**stores, "test": "another"}),
                    cell_settings({**cfg, "metrics": ["mig"]}, row, 0, stores),
                    cell_settings({**cfg, "evaluate": {"fit": 100, "score": 100, "kernel": False}}, row, 0, stores)):
        assert cell_key(split_settings(changed)[0]) == training
        assert scoring_key(changed) != scoring_key(base)
    other_train = cell_settings(cfg, row, 0, {**stores, "train": "another"})
    assert cell_key(split_settings(other_train)[0]) != training
    with_metric = cell_settings({**cfg, "metrics": ["mig"]}, row, 0, stores)
    bumped = scoring_key(with_metric)
    monkeypatch.setattr(METRICS.get("mig"), "version", METRICS.get("mig").version + 1)
    assert scoring_key(with_metric) != bumped and cell_key(split_settings(with_metric)[0]) == training


def test_a_compare_cell_runs_only_the_train_section_its_key_was_made_from(tmp_path):
    """A compare cell is run from the settings its folder is keyed by; a train section that resolves to other
    settings (here 7 steps instead of the config's) is refused before anything is written, the keyed one is not."""
    import yaml
    from test_synthetic_cells import REPO

    from ident3d.pipelines.kinds.compare import CompareConfig, cell_settings, row_train, run_cell
    from ident3d.training.hparams import parse_config

    cfg = parse_config(CompareConfig, yaml.safe_load((REPO / "configs/da_vs_lt_small.yaml").read_text()), "x")
    row = cfg.rows[0]
    settings = cell_settings(cfg, row, 0, {"train": "sha-train", "test": "sha-test"})
    with pytest.raises(RuntimeError, match="does not resolve to the settings it is keyed by"):
        run_cell("missing.zarr", "missing.zarr", str(tmp_path / "cell"), {**row_train(cfg, row), "steps": 7}, settings)
    assert not (tmp_path / "cell").exists()
    with pytest.raises(Exception) as exc:  # the keyed section passes the guard and goes on to the (missing) store
        run_cell("missing.zarr", "missing.zarr", str(tmp_path / "cell"), row_train(cfg, row), settings)
    assert "does not resolve" not in str(exc.value)
