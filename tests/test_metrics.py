"""Metrics against known answers: R^2 ~ 1 for invertible functions of a latent and ~ 0 for an
independent one; MCC = 1 under permutations and sign flips; probes and GMM on separable data."""

import numpy as np
import pytest

from ident3d.evaluation import (
    gmm_scores,
    knn_accuracy,
    linear_probe_accuracy,
    mcc,
    mlp_probe_accuracy,
    r2_per_latent,
    reconstruction_mse,
    uniformity,
)

rng = np.random.default_rng(0)


def test_linear_r2_recovers_a_linear_mixing_and_ignores_an_independent_latent():
    z = rng.uniform(-1, 1, (3000, 4))
    rep = z[:, :3] @ rng.normal(size=(3, 3))  # latent 3 is not in the representation
    r = r2_per_latent(rep[:2000], z[:2000], rep[2000:], z[2000:], kind="linear")
    assert np.all(r.scores[:3] > 0.99) and abs(r.scores[3]) < 0.02


@pytest.mark.parametrize("n_fit", [600, 2500])
def test_kernel_r2_recovers_an_invertible_nonlinear_function(n_fit):
    gen = np.random.default_rng(n_fit)  # its own draws: the module's stream depends on which tests ran before
    z = gen.uniform(-1, 1, (n_fit + 1000, 2))
    rep = np.c_[np.tanh(2 * z[:, 0]) + z[:, 0] ** 3, gen.normal(size=len(z))]  # invertible in z0; noise
    lin = r2_per_latent(rep[:n_fit], z[:n_fit], rep[n_fit:], z[n_fit:], kind="linear")
    # 200 Nystroem components (not the default 500) keep the approximate path's test 5x cheaper
    ker = r2_per_latent(rep[:n_fit], z[:n_fit], rep[n_fit:], z[n_fit:], kind="kernel", exact_max=1000,
                        n_components=200)
    assert ker.scores[0] > 0.98 and ker.scores[0] > lin.scores[0] and abs(ker.scores[1]) < 0.05
    assert ("Nystroem" in ker.method) == (n_fit > 1000)


def test_mcc_is_one_under_permutation_and_sign_flips_and_low_for_noise():
    z = rng.normal(size=(2000, 5))
    rep = -z[:, [3, 0, 4, 1, 2]] * np.array([1, -2, 3, -1, 0.5])
    assert mcc(z, rep) == pytest.approx(1.0, abs=1e-9)
    assert mcc(z, rep, method="spearman") == pytest.approx(1.0, abs=1e-9)
    assert mcc(z, rng.normal(size=(2000, 5))) < 0.1
    assert mcc(z[:1000], rep[:1000], z_true_test=z[1000:], z_pred_test=rep[1000:]) == pytest.approx(1.0, abs=1e-9)
    # monotone nonlinearity: Spearman sees it fully, Pearson less so
    assert mcc(z, np.exp(3 * z), method="spearman") == pytest.approx(1.0)
    assert mcc(z, np.exp(3 * z)) < 0.9


def _blobs(n=600, k=4, d=6, sep=8.0):
    centres = rng.normal(size=(k, d)) * sep
    y = rng.integers(0, k, n)
    return centres[y] + rng.normal(size=(n, d)), y


def test_probes_and_gmm_on_separable_data():
    x, y = _blobs()
    assert linear_probe_accuracy(x[:400], y[:400], x[400:], y[400:]) > 0.98
    assert mlp_probe_accuracy(x[:400], y[:400], x[400:], y[400:]) > 0.95
    acc, k = knn_accuracy(x[:400], y[:400], x[400:], y[400:])
    assert acc > 0.98 and 1 <= k <= 15
    g = gmm_scores(x, y)
    assert g["accuracy"] > 0.95 and g["nmi"] > 0.9 and g["ari"] > 0.9
    shuffled = gmm_scores(x, rng.permutation(y))
    assert shuffled["nmi"] < 0.05 and shuffled["accuracy"] < 0.4


def test_uniformity_and_reconstruction():
    spread = rng.normal(size=(2000, 3))
    clumped = np.array([1.0, 0.0, 0.0]) + 0.05 * rng.normal(size=(2000, 3))
    assert uniformity(spread) < uniformity(clumped) < 0
    assert uniformity(clumped) > -0.1
    assert reconstruction_mse(np.ones((4, 3)), np.zeros((4, 3))) == 1.0
