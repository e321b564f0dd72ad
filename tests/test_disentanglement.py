"""Disentanglement metrics (DCI, DCI-ES explicitness, MIG, SAP, CITRIS's R^2 / Spearman matrices) on constructed
codes with known answers: identity, permutation with rescaling and sign flips, an orthogonal mixing, pure
noise and shuffled rows (controls that must score near 0), a duplicated factor, and added noise. Where a value
has a closed form (D of the mixing from |Q|, R^2 = var / (var + noise variance), C with one factor split over two
codes) the test asserts it; every formula is also checked against a plain-loop implementation written here."""

import math
from collections import Counter

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.stats import spearmanr
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

from ident3d.causal.errors import UserError
from ident3d.evaluation import (
    citris_scores,
    dci,
    dci_es_explicitness,
    dci_from_importance,
    diag_and_sep,
    explicitness,
    group_matrices,
    mig,
    mig_from_discrete,
    mutual_info_matrix,
    sap,
    sap_from_scores,
    sap_scores,
)

N_FIT, N_TEST, K = 1500, 1000, 3
rng = np.random.default_rng(0)
Z = rng.uniform(-1, 1, (N_FIT + N_TEST, K))  # variance 1/3 per factor
_V = np.array([1.0, 1.5, 2.0])
Q = np.eye(K) - 2 * np.outer(_V, _V) / (_V @ _V)  # orthogonal (a reflection): every code mixes every factor
VAR = 1 / 3
NOISE = (0.1, 0.3, 1.0)


def codes(kind: str, sigma: float = 0.0) -> np.ndarray:
    r = np.random.default_rng(2)
    return {
        "identity": Z,
        "permuted": Z[:, [2, 0, 1]] * np.array([-2.0, 0.5, 3.0]),  # permutation, rescaling and a sign flip
        "mixed": Z @ Q,
        "noise": r.normal(size=Z.shape),
        "shuffled": Z[r.permutation(len(Z))],  # the right marginals, the pairing with Z broken
        "duplicated": np.c_[Z, Z[:, 0]],
        "noisy": Z + sigma * r.normal(size=Z.shape),
    }[kind]


def split(c):
    return Z[:N_FIT], c[:N_FIT], Z[N_FIT:], c[N_FIT:]


def r2_with_noise(sigma):
    """Population R^2 of recovering a factor (variance 1/3) from factor + independent noise of std sigma."""
    return VAR / (VAR + sigma**2)


# ----- plain-loop reference implementations of the formulas -----------------------------------------------------

def loop_dci(r):
    n_codes, n_factors = len(r), len(r[0])
    total = sum(sum(row) for row in r)
    d = 0.0
    for i in range(n_codes):
        row = sum(r[i])
        h = -sum((r[i][j] / row) * math.log(r[i][j] / row, n_factors) for j in range(n_factors) if r[i][j] > 0)
        d += (row / total) * (1 - h)
    c = 0.0
    for j in range(n_factors):
        col = sum(r[i][j] for i in range(n_codes))
        h = -sum((r[i][j] / col) * math.log(r[i][j] / col, n_codes) for i in range(n_codes) if r[i][j] > 0)
        c += (1 - h) / n_factors
    return d, c


def loop_mi(a, b):
    n = len(a)
    pa, pb, pab = Counter(a), Counter(b), Counter(zip(a, b, strict=True))
    return sum(v / n * math.log((v / n) / (pa[x] / n * pb[y] / n)) for (x, y), v in pab.items())


def loop_mig(z_disc, c_disc):
    gaps = []
    for k in range(z_disc.shape[1]):
        zk = list(z_disc[:, k])
        h = loop_mi(zk, zk)
        mis = sorted((loop_mi(list(c_disc[:, i]), zk) for i in range(c_disc.shape[1])), reverse=True)
        gaps.append((mis[0] - mis[1]) / h)
    return sum(gaps) / len(gaps)


def loop_sap(s):
    gaps = []
    for k in range(len(s[0])):
        col = sorted((s[i][k] for i in range(len(s))), reverse=True)
        gaps.append(col[0] - col[1])
    return sum(gaps) / len(gaps)


def loop_explicitness(k, losses, base, floor):
    best, curve = float("inf"), []
    for v in losses:
        best = min(best, v)
        curve.append(min(best, base))
    area = sum((curve[i] + curve[i + 1] - 2 * floor) / 2 * (k[i + 1] - k[i]) for i in range(len(k) - 1))
    return 1 - area / ((k[-1] - k[0]) * (base - floor) / 2)


# ----- parity: vectorised formulas against the loops ----------------------------------------------------------

def test_dci_entropy_weighting_matches_the_loop_on_hand_built_importances():
    r = np.random.default_rng(3).uniform(0, 1, (5, 3)) ** 3  # uneven rows and columns
    d, c, per_code, weights, per_factor = dci_from_importance(r)
    assert (d, c) == pytest.approx(loop_dci(r.tolist()), abs=1e-12)
    assert weights.sum() == pytest.approx(1.0) and weights == pytest.approx(r.sum(1) / r.sum())
    # exact cases: a one-to-one matrix, a uniform one, and one factor split evenly over two of four codes
    assert dci_from_importance(np.diag([0.2, 3.0, 1.0]))[:2] == pytest.approx((1.0, 1.0))
    assert dci_from_importance(np.ones((4, 3)))[:2] == pytest.approx((0.0, 0.0), abs=1e-12)
    split_r = np.array([[0.5, 0, 0], [0.5, 0, 0], [0, 1, 0], [0, 0, 1.0]])
    assert dci_from_importance(split_r)[:2] == pytest.approx((1.0, (0.5 + 1 + 1) / 3))
    # a code with no importance has weight 0 and does not change D; a factor no code predicts has C_j = 0
    d0, c0, _, w0, pf0 = dci_from_importance(np.r_[r, np.zeros((1, 3))])
    assert d0 == pytest.approx(d) and w0[-1] == 0
    assert dci_from_importance(np.c_[r, np.zeros(5)])[4][-1] == pytest.approx(0.0)


def test_mutual_information_matches_the_loop_on_a_small_discrete_joint():
    counts = np.array([[30, 5, 0, 5], [2, 20, 8, 0], [0, 4, 6, 20]])  # a 3 x 4 joint table, N = 100
    a = np.repeat(np.arange(3), counts.sum(1))
    b = np.concatenate([np.repeat(np.arange(4), row) for row in counts])
    p = counts / counts.sum()
    by_table = sum(p[i, j] * math.log(p[i, j] / (p[i].sum() * p[:, j].sum()))
                   for i in range(3) for j in range(4) if p[i, j] > 0)
    assert mutual_info_matrix(a, b)[0, 0] == pytest.approx(by_table, abs=1e-12)
    assert loop_mi(list(a), list(b)) == pytest.approx(by_table, abs=1e-12)
    shuffled = np.random.default_rng(4).permutation(b)  # control: the same marginals, independent pairing
    assert mutual_info_matrix(a, shuffled)[0, 0] < 0.2 * by_table


def test_mig_normalised_gap_matches_the_loop():
    r = np.random.default_rng(5)
    z_disc = np.c_[r.integers(0, 4, 300), r.integers(0, 6, 300)]
    c_disc = np.c_[(z_disc[:, 0] + (r.random(300) < 0.2)) % 4, r.integers(0, 5, 300), z_disc[:, 1] // 2]
    score, gaps, mi, h = mig_from_discrete(z_disc, c_disc)
    assert score == pytest.approx(loop_mig(z_disc, c_disc), abs=1e-12)
    for i in range(3):
        for k in range(2):
            assert mi[i, k] == pytest.approx(loop_mi(list(c_disc[:, i]), list(z_disc[:, k])), abs=1e-12)
    assert h == pytest.approx([loop_mi(list(z_disc[:, k]), list(z_disc[:, k])) for k in range(2)])
    assert 0.3 < score < 0.9  # neither trivial: code 0 carries most of factor 0, code 2 half of factor 1


def test_sap_gap_and_score_matrix_match_the_loop():
    s = np.random.default_rng(6).uniform(0, 1, (5, 3))
    assert sap_from_scores(s)[0] == pytest.approx(loop_sap(s.tolist()), abs=1e-12)
    z_fit, c_fit, z_test, c_test = split(codes("noisy", 0.5) @ Q)
    inside, outside = sap_scores(z_fit, c_fit), sap_scores(z_fit, c_fit, z_test, c_test)
    for i in range(K):
        for k in range(K):
            line = LinearRegression().fit(c_fit[:, [i]], z_fit[:, k])
            assert inside[i, k] == pytest.approx(line.score(c_fit[:, [i]], z_fit[:, k]), abs=1e-10)
            assert outside[i, k] == pytest.approx(max(0.0, r2_score(z_test[:, k], line.predict(c_test[:, [i]]))),
                                                  abs=1e-10)


def test_citris_matrices_and_summaries_match_the_loop():
    m = np.random.default_rng(7).uniform(-0.1, 1, (4, 4))
    diag, sep, largest = diag_and_sep(m)
    assert diag == pytest.approx(sum(m[i, i] for i in range(4)) / 4)
    assert sep == pytest.approx(sum(max(m[i, j] for j in range(4) if j != i) for i in range(4)) / 4)
    assert largest == pytest.approx(max(m[i, j] for i in range(4) for j in range(4) if i != j))
    z_fit, c_fit, z_test, c_test = split(np.c_[Z @ Q, codes("noise")[:, :1]])
    groups = [[0, 3], [1], [2, 1]]
    r2, rho = group_matrices(z_fit, c_fit, z_test, c_test, groups, regressor="linear")
    for g, dims in enumerate(groups):
        pred = LinearRegression().fit(c_fit[:, dims], z_fit).predict(c_test[:, dims])
        for k in range(K):
            assert r2[g, k] == pytest.approx(r2_score(z_test[:, k], pred[:, k]), abs=1e-10)
            assert rho[g, k] == pytest.approx(spearmanr(pred[:, k], z_test[:, k]).statistic, abs=1e-10)


def test_explicitness_known_curves_and_the_loop():
    k = np.array([1.0, 2.0, 3.0])
    assert explicitness(k, [0.0, 0.0, 0.0]) == pytest.approx(1.0)  # the smallest probe is already perfect
    assert explicitness(k, [1.0, 0.5, 0.0]) == pytest.approx(0.0)  # a straight descent from l_b to l*
    assert explicitness(k, [1.0, 1.0, 1.0]) == pytest.approx(-1.0)  # never better than the mean
    assert explicitness(k, [0.5, 0.2, 0.3]) == pytest.approx(1 - 0.55)  # area 0.35 + 0.2 over the triangle 1
    assert explicitness(k, [0.5, 0.2, 0.3], lowest_loss=None) == pytest.approx(1 - 0.15 / 0.8)  # l* = 0.2
    assert explicitness(k, [1.3, 0.5, 0.0]) == pytest.approx(0.0)  # a probe worse than the mean is capped at l_b
    curves = np.random.default_rng(8).uniform(0, 1.2, (6, 4))
    caps = np.array([1, 2, 3, 5, 8, 13.0])
    assert explicitness(caps, curves) == pytest.approx(
        [loop_explicitness(caps, list(curves[:, j]), 1.0, 0.0) for j in range(4)], abs=1e-12)
    assert np.isnan(explicitness(k, [1.0, 1.2, 1.0], lowest_loss=None))  # l* = l_b: undefined


# ----- constructed representations ----------------------------------------------------------------------------

def test_dci_identity_permutation_mixing_noise_duplicate():
    ident = dci(*split(codes("identity")))
    perm = dci(*split(codes("permuted")))
    assert (ident.disentanglement, ident.completeness) == pytest.approx((1.0, 1.0), abs=1e-6)
    assert ident.informativeness == pytest.approx(1.0, abs=1e-3)
    assert (perm.disentanglement, perm.completeness, perm.informativeness) == pytest.approx(
        (ident.disentanglement, ident.completeness, ident.informativeness), abs=1e-6)
    # orthogonal mixing: Lasso importances are |Q^T| (z = c Q^T), so D and C are those of |Q^T|; informativeness stays 1
    rot = dci(*split(codes("mixed")))
    d_q, c_q = dci_from_importance(np.abs(Q.T))[:2]
    assert rot.disentanglement == pytest.approx(d_q, abs=0.02) and d_q < 0.3
    assert rot.completeness == pytest.approx(c_q, abs=0.02) and rot.informativeness > 0.99
    # pure noise and shuffled rows: nothing to predict, and tree importances spread evenly (D, C near 0)
    for kind in ("noise", "shuffled"):
        assert abs(dci(*split(codes(kind))).informativeness) < 0.01
        trees = dci(*split(codes(kind)), importance="forest", n_estimators=30)
        assert trees.disentanglement < 0.03 and trees.completeness < 0.03 and trees.informativeness < 0.0
    # factor 0 in two codes: its importance splits evenly, so C_0 = 1 - log_4(2) = 1/2; D stays 1 (gbt: dlib's
    # classifiers on the factors cut into 5 bins of the fit split, 20 by default)
    dup = dci(*split(codes("duplicated")), importance="gbt", n_estimators=50, n_bins=5)
    assert dup.disentanglement == pytest.approx(1.0, abs=0.01)
    assert dup.per_factor == pytest.approx([0.5, 1.0, 1.0], abs=0.02)


def test_dci_falls_with_added_noise():
    lasso = [dci(*split(codes("noisy", s))) for s in NOISE]
    assert [r.informativeness for r in lasso] == pytest.approx([r2_with_noise(s) for s in NOISE], abs=0.03)
    # dlib's gbt (classifiers of the factors cut into 5 bins): noise of std 0.1 already blurs the bins of width 0.4,
    # so D starts lower than a regressor's; spurious importances and misclassifications grow with the noise
    trees = [dci(*split(codes("noisy", s)), importance="gbt", n_estimators=50, n_bins=5) for s in NOISE]
    d, acc = [r.disentanglement for r in trees], [r.informativeness for r in trees]
    assert d[0] > 0.8 and d[0] > d[1] + 0.1 and d[1] > d[2] + 0.3, d
    assert acc[0] > acc[1] > acc[2] > 0.2 - 0.05, acc  # accuracy, down towards chance (1 / 5 bins)


def test_explicitness_identity_beats_mixing_and_noise_is_minus_one():
    probes = {"depths": (1, 2, 4, 8), "n_estimators": 10}
    ident = dci_es_explicitness(*split(codes("identity")), **probes)
    perm = dci_es_explicitness(*split(codes("permuted")), **probes)
    mixed = dci_es_explicitness(*split(codes("mixed")), **probes)
    assert ident.score > 0.9 and perm.score == pytest.approx(ident.score, abs=0.01)
    assert ident.losses[-1] == pytest.approx([0, 0, 0], abs=0.02)  # both reach ~0 loss at depth 8 ...
    assert mixed.losses[-1].max() < 0.1
    assert mixed.score < ident.score - 0.1  # ... but axis-aligned trees need more depth for mixed codes
    for kind in ("noise", "shuffled"):
        assert dci_es_explicitness(*split(codes(kind)), **probes).score == pytest.approx(-1.0, abs=0.01)
    noisy = [dci_es_explicitness(*split(codes("noisy", s)), **probes).score for s in NOISE]
    assert noisy[0] > noisy[1] + 0.1 > noisy[2] + 0.2


def test_mig_identity_permutation_mixing_noise_duplicate():
    ident = mig(Z, codes("identity"))
    # each code is its factor binned identically, so its MI equals the factor's entropy; the gap loses only the
    # plug-in bias of the other codes' MI, about (20 - 1)^2 / (2 N) nats against log(20)
    assert np.diag(ident.mutual_info) == pytest.approx(ident.entropy, abs=1e-12)
    bias = 19**2 / (2 * len(Z)) / math.log(20)
    assert ident.score == pytest.approx(1 - bias, abs=0.02)
    assert mig(Z, codes("permuted")).score == pytest.approx(ident.score, abs=1e-9)
    assert mig(Z, codes("mixed")).score < 0.3
    for kind in ("noise", "shuffled"):
        assert mig(Z, codes(kind)).score < 0.01
    dup = mig(Z, codes("duplicated"))  # the two copies tie for factor 0: its gap is 0
    assert dup.per_factor == pytest.approx([0.0, ident.per_factor[1], ident.per_factor[2]], abs=1e-9)
    noisy = [mig(Z, codes("noisy", s)).score for s in NOISE]
    assert ident.score > noisy[0] + 0.2 and noisy[0] > noisy[1] + 0.1 and noisy[1] > noisy[2] + 0.1


def test_sap_identity_permutation_mixing_noise_duplicate():
    ident = sap(Z, codes("identity"))
    assert np.diag(ident.scores) == pytest.approx(1.0) and ident.score > 0.99
    assert sap(Z, codes("permuted")).score == pytest.approx(ident.score, abs=1e-12)
    # orthogonal mixing: corr(c_i, z_j) = Q_ji for independent equal-variance factors, so S_ij -> Q_ji^2
    q2 = Q.T**2
    assert sap(Z, codes("mixed")).score == pytest.approx(sap_from_scores(q2)[0], abs=0.03)
    assert sap_from_scores(q2)[0] < 0.4
    for kind in ("noise", "shuffled"):
        assert sap(Z, codes(kind)).score < 0.01
        assert sap(*split(codes(kind))).score < 0.01
    assert sap(Z, codes("duplicated")).per_factor == pytest.approx([0, 1, 1], abs=0.01)
    noisy = [sap(*split(codes("noisy", s))).score for s in NOISE]
    assert noisy == pytest.approx([r2_with_noise(s) for s in NOISE], abs=0.03)


def test_citris_identity_permutation_mixing_noise_with_matching():
    ident = citris_scores(*split(codes("identity")))  # the MLP regressor, as CITRIS
    assert ident.r2_diag == pytest.approx(1.0, abs=0.01) and abs(ident.r2_sep) < 0.01
    assert ident.spearman_diag == pytest.approx(1.0, abs=0.01) and abs(ident.spearman_sep) < 0.06
    assert ident.matched and list(ident.assignment) == [0, 1, 2]
    lin = citris_scores(*split(codes("identity")), regressor="linear")
    perm = citris_scores(*split(codes("permuted")), regressor="linear")
    assert list(perm.assignment) == [2, 0, 1]  # code i carries factor [2, 0, 1][i]
    assert perm.r2 == pytest.approx(lin.r2, abs=1e-9) and perm.spearman == pytest.approx(lin.spearman, abs=1e-9)
    # orthogonal mixing with a linear regressor: the single-code R^2 matrix is Q_ji^2, matched by the Hungarian
    # algorithm (rows, cols); its diag and sep are those of Q^2 with the matched code of each factor as its row
    mixed = citris_scores(*split(codes("mixed")), regressor="linear")
    q2 = Q.T**2
    rows, cols = linear_sum_assignment(-q2)
    assert list(mixed.assignment[rows]) == list(cols)
    expected = diag_and_sep(q2[rows[np.argsort(cols)]])
    assert (mixed.r2_diag, mixed.r2_sep) == pytest.approx(expected[:2], abs=0.03)
    assert expected[0] < 0.7 and expected[1] > 0.2
    for kind in ("noise", "shuffled"):
        ctrl = citris_scores(*split(codes(kind)), regressor="linear")
        assert abs(ctrl.r2_diag) < 0.01 and abs(ctrl.spearman_diag) < 0.06
    noisy = [citris_scores(*split(codes("noisy", s)), regressor="linear").r2_diag for s in NOISE]
    assert noisy == pytest.approx([r2_with_noise(s) for s in NOISE], abs=0.03)


def test_citris_uses_a_given_assignment_of_groups():
    # factor 0 on a circle arc over dims 0, 1 (no single dim gives it linearly); factors 1, 2 on dims 2, 3;
    # dim 4 is noise and in no group
    c = np.c_[np.cos(2.5 * Z[:, 0]), np.sin(2.5 * Z[:, 0]), Z[:, 1], Z[:, 2], codes("noise")[:, 0]]
    right = citris_scores(*split(c), assignment=np.array([0, 0, 1, 2, -1]))
    assert right.r2_diag > 0.98 and right.r2_sep < 0.02 and not right.matched
    lin = citris_scores(*split(c), assignment=np.array([0, 0, 1, 2, -1]), regressor="linear")
    assert lin.r2[0, 0] < right.r2[0, 0] - 0.05  # the nonlinear group needs the MLP, as in CITRIS
    # factors 0 and 1 swap groups: rows follow the assignment, so the diagonal holds (0, 0, 1) and each of the first
    # two rows has its factor's R^2 off the diagonal
    swapped = citris_scores(*split(c), assignment=np.array([1, 1, 0, 2, -1]), regressor="linear")
    assert swapped.r2 == pytest.approx(lin.r2[[1, 0, 2]], abs=1e-9)
    assert swapped.r2_diag == pytest.approx(1 / 3, abs=0.01)
    assert swapped.r2_sep == pytest.approx((1 + lin.r2[0, 0]) / 3, abs=0.01)
    empty = citris_scores(*split(c), assignment=np.array([0, 0, 1, -1, -1]), regressor="linear")
    # an empty group predicts the fit-split mean: R^2 = -(fit mean - test mean)^2 / test variance, Spearman 0
    z_fit, z_test = Z[:N_FIT], Z[N_FIT:]
    expected = -((z_fit.mean(0) - z_test.mean(0)) ** 2) / z_test.var(0)
    assert empty.r2[2] == pytest.approx(expected, abs=1e-9) and empty.spearman[2] == pytest.approx(0.0)


# ----- bad arguments --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: dci(Z[:100], Z[:90], Z[100:], Z[100:]), "factors (fit split) has 100 samples but codes"),
    (lambda: dci(Z[:5], Z[:5], Z[5:10], Z[5:10]), "need at least 10 samples"),
    (lambda: dci(Z[:100], Z[:100, :2], Z[100:200], Z[100:200]), "code dimensions but the test split"),
    (lambda: dci(Z[:100], Z[:100], Z[100:200], Z[100:200], importance="svm"), "importance must be one of"),
    (lambda: dci_from_importance(np.ones((1, 3))), "at least 2 codes and 2 factors"),
    (lambda: dci_from_importance(-np.ones((2, 3))), "non-negative"),
    (lambda: mig(Z[:100], np.ones((100, 2, 2))), "2-D array"),
    (lambda: mig(Z[:100], Z[:100, :1]), "at least 2 code dimensions"),
    (lambda: mig(np.c_[Z[:100, 0], np.zeros(100)], Z[:100]), "factor 1 is constant"),
    (lambda: mig(Z[:10], Z[:10]), "need at least 40 samples"),
    (lambda: sap(Z[:100], np.where(Z[:100] > 0, np.nan, 1.0)), "NaN"),
    (lambda: sap(Z[:100], Z[:100], Z[100:200]), "both factors and codes of the test split"),
    (lambda: citris_scores(*split(Z[:, :2])), "at least as many dimensions (2) as factors (3)"),
    (lambda: citris_scores(*split(Z), assignment=np.array([0, 1])), "assignment must be 3 integers"),
    (lambda: citris_scores(*split(Z), assignment=np.array([0, 1, 3])), "factor indices 0..2 or -1"),
    (lambda: citris_scores(*split(Z), regressor="svm"), "regressor must be one of"),
    (lambda: group_matrices(*split(Z), [[0], [3]], regressor="linear"), "latent dimension indices 0..2"),
    (lambda: explicitness([1, 1, 2], [0.5, 0.2, 0.1]), "strictly increasing"),
    (lambda: explicitness([1, 2, 3], [0.5, 0.2]), "3 capacities but 2 losses"),
    (lambda: dci_es_explicitness(*split(Z), depths=(4,)), "at least 2 positive depths"),
])
def test_bad_arguments_raise_one_line_user_errors(call, message):
    with pytest.raises(UserError) as err:
        call()
    assert message in str(err.value) and "\n" not in str(err.value)
