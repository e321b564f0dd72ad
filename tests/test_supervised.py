"""The supervised ceiling (issue 21): the loss against the formula, a real 3DIdent store on which it recovers the
object's position (and a shuffled-label control on which it cannot), its pairing with the labels view maker, and
synthetic data."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
import zarr

from ident3d.training.objectives.supervised import latent_targets, supervised_loss


def test_loss_equals_the_formula_written_as_a_loop():
    g = torch.Generator().manual_seed(0)
    out, z = torch.randn(5, 7, generator=g), torch.randn(5, 4, generator=g) * 3 + 1
    classes = torch.tensor([0, 2, 1, 2, 0])
    stats = latent_targets(z.numpy())
    mean, std = torch.tensor(stats["latent_mean"]), torch.tensor(stats["latent_std"])
    got = supervised_loss(out, z, classes, mean, std, n_classes=3, class_weight=0.5)
    mse = sum((out[i, j] - (z[i, j] - mean[j]) / std[j]) ** 2 for i in range(5) for j in range(4)) / 20
    ce = sum(-(out[i, 4 + classes[i]] - torch.logsumexp(out[i, 4:7], 0)) for i in range(5)) / 5
    assert got["loss"].item() == pytest.approx((mse + 0.5 * ce).item(), rel=1e-5)
    assert got["accuracy"].item() == pytest.approx(float(np.mean([out[i, 4:].argmax() == classes[i]
                                                                   for i in range(5)])))
    no_class = supervised_loss(out, z, classes, mean, std, n_classes=0, class_weight=0.5)
    assert no_class["loss"].item() == pytest.approx(mse.item(), rel=1e-5) and "ce" not in no_class


def test_standardised_targets_have_zero_mean_unit_std():
    z = np.random.default_rng(0).normal(5.0, [1.0, 10.0, 0.0], size=(1000, 3))
    s = latent_targets(z)
    assert s["latent_mean"] == pytest.approx([5.0, 5.0, 5.0], abs=0.7) and s["latent_std"][2] == 1e-6
    zs = (z - np.array(s["latent_mean"])) / np.array(s["latent_std"])
    assert zs[:, :2].std(0) == pytest.approx([1, 1], abs=1e-3)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A 3DIdent train store (640 images at 32 px), its shuffled-label copy and a test store."""
    from ident3d.render import render_store

    d = tmp_path_factory.mktemp("ceiling")
    common = {"scene": "3dident", "settings": {"resolution": 32, "samples": 4}, "chunk_size": 64, "workers": 1,
              "progress": False}
    assert render_store(d / "train.zarr", n=640, seed=0, **common).ok
    assert render_store(d / "test.zarr", n=480, seed=1, **common).ok
    shutil.copytree(d / "train.zarr", d / "shuffled.zarr")
    latents = zarr.open_group(d / "shuffled.zarr", mode="r+")["latents"]
    latents[:] = latents[:][np.random.default_rng(0).permutation(latents.shape[0])]
    return d


def _ceiling(store, test, out):
    from ident3d.evaluation.run_report import evaluate_run
    from ident3d.training.trainer import TrainConfig, train

    cfg = TrainConfig(data=str(store), objective="supervised", views="labels", encoder="cnn", out_dim=10, steps=300,
                      batch_size=64, lr=2e-3, seed=0, checkpoint_every=300, log_every=50)
    train(cfg, out, progress=False)
    return evaluate_run(str(out), str(test), n_fit=160, n_score=320, kernel=False)["layers"]["output"]["r2_linear"]


def test_ceiling_recovers_the_position_and_shuffled_labels_do_not(stores, tmp_path):
    r2 = _ceiling(stores / "train.zarr", stores / "test.zarr", tmp_path / "ceiling")
    shuffled = _ceiling(stores / "shuffled.zarr", stores / "test.zarr", tmp_path / "shuffled")
    position = ("pos_x", "pos_y", "pos_z")
    assert np.mean([r2[k] for k in position]) > 0.9, r2
    assert max(shuffled[k] for k in position) < 0.3, shuffled


def test_supervised_pairs_only_with_labels(stores, tmp_path):
    from helpers import run_cli

    r = run_cli("train", "--data", str(stores / "train.zarr"), "--objective", "supervised", "--views", "colour",
                "--out", str(tmp_path / "r"), "--steps", "2")
    assert r.returncode == 2 and "use --views labels" in r.stderr and not (tmp_path / "r").exists()
    r = run_cli("train", "--data", str(stores / "train.zarr"), "--objective", "infonce", "--views", "labels",
                "--out", str(tmp_path / "r"), "--steps", "2")
    assert r.returncode == 2 and "feeds only --objective supervised" in r.stderr


def test_supervised_on_a_synthetic_source_recovers_its_latents(tmp_path):
    from ident3d.evaluation.synthetic import evaluate_synthetic
    from ident3d.training.trainer import TrainConfig, train

    cfg = TrainConfig(data="synthetic", objective="supervised", encoder="mlp", out_dim=6, steps=500, batch_size=256,
                      lr=3e-3, seed=0, checkpoint_every=500, log_every=100, views="labels",
                      source={"kind": "latent_pairs", "space": "box", "dim": 6, "conditional": "normal",
                              "mixing_layers": 2})
    train(cfg, tmp_path / "syn", progress=False)
    assert evaluate_synthetic(tmp_path / "syn", n_fit=2000, n_score=2000)["linear_r2"] > 0.9


def test_compare_adds_the_ceiling_row_and_reads_gaps_against_it():
    from ident3d.causal.yamlnum import load_yaml
    from ident3d.evaluation.ceiling import ceiling_fractions, verdict
    from ident3d.pipelines.kinds.compare import CEILING_ROW, check_config, load_config, side_by_side

    cfg = load_config("configs/da_vs_lt_small.yaml")
    assert cfg.rows[-1] == CEILING_ROW and len(cfg.rows) == 13
    raw = load_yaml(open("configs/da_vs_lt_small.yaml").read())
    off = check_config({**raw, "ceiling": False, "rows": raw["rows"][:2]}, "x")
    assert [r.name for r in off.rows] == [r.name for r in cfg.rows[:2]]  # no ceiling row
    table = {"A": {"c1": (0.4, 0.0), "c2": (0.2, 0.0)}, CEILING_ROW.name: {"c1": (0.8, 0.0), "c2": (0.0, 0.0)}}
    frac = ceiling_fractions(table, CEILING_ROW.name)
    assert frac["A"]["c1"] == pytest.approx(0.5) and np.isnan(frac["A"]["c2"]) and list(frac) == ["A"]
    # ours 0.4 vs paper 0.9: the ceiling (0.8) is below the paper -> bounded; ceiling 0.95 -> open (the method's)
    assert verdict(0.4, 0.9, 0.5) == "bounded" and verdict(0.4, 0.9, 0.95) == "open"
    assert verdict(0.85, 0.9, 0.2) == "=" and verdict(1.0, 0.5, 1.0) == "+" and verdict(0.1, float("nan"), 1) == ""
    from ident3d.evaluation.report import PAPER_COLUMNS

    cols = list(PAPER_COLUMNS)
    grid = {r.name: {c: (0.3, 0.0) for c in cols} for r in cfg.rows}
    grid[CEILING_ROW.name] = {c: (0.35, 0.0) for c in cols}
    text = side_by_side(cfg, grid)
    assert "| supervised (ceiling) | 0.35 |" in text and "0.30 / 1.00 bounded" in text and "0.30 / 0.28 =" in text


def test_a_fraction_is_shown_only_where_the_ceiling_clears_chance():
    """Issue 32.13: rotations' ceiling of 0.06 gave "1.00"; a fraction needs the ceiling 0.2 above chance (R^2 0,
    accuracy 1 / classes), else a dash and a footnote."""
    from ident3d.evaluation.ceiling import ceiling_fractions, chance_levels, fraction_markdown

    table = {"A": {"Class": (0.30, 0.0), "rotations": (0.06, 0.0), "positions": (0.5, 0.0)},
             "ceiling": {"Class": (0.34, 0.0), "rotations": (0.06, 0.0), "positions": (0.8, 0.0)}}
    chance = chance_levels(list(table["A"]), 7)
    assert chance == {"Class": pytest.approx(1 / 7), "rotations": 0.0, "positions": 0.0}
    frac = ceiling_fractions(table, "ceiling", chance)
    assert np.isnan(frac["A"]["Class"]) and np.isnan(frac["A"]["rotations"])  # 0.34 < 1/7 + 0.2; 0.06 < 0.2
    assert frac["A"]["positions"] == pytest.approx(0.625)
    assert ceiling_fractions(table, "ceiling", chance_levels(list(table["A"]), 50))["A"]["Class"] == pytest.approx(
        0.30 / 0.34)  # 50 classes: chance 0.02, the ceiling clears it
    md = fraction_markdown(frac, table["ceiling"])
    assert "| A | - | - | 0.62 |" in md and "less than 0.2 above chance" in md
