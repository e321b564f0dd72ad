"""Parity of the temporal learners' log-densities and KL terms with plain numpy/scipy implementations written here
independently: the Gaussian log-density, the per-dimension Gaussian KL (against numerical integration), CITRIS's
assignment-marginalised KL (against an explicit enumeration of assignments, and a Monte Carlo average over sampled
hard assignments), the hard prior (intervened dimensions ignore z^t), and the full losses of the CITRIS-style VAE
and the iVAE baseline for a fixed posterior draw."""

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from ident3d.training.encoders import build_encoder
from ident3d.training.temporal.citris_vae import CitrisVAE, TransitionPrior
from ident3d.training.temporal.densities import citris_kl, gaussian_log_density, kl_per_dim
from ident3d.training.temporal.ivae import TemporalIVAE

B, M, K = 5, 6, 3


def np_kl(mq, vq, mp, vp):
    """KL(N(mq, vq) || N(mp, vp)) of univariate Gaussians given variances: log(sp/sq) + (vq + (mq-mp)^2)/(2vp) - 1/2."""
    return 0.5 * np.log(vp / vq) + (vq + (mq - mp) ** 2) / (2 * vp) - 0.5


def np_citris_kl(mq, lvq, mo, lvo, mi, lvi, probs, targets, lam):
    """Expected KL over assignments, enumerated: dimension i in group g with probability probs[i, g]."""
    out = np.zeros(len(mq))
    for b in range(len(mq)):
        for i in range(mq.shape[1]):
            for g in range(probs.shape[1]):
                if g < targets.shape[1] and targets[b, g] == 1:
                    kl = np_kl(mq[b, i], np.exp(lvq[b, i]), mi[i, g], np.exp(lvi[i, g]))
                else:
                    kl = np_kl(mq[b, i], np.exp(lvq[b, i]), mo[b, i], np.exp(lvo[b, i]))
                    kl *= (1 - lam) if g == targets.shape[1] else 1.0
                out[b] += probs[i, g] * kl
    return out


def _rand(*shape, seed=0, scale=1.0):
    return torch.from_numpy(np.random.default_rng(seed).normal(scale=scale, size=shape))


def test_gaussian_log_density_matches_scipy():
    z, mu, lv = _rand(B, M, seed=1), _rand(B, M, seed=2), _rand(B, M, seed=3, scale=0.7)
    ref = stats.norm.logpdf(z.numpy(), mu.numpy(), np.exp(0.5 * lv.numpy()))
    np.testing.assert_allclose(gaussian_log_density(z, mu, lv).numpy(), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mq,lvq,mp,lvp", [(0.3, -1.0, -0.5, 0.4), (2.0, 0.5, 0.0, 0.0), (-1.0, -2.0, -1.2, -1.5)])
def test_kl_per_dim_matches_numerical_integration(mq, lvq, mp, lvp):
    sq, sp = np.exp(0.5 * lvq), np.exp(0.5 * lvp)
    ref, _ = integrate.quad(lambda z: stats.norm.pdf(z, mq, sq) * (stats.norm.logpdf(z, mq, sq)
                                                                   - stats.norm.logpdf(z, mp, sp)), -30, 30)
    got = kl_per_dim(*(torch.tensor([v], dtype=torch.float64) for v in (mq, lvq, mp, lvp)))
    assert got.item() == pytest.approx(ref, rel=1e-7)
    assert kl_per_dim(*(torch.tensor([v], dtype=torch.float64) for v in (mq, lvq, mq, lvq))).item() == 0.0


@pytest.mark.parametrize("lam", [0.0, 0.01, 0.5])
def test_citris_kl_matches_enumeration(lam):
    mq, lvq = _rand(B, M, seed=4), _rand(B, M, seed=5, scale=0.5)
    mo, lvo = _rand(B, M, seed=6), _rand(B, M, seed=7, scale=0.5)
    mi, lvi = _rand(M, K, seed=8), _rand(M, K, seed=9, scale=0.5)
    probs = torch.softmax(_rand(M, K + 1, seed=10, scale=2.0), dim=1)
    targets = torch.from_numpy(np.random.default_rng(11).random((B, K)) < 0.4).double()
    targets[0] = 0  # one sample with no intervention
    got = citris_kl(mq, lvq, mo, lvo, mi, lvi, probs, targets, lam).numpy()
    ref = np_citris_kl(*(t.numpy() for t in (mq, lvq, mo, lvo, mi, lvi, probs, targets)), lam)
    np.testing.assert_allclose(got, ref, rtol=1e-10)
    assert got.shape == (B,) and (got > 0).all()


def test_citris_kl_is_the_mean_kl_over_sampled_hard_assignments():
    """With psi_0 off, E over psi ~ Cat(softmax) of sum_i KL(q_i || hard prior_i) is the marginalised KL."""
    torch.manual_seed(0)
    prior = TransitionPrior(M, K, hidden=8, lambda_reg=0.0).double()
    with torch.no_grad():
        prior.assign_logits.copy_(_rand(M, K + 1, seed=12, scale=1.5))
    z_t, mq, lvq = _rand(B, M, seed=13), _rand(B, M, seed=14), _rand(B, M, seed=15, scale=0.5)
    targets = torch.from_numpy(np.random.default_rng(16).random((B, K)) < 0.5).double()
    probs = prior.assign_probs().detach().numpy()
    assert probs[:, K].max() < 1e-12  # lambda_reg = 0 switches psi_0 off
    rng = np.random.default_rng(17)
    draws = np.stack([[rng.choice(K + 1, p=p / p.sum()) for p in probs] for _ in range(4000)])
    with torch.no_grad():
        mc = np.mean([kl_per_dim(mq, lvq, *prior.params(z_t, targets, torch.from_numpy(a))).sum(-1).numpy()
                      for a in draws], axis=0)
        exact = prior.kl(mq, lvq, z_t, targets).numpy()
    np.testing.assert_allclose(mc, exact, rtol=0.03)


def test_hard_prior_ignores_z_t_exactly_where_the_assigned_variable_is_intervened():
    torch.manual_seed(1)
    prior = TransitionPrior(M, K, hidden=8).double()
    assignment = torch.tensor([0, 0, 1, 2, K, 1])  # dimension 4 in psi_0
    targets = torch.tensor([[1.0, 0.0, 1.0]], dtype=torch.float64)
    with torch.no_grad():
        (m1, v1), (m2, v2) = (prior.params(_rand(1, M, seed=s), targets, assignment) for s in (20, 21))
    hit = np.array([True, True, False, True, False, False])
    np.testing.assert_array_equal(m1[0, hit].numpy(), m2[0, hit].numpy())
    np.testing.assert_array_equal(v1[0, hit].numpy(), v2[0, hit].numpy())
    assert (m1[0, ~hit] != m2[0, ~hit]).all()  # the observational prior reads z^t
    mi, lvi = prior.interventional()
    np.testing.assert_array_equal(m1[0, hit].detach().numpy(),
                                  mi.detach().numpy()[np.flatnonzero(hit), assignment[hit].numpy()])


def test_prior_log_prob_matches_scipy():
    torch.manual_seed(2)
    prior = TransitionPrior(M, K, hidden=8).double()
    z_t, z_t1 = _rand(B, M, seed=22), _rand(B, M, seed=23)
    targets = torch.from_numpy(np.random.default_rng(24).random((B, K)) < 0.5).double()
    a = torch.tensor([0, 1, 2, K, 1, 0])
    with torch.no_grad():
        mu_o, lv_o = (t.numpy() for t in prior.observational(z_t))
        mi, lvi = (t.numpy() for t in prior.interventional())
        got = prior.log_prob(z_t1, z_t, targets, a).numpy()
    ref = np.zeros(B)
    for b in range(B):
        for i, g in enumerate(a.tolist()):
            mean, lv = (mi[i, g], lvi[i, g]) if g < K and targets[b, g] == 1 else (mu_o[b, i], lv_o[b, i])
            ref[b] += stats.norm.logpdf(z_t1[b, i].item(), mean, np.exp(0.5 * lv))
    np.testing.assert_allclose(got, ref, rtol=1e-10)


def _posterior_draw(model, x_t1: torch.Tensor, seed: int):
    """The posterior mean, log-variance and the draw the model's loss makes after torch.manual_seed(seed)."""
    mu, lv = model.vae.posterior(x_t1)
    torch.manual_seed(seed)
    eps = torch.randn(mu.shape, dtype=mu.dtype)
    return mu, lv, mu + torch.exp(0.5 * lv) * eps


def _encoder_and_batch(seed: int):
    """An MLP encoder (torch seed ``seed``) and a transition batch (x^t, x^{t+1}, targets) drawn from seeds
    10 * seed, 10 * seed + 1 and 10 * seed + 2."""
    torch.manual_seed(seed)
    enc = build_encoder("mlp", out_dim=M, image_size=0, in_dim=7, hidden=[16])
    x_t, x_t1 = _rand(B, 7, seed=10 * seed), _rand(B, 7, seed=10 * seed + 1)
    targets = torch.from_numpy(np.random.default_rng(10 * seed + 2).random((B, K)) < 0.5).double()
    return enc, x_t, x_t1, targets


def test_citris_vae_loss_matches_numpy():
    enc, x_t, x_t1, targets = _encoder_and_batch(3)
    model = CitrisVAE(enc, K, lik_var=0.3, beta=2.0, lambda_reg=0.1, prior_hidden=8).double()
    torch.manual_seed(99)
    out = model.loss(x_t, x_t1, targets)
    with torch.no_grad():
        mu, lv, z = _posterior_draw(model, x_t1, 99)
        x_hat = model.vae.decoder(z).numpy()
        mo, lvo = (t.numpy() for t in model.prior.observational(model.vae.encoder(x_t)))
        mi, lvi = (t.numpy() for t in model.prior.interventional())
        probs = model.prior.assign_probs().numpy()
    rec = ((x_t1.numpy() - x_hat) ** 2).sum(1) / (2 * 0.3)
    kl = np_citris_kl(mu.detach().numpy(), lv.detach().numpy(), mo, lvo, mi, lvi, probs, targets.numpy(), 0.1)
    assert out["loss"].item() == pytest.approx((rec + 2.0 * kl).mean(), rel=1e-10)
    assert out["kl"].item() == pytest.approx(kl.mean(), rel=1e-10)


def test_ivae_loss_matches_numpy():
    enc, x_t, x_t1, targets = _encoder_and_batch(4)
    model = TemporalIVAE(enc, K, lik_var=0.2, beta=1.5, prior_hidden=8).double()
    torch.manual_seed(7)
    out = model.loss(x_t, x_t1, targets)
    with torch.no_grad():
        mu, lv, z = _posterior_draw(model, x_t1, 7)
        x_hat = model.vae.decoder(z).numpy()
        mp, lvp = (t.numpy() for t in model.prior(targets))
    rec = ((x_t1.numpy() - x_hat) ** 2).sum(1) / (2 * 0.2)
    kl = np_kl(mu.numpy(), np.exp(lv.numpy()), mp, np.exp(lvp)).sum(1)
    assert out["loss"].item() == pytest.approx((rec + 1.5 * kl).mean(), rel=1e-10)
    # the prior depends on the targets alone: the same targets give the same prior whatever x^t is
    np.testing.assert_allclose(model.prior(targets[:1])[0].detach().numpy(), mp[:1], rtol=1e-12)
