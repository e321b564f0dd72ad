"""Sampling: marginals match their specs, and sampling is split-invariant (counter-based)."""

import numpy as np
import pytest
from scipy import stats

from ident3d.causal import load_scm

N = 50_000


@pytest.fixture(scope="module")
def c3d():
    scm = load_scm("causal3dident")
    return scm, scm.sample(N, seed=0)


def test_3dident_marginals_are_uniform_and_independent():
    s = load_scm("3dident").sample(N, seed=1)
    assert s.latents.shape == (N, 10) and s.latents.dtype == np.float32 and s.classes is None
    for j, name in enumerate(s.names):
        p = stats.kstest(s.latents[:, j], stats.uniform(-1, 2).cdf).pvalue
        assert p > 1e-3, f"{name} is not U[-1, 1] (KS p={p:.2g})"
    corr = np.corrcoef(s.latents.T) - np.eye(10)
    assert np.abs(corr).max() < 0.03


def test_causal3dident_class_frequencies_are_uniform(c3d):
    _, s = c3d
    counts = np.bincount(s.classes, minlength=7)
    assert stats.chisquare(counts).pvalue > 1e-3
    assert s.class_names[:2] == ["Teapot", "Hare"] and len(s.class_names) == 7


@pytest.mark.parametrize("name,k,mean", [("pos_x", 0, -0.6), ("pos_y", 0, 0.6), ("pos_x", 6, 0.6),
                                         ("pos_z", 3, -0.2703)])
def test_conditional_marginals_match_truncated_normals(c3d, name, k, mean):
    _, s = c3d
    x = s.column(name)[s.classes == k]
    dist = stats.truncnorm((-1 - mean) / 0.5, (1 - mean) / 0.5, loc=mean, scale=0.5)
    assert stats.kstest(x, dist.cdf).pvalue > 1e-4
    # and a wrong mean is rejected, so the test has power
    wrong = stats.truncnorm((-1 - mean - 0.1) / 0.5, (1 - mean - 0.1) / 0.5, loc=mean + 0.1, scale=0.5)
    assert stats.kstest(x, wrong.cdf).pvalue < 1e-6


def test_every_node_given_its_parents_matches_its_mechanism(c3d):
    """Probability integral transform through each node's own CDF is U(0, 1) (all nodes at once)."""
    scm, s = c3d
    values = s.values()
    for name in scm.names:
        u = scm.nodes[name].mechanism.noise(values, values[name])
        assert stats.kstest(u, "uniform").pvalue > 1e-3, name


def test_spotlight_and_object_hue_means_follow_their_parents(c3d):
    _, s = c3d
    x, y, t = s.column("pos_x"), s.column("pos_y"), s.column("spot_angle")
    inner = (np.abs(0.8 * x + 0.2 * y) < 0.3)  # far from the truncation bounds
    resid = t[inner] - (0.8 * x[inner] + 0.2 * y[inner])
    assert abs(resid.mean()) < 0.01 and 0.25 < resid.std() < 0.3


def test_sampling_is_split_invariant():
    scm = load_scm("causal3dident")
    whole = scm.sample(1000, seed=7)
    cuts = [0, 1, 2, 100, 101, 555, 999, 1000]  # 7 uneven chunks
    parts = [scm.sample(b - a, seed=7, start=a) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    assert np.array_equal(whole.latents, np.concatenate([p.latents for p in parts]))
    assert np.array_equal(whole.classes, np.concatenate([p.classes for p in parts]))
    assert np.array_equal(whole.index, np.arange(1000))


def test_seed_changes_samples_and_same_seed_repeats():
    scm = load_scm("3dident")
    a, b, c = scm.sample(100, seed=0), scm.sample(100, seed=0), scm.sample(100, seed=1)
    assert np.array_equal(a.latents, b.latents)
    assert not np.allclose(a.latents, c.latents)


def test_content_style_synthetic_has_dependent_style():
    scm = load_scm("content_style")
    s = scm.sample(20_000, seed=0)
    assert scm.groups["content"] == ["c1", "c2", "c3", "c4", "c5"]
    lat = s.latents
    # style depends on content (causal + statistical dependence): regress style on content
    c, st = lat[:, :5], lat[:, 5:]
    coef, *_ = np.linalg.lstsq(np.c_[c, np.ones(len(c))], st, rcond=None)
    r2 = 1 - ((st - np.c_[c, np.ones(len(c))] @ coef).var(0) / st.var(0))
    assert r2.max() > 0.2
    # the linear-Gaussian spec reproduces unit-variance content
    assert np.allclose(lat[:, :5].std(0), 1.0, atol=0.03)
