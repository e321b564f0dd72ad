"""Paper 005's numerical simulation on the synthetic engine: the ``multimodal`` source (two distinct invertible
mechanisms, the perturbed style, fresh negatives), the ``multimodal_lp_infonce`` loss against a plain per-anchor loop,
the per-modality block scores, and configs/synthetic/paper005.yaml through the engine for a few steps."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from ident3d.causal.errors import UserError
from ident3d.evaluation.synthetic import modality_scores
from ident3d.pipelines.kinds.synthetic import load_config, run_synthetic
from ident3d.training.objectives import OBJECTIVES
from ident3d.training.objectives.multimodal_infonce_vec import multimodal_lp_infonce
from ident3d.training.synthetic.sources import make_source

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "synthetic" / "paper005.yaml"


def source(batch: int = 256, seed: int = 0, **opts):
    return make_source({"kind": "multimodal", **opts}, batch, seed, "cpu")


def test_views_latents_and_two_distinct_invertible_mixings():
    s = source()
    b = s.batch(0)
    assert s.n_views == 4 and s.modalities == 2 and s.obs_dim == 15
    assert {k: tuple(v.shape) for k, v in b.items()} == {**{f"x{i}": (256, 15) for i in range(4)}, "latents": (256, 25)}
    assert list(s.latent_groups) == ["content", "style", "style~", "m1", "m2"]
    z = dict(zip(s.latent_groups, b["latents"].split(5, dim=1), strict=True))
    z1, z2 = s.f1.inverse(b["x0"]), s.f2.inverse(b["x1"])  # each mechanism inverted exactly
    assert torch.allclose(z1, torch.cat([z["content"], z["style"], z["m1"]], 1), atol=1e-4)
    assert torch.allclose(z2, torch.cat([z["content"], z["style~"], z["m2"]], 1), atol=1e-4)
    assert not torch.allclose(s.f1.weights, s.f2.weights)  # two distinct mechanisms ...
    assert (s.f1(z1) - s.f2(z1)).abs().mean() > 0.1  # ... that map the same latents apart
    n1, n2 = s.f1.inverse(b["x2"]), s.f2.inverse(b["x3"])  # the negatives: a fresh pair, content shared within it
    assert torch.allclose(n1[:, :5], n2[:, :5], atol=1e-4) and (n1[:, :5] - z1[:, :5]).abs().mean() > 0.5
    shared = source(shared_mixing=True)
    assert torch.equal(shared.f1.weights, shared.f2.weights)


def test_style_changes_with_probability_p_and_batches_are_a_pure_function_of_seed_and_step():
    for p in (0.0, 0.25, 1.0):
        z = source(4000, p_change=p).batch(3)["latents"]
        rate = (z[:, 5:10] != z[:, 10:15]).float().mean().item()
        assert abs(rate - p) < 0.02, (p, rate)
    a, b = source(seed=1).batch(7), source(seed=1).batch(7)
    assert all(torch.equal(a[k], b[k]) for k in a) and not torch.equal(a["x0"], source(seed=1).batch(8)["x0"])
    dependent = source(4000, causal=True, statistical=True)
    z = dependent.batch(0)["latents"].numpy()
    fit = np.linalg.lstsq(np.c_[z[:, :5], np.ones(4000)], z[:, 5:10], rcond=None)[0]
    assert np.abs(fit[:5]).max() > 0.3  # style depends on content
    sigma = dependent.chol["content"] @ dependent.chol["content"].T  # one Sigma per block size, as the paper's code
    assert all(torch.equal(dependent.chol[b], dependent.chol["content"]) for b in ("style", "change", "m1", "m2"))
    assert np.allclose(np.cov(z[:, 20:25].T), sigma.numpy(), rtol=0.15, atol=0.3)  # m2 ~ N(0, Sigma)
    xs, z = source(specific=0, style=2).eval_modalities(50, seed=2)
    assert [tuple(x.shape) for x in xs] == [(50, 7), (50, 7)] and z.shape == (50, 9)


def test_bad_options_are_one_line_errors():
    with pytest.raises(UserError, match="option p_change must be a finite number in \\[0, 1\\], got 2"):
        source(p_change=2)
    with pytest.raises(UserError, match="option content must be a whole number >= 1, got 0"):
        source(content=0)
    with pytest.raises(UserError, match="has no option 'contents'"):
        source(contents=3)


def plain_loss(h1, h2, n1, n2, p: float, tau: float, alpha: float) -> float:
    """The paper's code's loss written per anchor with Python floats: for each direction, anchor a_i, positive b_i
    and negatives n_k of the anchor's modality, 2 [alpha pos / tau + (1 - alpha) log mean exp(-[neg..., pos] / tau)],
    averaged over anchors, then over the two directions."""
    def dist(u, v) -> float:
        return sum(abs(float(x) - float(y)) ** p for x, y in zip(u, v, strict=True))

    def direction(a, b, n) -> float:
        total = 0.0
        for i in range(len(a)):
            pos = dist(a[i], b[i])
            terms = [-dist(a[i], n[k]) / tau for k in range(len(n))] + [-pos / tau]
            top = max(terms)
            log_mean = top + math.log(sum(math.exp(t - top) for t in terms) / len(terms))
            total += 2 * (alpha * pos / tau + (1 - alpha) * log_mean)
        return total / len(a)

    return 0.5 * (direction(h1, h2, n1) + direction(h2, h1, n2))


@pytest.mark.parametrize("p, tau, alpha", [(2.0, 1.0, 0.5), (1.0, 0.5, 0.3)])
def test_loss_equals_a_plain_per_anchor_loop(p, tau, alpha):
    g = torch.Generator().manual_seed(4)
    h1, h2, n1, n2 = (torch.randn(6, 3, generator=g, dtype=torch.float64) * 2 for _ in range(4))
    loss, pos, _ = multimodal_lp_infonce(h1, h2, n1, n2, p=p, tau=tau, alpha=alpha)
    assert loss.item() == pytest.approx(plain_loss(h1, h2, n1, n2, p, tau, alpha), rel=1e-10)
    assert pos.item() == pytest.approx(((h1 - h2).abs() ** p).sum(1).mean().item(), rel=1e-12)
    # negative controls: the other modality's negatives, or SimCLR's sum instead of the mean, give other values
    swapped = multimodal_lp_infonce(h1, h2, n2, n1, p=p, tau=tau, alpha=alpha)[0].item()
    assert abs(swapped - plain_loss(h1, h2, n1, n2, p, tau, alpha)) > 1e-3
    summed = plain_loss(h1, h2, n1, n2, p, tau, alpha) + 2 * (1 - alpha) * math.log(7)
    assert abs(loss.item() - summed) > 1e-3


def test_objective_has_an_encoder_per_modality_unless_shared():
    from ident3d.training.encoders import build_encoder

    torch.manual_seed(0)
    obj = OBJECTIVES.get("multimodal_lp_infonce")(build_encoder("mlp", 3, 0, in_dim=4, hidden=[8]))
    x = torch.randn(5, 4)
    assert not torch.allclose(obj.modality_representation(x, 0), obj.modality_representation(x, 1))
    assert torch.equal(obj.representation(x), obj.modality_representation(x, 0))
    out = obj([torch.randn(5, 4) for _ in range(4)])
    out["loss"].backward()
    assert all(p.grad is not None for p in obj.parameters())
    shared = OBJECTIVES.get("multimodal_lp_infonce")(build_encoder("mlp", 3, 0, in_dim=4, hidden=[8]),
                                                     shared_encoder=True)
    assert torch.equal(shared.modality_representation(x, 0), shared.modality_representation(x, 1))
    assert len(list(shared.parameters())) == len(list(obj.parameters())) // 2


def test_modality_scores_read_each_block_from_each_modality():
    rng = np.random.default_rng(0)
    names, groups = ["c1", "c2", "m1", "m2"], {"content": ["c1", "c2"], "m1": ["m1"], "m2": ["m2"]}
    z_fit, z_test = rng.normal(size=(400, 4)), rng.normal(size=(400, 4))
    # modality 1 encodes content and m1; modality 2 content only, through exp (linear R^2 below the kernel's)
    enc = [lambda z: z[:, [0, 1, 2]], lambda z: np.c_[np.exp(z[:, :2]), rng.normal(size=len(z))]]
    out = modality_scores([e(z_fit) for e in enc], z_fit, [e(z_test) for e in enc], z_test, names, groups,
                          kernel=True, kernel_max=300)
    assert set(out) == {f"{kind}_r2/x{k}/{g}" for kind in ("linear", "kernel") for k in (1, 2) for g in groups}
    assert out["linear_r2/x1/content"] > 0.99 and out["linear_r2/x1/m1"] > 0.99 and out["linear_r2/x1/m2"] < 0.05
    assert out["kernel_r2/x2/content"] > 0.9 > out["linear_r2/x2/content"]
    assert out["kernel_r2/x2/m1"] < 0.05 and out["kernel_r2/x2/m2"] < 0.05


def test_the_config_runs_through_the_engine_and_tabulates_every_block_of_each_modality(tmp_path):
    cfg = load_config(CONFIG, overrides=("train.steps=3", "train.batch_size=32", "evaluate.fit=120",
                                         "evaluate.score=120", "seeds=[0]"))
    assert [row.name for row in cfg.rows][:2] == ["independent, p=1.0", "stat+causal, p=0.75"]
    table = run_synthetic(cfg, tmp_path / "out", rows=["independent_p_1_0"], progress=False, figures=False,
                          device="cpu")
    row = table["rows"]["independent, p=1.0"]
    blocks = ["content", "style", "style~", "m1", "m2"]
    assert set(row["stats"]) == {f"{kind}_r2/x{k}/{b}" for kind in ("linear", "kernel") for k in (1, 2)
                                 for b in blocks} | {"train_seconds"}
    assert row["met"] in (True, False)  # judged: every expected column was scored
    config = json.loads((tmp_path / "out/cells/independent_p_1_0/seed_0/config.json").read_text())
    assert config["objective"] == "multimodal_lp_infonce" and config["source"]["kind"] == "multimodal"
