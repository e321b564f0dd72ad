"""Paper 003 pieces: RealNVP mixing, GIN (volume preservation checked by autograd), the set NLL, the
Gaussian-mixture and EMNIST set sources, the std spectrum read-out, and a short training that recovers
the informative latents."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from ident3d.causal.errors import UserError
from ident3d.evaluation.spectrum import std_spectrum, top_dim_correlations
from ident3d.training.encoders import build_encoder
from ident3d.training.flows import GIN, GINCoupling, GINEncoder, RealNVPMixing
from ident3d.training.objectives.gin_nll import GINNLL
from ident3d.training.synthetic.gin_data import EMNISTSets, GaussianMixtureSets, emnist_standin, epoch_indices


def _randomize(module: nn.Module, seed: int = 0, scale: float = 0.5) -> nn.Module:
    """Overwrite every parameter with N(0, scale^2) draws so a flow is far from its identity init."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale)
    return module


def test_realnvp_mixing_inverts_is_nonlinear_frozen_and_seeded():
    z = torch.randn(4000, 10, generator=torch.Generator().manual_seed(0)) * 2
    mixing = RealNVPMixing(10, blocks=8, seed=3)
    x = mixing(z)
    assert (mixing.inverse(x) - z).abs().max() < 1e-4
    zc = np.c_[z.numpy(), np.ones(len(z))]
    coef, *_ = np.linalg.lstsq(zc, x.numpy(), rcond=None)
    resid = ((x.numpy() - zc @ coef) ** 2).sum(0) / ((x.numpy() - x.numpy().mean(0)) ** 2).sum(0)
    assert resid.max() > 0.05  # some observed dim is far from any linear function of z
    assert not any(p.requires_grad for p in mixing.parameters())
    assert torch.equal(RealNVPMixing(10, blocks=8, seed=3)(z), x)
    assert not torch.allclose(RealNVPMixing(10, blocks=8, seed=4)(z), x)


def test_gin_log_det_is_exactly_zero_and_jacobian_determinant_is_one():
    gin = _randomize(GIN(6, blocks=3, hidden=(8,)), scale=0.3).double()
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert torch.equal(gin.log_det(x), torch.zeros(5, dtype=torch.float64))
    for flow, d in ((gin, 6), (_randomize(GINCoupling(5, hidden=(8,)), seed=2).double(), 5)):
        for row in x[:3, :d]:
            jac = torch.autograd.functional.jacobian(lambda v, f=flow: f(v.unsqueeze(0)).squeeze(0), row)
            assert abs(abs(torch.linalg.det(jac).item()) - 1) < 1e-4  # |det| = 1 (permutations may flip the sign)
            assert (jac - torch.eye(d, dtype=torch.float64)).abs().max() > 0.1  # not a trivial map
    _, log_det = gin.forward_with_log_det(x)
    assert log_det.abs().max() < 1e-12


def test_gin_inverse_is_exact():
    gin = _randomize(GIN(10, blocks=8), seed=3, scale=0.2)
    x = torch.randn(500, 10, generator=torch.Generator().manual_seed(2))
    assert (gin.inverse(gin(x)) - x).abs().max() < 1e-5


def test_gin_encoder_registered_and_checks_dims():
    enc = build_encoder("gin", 10, 0, in_dim=10, blocks=2)
    assert isinstance(enc, GINEncoder) and enc.input_kind == "vector"
    x = torch.randn(4, 10)
    assert torch.equal(enc(x).sort(dim=1).values, x.sort(dim=1).values)  # identity init up to a permutation
    for bad in (dict(out_dim=3, in_dim=10), dict(out_dim=10, in_dim=10, constraint="sphere")):
        with pytest.raises(UserError) as err:
            GINEncoder(**bad)
        assert "\n" not in str(err.value)


class _Identity(nn.Module):
    """A stand-in invertible encoder: h = x, with a constant log-determinant."""

    def __init__(self, log_det: float = 0.0):
        super().__init__()
        self.value = log_det

    def forward(self, x):
        return x

    def log_det(self, x):
        return torch.full((x.shape[0],), self.value)


def _hand_nll(views: list[list[list[float]]], eps: float) -> float:
    """The set NLL written out with plain loops: views[k][i][d]."""
    k_n, b_n, d_n = len(views), len(views[0]), len(views[0][0])
    total = 0.0
    for i in range(b_n):
        for d in range(d_n):
            vals = [views[k][i][d] for k in range(k_n)]
            mu = sum(vals) / k_n
            var = sum((v - mu) ** 2 for v in vals) / k_n + eps
            total += sum((v - mu) ** 2 / (2 * var) + 0.5 * math.log(var) + 0.5 * math.log(2 * math.pi) for v in vals)
    return total / (k_n * b_n)


def test_gin_nll_matches_a_hand_computation_for_any_set_size():
    views = [[[0.0, 1.0], [2.0, -1.0]], [[1.0, 1.5], [2.5, 0.0]], [[2.0, 3.0], [1.0, 4.0]]]  # K=3, B=2, D=2
    t = [torch.tensor(v) for v in views]
    out = GINNLL(_Identity(), eps=1e-8)(t)
    assert out["loss"].item() == pytest.approx(_hand_nll(views, 1e-8), rel=1e-5)
    assert out["set_log_std"].item() == pytest.approx(np.mean(0.5 * np.log(np.var(np.array(views), axis=0))), rel=1e-5)
    shifted = GINNLL(_Identity(log_det=0.7), eps=1e-8)(t)
    assert shifted["loss"].item() == pytest.approx(out["loss"].item() - 0.7, rel=1e-5)
    two = GINNLL(_Identity(), eps=1e-8)(t[:2])
    assert two["loss"].item() == pytest.approx(_hand_nll(views[:2], 1e-8), rel=1e-5)
    with pytest.raises(UserError):
        GINNLL(_Identity())(t[:1])
    with pytest.raises(UserError):
        GINNLL(nn.Linear(2, 2))


def test_epochs_visit_every_point_once():
    perm = lambda e: torch.randperm(10, generator=torch.Generator().manual_seed(e))  # noqa: E731
    rows = torch.cat([epoch_indices(b, 4, 10, perm) for b in range(5)])
    assert sorted(rows[:10].tolist()) == list(range(10)) and sorted(rows[10:20].tolist()) == list(range(10))


def test_gaussian_mixture_sets_are_deterministic_and_augment_only_chosen_dims():
    src = GaussianMixtureSets(64, seed=0, n_points=500)
    b3 = src.batch(3)
    assert set(b3) == {*(f"x{k}" for k in range(10)), "latents"} and b3["x0"].shape == (64, 10)
    again = GaussianMixtureSets(64, seed=0, n_points=500).batch(3)
    assert all(torch.equal(b3[k], again[k]) for k in b3)
    assert not torch.equal(src.batch(4)["x0"], b3["x0"])
    assert not torch.equal(GaussianMixtureSets(64, seed=1, n_points=500).batch(3)["x0"], b3["x0"])
    for aug in ((0,), (0, 1)):
        s = GaussianMixtureSets(32, seed=2, n_points=200, augment_dims=aug, set_size=4)
        z, zs = s.view_latents(5)
        moved = (zs - z).abs().amax(dim=(0, 1))
        assert (moved[list(aug)] > 0.5).all() and (moved[len(aug):] == 0).all()
        x = s.batch(5)
        assert s.n_views == 4 and torch.equal(x["latents"], z)
        assert torch.allclose(x["x2"], s.mixing(zs[2]))
    noisy = GaussianMixtureSets(64, seed=0, n_points=500, data_noise=0.01).batch(3)
    diff = noisy["x1"] - b3["x1"]
    assert 0.005 < diff.std().item() < 0.02
    with pytest.raises(UserError):
        GaussianMixtureSets(8, augment_dims=(10,))


def test_spectrum_and_top_dim_correlations():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2000, 3))
    h = np.c_[0.01 * rng.normal(size=2000), -3 * z[:, 1], 0.1 * z[:, 2], 2 * z[:, 0] + 0.1 * rng.normal(size=2000)]
    std, order = std_spectrum(h)
    assert order.tolist() == [1, 3, 2, 0] and np.all(np.diff(std) <= 0)
    r = top_dim_correlations(h, z, k=2)
    assert r["dims"] == [1, 3] and r["match"] == {0: 3, 1: 1}
    assert np.array(r["corr"]).shape == (2, 3) and r["mean"] > 0.99


def test_short_training_recovers_the_informative_latents():
    torch.manual_seed(0)
    src = GaussianMixtureSets(256, seed=1, n_points=2000, augment_dims=(0, 1))
    objective = GINNLL(GINEncoder(10, in_dim=10, blocks=4))
    x, z = src.eval_set(2000, seed=1)
    with torch.no_grad():
        before = top_dim_correlations(objective.encoder(x).numpy(), z.numpy())["mean"]
    opt = torch.optim.Adam(objective.parameters(), lr=1e-2)
    for step in range(300):
        batch = src.batch(step)
        loss = objective([batch[f"x{k}"] for k in range(src.n_views)])["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        h = objective.encoder(x).numpy()
    after = top_dim_correlations(h, z.numpy())["mean"]
    assert before < 0.9 < after, (before, after)  # measured: 0.58 untrained (identity init), ~0.99 trained
    assert std_spectrum(h)[0][2] < 0.1 * std_spectrum(h)[0][1]  # a sharp knee after the 2 informative dims


def test_emnist_missing_files_give_a_one_line_user_error(tmp_path):
    with pytest.raises(UserError) as err:
        EMNISTSets(4, root=tmp_path)
    assert "\n" not in str(err.value) and str(tmp_path) in str(err.value) and "download=True" in str(err.value)


def test_emnist_standin_sets_have_distinct_views():
    images, labels = emnist_standin(16, seed=0)
    assert images.shape == (16, 28, 28) and images.dtype == torch.uint8 and labels.shape == (16,)
    src = EMNISTSets(8, seed=0, standin=32, noise=0.0)
    batch = src.batch(0)
    assert src.n_views == 8 and all(batch[f"x{k}"].shape == (8, 784) for k in range(8))
    assert batch["latents"].shape == (8, 1)
    for k in range(1, 8):
        assert (batch[f"x{k}"] - batch["x0"]).abs().amax(dim=1).min() > 0.01  # every anchor's view moved
    assert all(torch.equal(batch[k], EMNISTSets(8, seed=0, standin=32, noise=0.0).batch(0)[k]) for k in batch)
    x, lab = src.eval_set(5, seed=0)
    assert x.shape == (5, 784) and lab.shape == (5, 1)
