"""Synthetic latents, conditionals, mixings and sources (papers 000/001): checked against independent formulas
(scipy's truncated normal, the vMF mean resultant length, binomial change rates), and the sources' determinism."""

import math

import numpy as np
import pytest
import torch
from scipy.special import ive
from scipy.stats import truncnorm

from ident3d.causal.errors import UserError
from ident3d.training.losses.functional import lp_pow_matrix
from ident3d.training.schedule import lr_factor
from ident3d.training.synthetic import InvertibleMixing, spaces
from ident3d.training.synthetic.sources import LatentPairs, SCMPairs, make_source


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_mixing_is_invertible_and_nonlinear():
    g = InvertibleMixing(10, seed=1)
    z = torch.rand(2000, 10)
    x = g(z)
    assert (g.inverse(x) - z).abs().max() < 1e-4
    design = torch.cat([z, torch.ones(2000, 1)], 1)
    resid = x - design @ torch.linalg.lstsq(design, x).solution
    assert resid.var() / x.var() > 0.01  # not a linear map


def test_truncated_normal_matches_scipy_near_the_edge():
    mu, s = 0.02, 0.05  # mu close to 0: the truncation matters
    x = spaces.truncated("normal", torch.full((200_000, 1), mu), s, gen(), 0.0, 1.0).double()
    ref = truncnorm((0 - mu) / s, (1 - mu) / s, loc=mu, scale=s)
    assert x.min() >= 0 and x.max() <= 1
    assert abs(x.mean().item() - ref.mean()) < 4 * ref.std() / math.sqrt(len(x))
    assert abs(x.std().item() - ref.std()) < 0.01 * ref.std()


def test_laplace_scale_and_box_truncation():
    b = 0.05
    x = spaces.truncated("laplace", torch.full((200_000, 1), 0.5), b, gen(1), 0.0, 1.0)
    assert abs((x - 0.5).abs().mean().item() - b) < 0.001  # E|x - mu| = b for the (barely truncated) Laplace
    edge = spaces.truncated("laplace", torch.full((50_000, 1), 0.99), b, gen(2), 0.0, 1.0)
    assert edge.max() <= 1.0 and (edge > 0.99).float().mean() < 0.5  # mass pushed below the edge


def test_vmf_mean_cosine_is_the_bessel_ratio():
    d, kappa = 10, 50.0
    mu = spaces.sample_marginal("sphere", 50_000, d, gen(3))
    x = spaces.vmf(mu, kappa, gen(4))
    assert torch.allclose(x.norm(dim=1), torch.ones(len(x)), atol=1e-5)
    expected = ive(d / 2, kappa) / ive(d / 2 - 1, kappa)  # A_d(kappa), the vMF mean resultant length
    assert abs((x * mu).sum(1).mean().item() - expected) < 0.002
    tangent = x - (x * mu).sum(1, keepdim=True) * mu  # rotationally symmetric about mu
    assert tangent.mean(0).abs().max() < 0.01


def test_lp_pow_matrix_p1_equals_the_broadcast_form():
    a, b = torch.randn(40, 7), torch.randn(30, 7)
    ref = (a.unsqueeze(1) - b.unsqueeze(0)).abs().sum(-1)
    assert torch.allclose(lp_pow_matrix(a, b, 1), ref, atol=1e-5)


def test_latent_pairs_are_a_pure_function_of_seed_and_batch():
    src = LatentPairs(256, seed=5, space="box", conditional="normal", scale=0.05)
    b = src.batch(3)
    assert torch.equal(src.batch(3)["x0"], b["x0"]) and not torch.equal(src.batch(4)["x0"], b["x0"])
    assert torch.allclose(b["x0"], src.mix(b["latents"]))
    z = b["latents"]
    zt = src.mixing.inverse(b["x1"])
    assert 0.03 < (zt - z).std().item() < 0.06  # the positive is a 0.05-normal step away
    x_eval, z_eval = src.eval_set(100, seed=1)
    assert not torch.equal(z_eval, src.eval_set(100, seed=2)[1]) and torch.allclose(x_eval, src.mix(z_eval))


@pytest.mark.parametrize("p_change", [0.25, 1.0])
def test_scm_pairs_keep_content_and_change_each_style_latent_with_probability_p(p_change):
    n = 4000
    src = SCMPairs(n, seed=1, p_change=p_change)
    z, zt = src._latents(n, 0)
    assert torch.equal(z[:, :5], zt[:, :5])  # content never changes
    rate = (z[:, 5:] != zt[:, 5:]).double().mean(0).numpy()
    sd = math.sqrt(max(p_change * (1 - p_change), 1e-12) / n)
    assert np.all(np.abs(rate - p_change) < 4 * sd + 1e-12), rate  # binomial: each style dim, within 4 sigma


def test_content_style_dependence_switches():
    def corr(**args):
        z = SCMPairs(20_000, seed=2, scm_args=args)._latents(20_000, 0)[0].numpy()
        return np.abs(np.corrcoef(z.T)[:5, 5:]).max()

    assert corr() > 0.2  # statistical + causal: style depends on content
    assert corr(statistical=False, causal=False) < 0.05


def test_bad_source_settings_are_one_line_user_errors():
    for spec, words in [({"kind": "nope"}, "unknown synthetic source"),
                        ({"kind": "latent_pairs", "spce": "box"}, "no option 'spce'"),
                        ({"kind": "latent_pairs", "conditional": "vmf"}, "sphere"),
                        ({"kind": "latent_pairs", "scale": float("nan")}, "positive number"),
                        ({"kind": "scm_pairs", "p_change": 2}, "p_change"),
                        ({"kind": "scm_pairs", "scm": "causal3dident"}, "class node")]:
        with pytest.raises(UserError, match=words) as err:
            make_source(spec, 8, 0, "cpu")
        assert "\n" not in str(err.value)


def test_lr_factor_warms_up_then_decays():
    assert lr_factor(0, 100, warmup=10) == pytest.approx(0.1)
    assert lr_factor(9, 100, warmup=10) == pytest.approx(1.0)
    assert lr_factor(50, 100, warmup=10, schedule="constant") == 1.0
    assert lr_factor(10, 100, warmup=10, schedule="cosine") == pytest.approx(1.0)
    assert lr_factor(55, 100, warmup=10, schedule="cosine") == pytest.approx(0.5)
    assert lr_factor(99, 100, warmup=10, schedule="cosine") < 0.001


def test_generative_objectives_mirror_the_vector_encoder():
    from ident3d.training.encoders import build_encoder
    from ident3d.training.objectives import OBJECTIVES

    enc = build_encoder("mlp", 5, 0, in_dim=10, hidden=[32, 16])
    obj = OBJECTIVES.get("simvae")(enc)
    x = torch.randn(8, 10)
    assert obj.reconstruct(x).shape == (8, 10)
    linears = [m for m in obj.decoder.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(5, 16), (16, 32), (32, 10)]
    assert torch.isfinite(obj([x, x + 0.1])["loss"])


def test_laplace_draws_are_the_inverse_cdf_and_finite_at_a_zero_draw():
    """Standard Laplace by the inverse CDF, x = log(2v) below 1/2 and -log(2(1 - v)) above, from plain floats; the
    draw v = 0 (probability 2^-24 per float32 draw, so a few times in a 20,000-step run: it made paper 001's
    sphere/Laplace cells NaN) is floored at one rand step instead of -inf."""
    v = [0.0, 2.0**-24, 0.1, 0.4999999, 0.5, 0.75, 1.0 - 2.0**-24]
    v32 = torch.tensor(v, dtype=torch.float32)
    got = spaces.laplace_from_uniform(v32).tolist()
    plain = [math.log(2 * x) if x < 0.5 else -math.log(2 * (1 - x)) for x in v32.tolist()[1:]]
    assert np.allclose(got[1:], plain, rtol=1e-5)
    assert got[0] == pytest.approx(math.log(2.0**-24), rel=1e-6)  # the floored tail: finite, and the most negative
    z = torch.nn.functional.normalize(torch.ones(4, 3), dim=1)
    gen = torch.Generator().manual_seed(0)
    assert torch.isfinite(spaces.sample_conditional("sphere", "laplace", z, 0.3, gen)).all()
