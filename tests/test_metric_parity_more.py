"""Parity of MIG, SAP, DCI (Lasso importances) and uniformity with their references, each against a plain
implementation written here from the reference's definition (not its code):

- MIG: disentanglement_lib's ``_compute_mig``: each code cut into 20 equal-width bins by numpy's histogram edges
  (``_histogram_discretize``: bin = how many of the first 20 edges are <= the value), factors taken as they are (their
  values are the classes), plug-in mutual information and entropy (nats) by counting, per factor the top MI minus the
  second over the factor's entropy, mean over factors.
- SAP: disentanglement_lib's continuous ``compute_score_matrix``, which reads only the first split (in sample):
  S_ij = cov(c_i, z_j)^2 / (var c_i var z_j) with ddof 1, 0 where var c_i <= 1e-12; then ``compute_avg_diff_top_two``.
- DCI with Lasso: the authors' cianeastwood/qedr (``quantify.ipynb`` with ``lib/eval/regression.py``): codes and
  factors standardised on the fit split, R = |Lasso coefficients|, ``entropic_scores`` (1 - entropy of p in base n,
  written there with log(p + 1e-12) / log(n + 1e-12)), D weighted by each code's share of R, C the plain mean.
- uniformity: SsnL/align_uniform ``uniform_loss(x, t=2)``: log of the mean over pairs of exp(-t ||x_i - x_j||^2), on
  unit vectors.

Each parity has a negative control: a wrong form (no entropy normalisation, the top value instead of the gap, C
weighted as disentanglement_lib weighs it, non-normalised inputs) differs from the reference on the same data."""

import math

import numpy as np
import pytest
from sklearn.linear_model import Lasso

import ident3d.metrics as M
from ident3d.evaluation import uniformity
from ident3d.evaluation.dci import dci_from_importance, importance_matrix
from ident3d.evaluation.mig import discretize


# ----- plain references ----------------------------------------------------------------------------------------
def plain_histogram_bins(x, n_bins=20):
    """dlib's histogram discretiser of one column: numpy's histogram edges; a value's bin is the number of the first
    n_bins edges (the last edge dropped) that are <= it (np.digitize's rule), so bins run 1..n_bins."""
    edges = np.histogram(x, n_bins)[1][:-1]
    return np.array([sum(1 for e in edges if e <= v) for v in x])


def plain_mutual_info(a, b):
    """Plug-in mutual information (nats) of two discrete sequences, by counting pairs."""
    n = len(a)
    joint, ca, cb = {}, {}, {}
    for u, v in zip(a.tolist(), b.tolist(), strict=True):
        joint[(u, v)] = joint.get((u, v), 0) + 1
        ca[u] = ca.get(u, 0) + 1
        cb[v] = cb.get(v, 0) + 1
    mi = sum(nuv / n * math.log(nuv * n / (ca[u] * cb[v])) for (u, v), nuv in joint.items())
    return max(mi, 0.0)


def plain_entropy(a):
    n = len(a)
    counts = {}
    for u in a.tolist():
        counts[u] = counts.get(u, 0) + 1
    return -sum(m / n * math.log(m / n) for m in counts.values())


def plain_mig_parts(z, c, n_bins=20):
    """(MI (L, K), H (K,)) as dlib's _compute_mig forms them: codes binned, factors as given."""
    bins = [plain_histogram_bins(c[:, i], n_bins) for i in range(c.shape[1])]
    mi = np.array([[plain_mutual_info(bins[i], z[:, k]) for k in range(z.shape[1])] for i in range(c.shape[1])])
    h = np.array([plain_entropy(z[:, k]) for k in range(z.shape[1])])
    return mi, h


def plain_mig(z, c, n_bins=20):
    mi, h = plain_mig_parts(z, c, n_bins)
    gaps = []
    for k in range(z.shape[1]):
        col = sorted(mi[:, k], reverse=True)
        gaps.append((col[0] - col[1]) / h[k])
    return sum(gaps) / len(gaps)


def plain_sap_matrix(z, c):
    """dlib's continuous score matrix: squared covariance over the variances (ddof 1), 0 for a code of variance
    <= 1e-12; in sample."""
    n = len(z)
    out = np.zeros((c.shape[1], z.shape[1]))
    for i in range(c.shape[1]):
        mc = sum(c[:, i]) / n
        var_c = sum((v - mc) ** 2 for v in c[:, i]) / (n - 1)
        for j in range(z.shape[1]):
            mz = sum(z[:, j]) / n
            var_z = sum((v - mz) ** 2 for v in z[:, j]) / (n - 1)
            cov = sum((u - mc) * (v - mz) for u, v in zip(c[:, i], z[:, j], strict=True)) / (n - 1)
            out[i, j] = cov**2 / (var_c * var_z) if var_c > 1e-12 else 0.0
    return out


def plain_avg_top_two_gap(s):
    gaps = []
    for j in range(s.shape[1]):
        col = sorted(s[:, j], reverse=True)
        gaps.append(col[0] - col[1])
    return sum(gaps) / len(gaps)


TINY = 1e-12  # qedr's


def qedr_one_minus_entropy(values):
    """qedr's 1 - norm_entropy of values normalised to sum 1: 1 + sum p log(p + TINY) / log(n + TINY)."""
    total = sum(values)
    p = [v / total for v in values]
    return 1 + sum(q * math.log(q + TINY) for q in p) / math.log(len(p) + TINY)


def qedr_d_and_c(r):
    """The paper's D (per-code scores weighted by each code's share of R) and C (plain mean over factors)."""
    n_codes, n_factors = r.shape
    total = sum(r[i, j] for i in range(n_codes) for j in range(n_factors))
    d = sum(qedr_one_minus_entropy(list(r[i])) * sum(r[i]) / total for i in range(n_codes))
    c = sum(qedr_one_minus_entropy(list(r[:, j])) for j in range(n_factors)) / n_factors
    return d, c


def plain_uniform_loss(x, t=2.0, pairs="i!=j"):
    """log mean over pairs (i != j, or i < j) of exp(-t ||x_i - x_j||^2); x used as given (no normalisation)."""
    n = len(x)
    terms = []
    for i in range(n):
        for j in range(n):
            if (i != j) if pairs == "i!=j" else (i < j):
                terms.append(math.exp(-t * sum((a - b) ** 2 for a, b in zip(x[i], x[j], strict=True))))
    return math.log(sum(terms) / len(terms))


# ----- MIG -----------------------------------------------------------------------------------------------------
def mig_data():
    rng = np.random.default_rng(0)
    n = 400
    f = np.stack([rng.integers(0, 5, n), rng.integers(0, 8, n), rng.integers(0, 12, n)], axis=1).astype(float)
    e = rng.normal(size=(n, 5))
    c = np.stack([f[:, 0] + 0.3 * e[:, 0],
                  f[:, 1] + 0.3 * e[:, 1],
                  f[:, 1] + 0.6 * e[:, 2],  # a second, noisier copy of factor 1
                  f[:, 2] + 0.5 * f[:, 0] + 0.2 * e[:, 3],
                  e[:, 4]], axis=1)
    return f, c


def test_mig_equals_disentanglement_libs_definition_on_discrete_factors():
    z, c = mig_data()
    # the codes' bins are dlib's, shifted to start at 0
    dlib_bins = np.stack([plain_histogram_bins(c[:, i]) for i in range(c.shape[1])], axis=1)
    assert np.array_equal(discretize(c, 20) + 1, dlib_bins)

    res = M.mig(factors=z, codes=c)
    mi, h = plain_mig_parts(z, c)
    ref = plain_mig(z, c)
    assert np.max(np.abs(res.mutual_info - mi)) <= 1e-10
    assert np.max(np.abs(res.entropy - h)) <= 1e-10
    assert abs(res.score - ref) <= 1e-10

    # negative controls: the unnormalised gap, and the top MI instead of the gap
    unnormalised = np.mean(np.sort(mi, axis=0)[-1] - np.sort(mi, axis=0)[-2])
    top_only = np.mean(np.sort(mi, axis=0)[-1] / h)
    assert abs(unnormalised - ref) > 0.05
    assert abs(top_only - ref) > 0.05


def test_mig_bins_factors_with_many_values_where_dlib_takes_every_value_as_a_class():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(200, 2))
    c = np.c_[z + 0.3 * rng.normal(size=(200, 2)), rng.normal(size=200)]
    ref = plain_mig(z, c)  # dlib: 200 distinct values, 200 classes
    assert abs(M.mig(factors=z, codes=c, discretize_factors=False).score - ref) <= 1e-10
    # ident3d's default cuts such factors into 20 bins (its extension): not dlib's number
    assert abs(M.mig(factors=z, codes=c).score - ref) > 0.05


# ----- SAP -----------------------------------------------------------------------------------------------------
def sap_data():
    rng = np.random.default_rng(2)
    n = 150
    z = rng.normal(size=(n, 3))
    e = rng.normal(size=(n, 4))
    c = np.stack([z[:, 0] + 0.5 * e[:, 0],
                  z[:, 1] + 0.3 * z[:, 0] + 0.2 * e[:, 1],
                  z[:, 2] + 0.8 * z[:, 1] + 0.4 * e[:, 2],
                  np.full(n, 1.5)], axis=1)  # a constant code scores 0 in both
    return z, c


def test_sap_in_sample_equals_disentanglement_libs_continuous_sap():
    z, c = sap_data()
    res = M.sap(factors=z, codes=c)
    s = plain_sap_matrix(z, c)
    ref = plain_avg_top_two_gap(s)
    assert np.max(np.abs(res.scores - s)) <= 1e-10
    assert abs(res.score - ref) <= 1e-10
    assert np.all(res.scores[3] == 0.0)

    # negative control: the mean top score instead of the difference of the top two
    top_only = np.mean(np.sort(s, axis=0)[-1])
    assert abs(top_only - ref) > 0.05

    # the registered metric passes a test split: its out-of-sample score is ident3d's variant, not dlib's
    # (dlib's continuous form reads only the first split)
    k = 100
    in_sample = plain_avg_top_two_gap(plain_sap_matrix(z[:k], c[:k]))
    out_of_sample = M.sap(factors=z[:k], codes=c[:k], factors_test=z[k:], codes_test=c[k:]).score
    assert abs(out_of_sample - in_sample) > 1e-3


# ----- DCI (Lasso) ---------------------------------------------------------------------------------------------
def dci_data():
    rng = np.random.default_rng(3)
    n = 300
    z = rng.normal(size=(n, 3))
    e = rng.normal(size=(n, 4))
    c = np.stack([z[:, 0] + 0.4 * z[:, 1] + 0.3 * e[:, 0],
                  z[:, 1] + 0.2 * e[:, 1],
                  2.0 * z[:, 2] + 0.5 * z[:, 0] + 0.3 * e[:, 2],
                  0.7 * z[:, 2] - 0.5 * z[:, 1] + 0.5 * e[:, 3]], axis=1)
    return z[:200], c[:200], z[200:], c[200:]


def test_dci_lasso_d_and_c_equal_the_papers_entropic_scores():
    zf, cf, zt, ct = dci_data()
    alpha = 0.02  # qedr's notebook value
    res = M.dci(factors=zf, codes=cf, factors_test=zt, codes_test=ct, importance="lasso", alpha=alpha)
    r = res.importance
    assert (r.sum(1) > 0).all() and (r.sum(0) > 0).all()  # qedr's entropies are NaN for an all-zero row or column

    # R: |Lasso coefficients| on codes and factors standardised by the fit split's mean and std (ddof 0), as qedr
    cs = (cf - cf.mean(0)) / cf.std(0)
    zs = (zf - zf.mean(0)) / zf.std(0)
    r_ref = np.stack([np.abs(Lasso(alpha=alpha).fit(cs, zs[:, j]).coef_) for j in range(zf.shape[1])], axis=1)
    assert np.max(np.abs(r - r_ref)) <= 1e-10
    assert np.array_equal(importance_matrix(zf, cf, zt, ct, "lasso", alpha=alpha)[0], r)

    d_ref, c_ref = qedr_d_and_c(r)
    # 1e-10: qedr's log(p + 1e-12) moves each 1 - entropy by at most n * 1e-12 / log n from the exact one here
    assert abs(res.disentanglement - d_ref) <= 1e-10
    assert abs(res.completeness - c_ref) <= 1e-10


def test_dci_paper_c_is_the_plain_mean_and_differs_from_dlibs_weighted_c():
    r = np.array([[0.90, 0.00, 0.10],
                  [0.05, 0.30, 0.00],
                  [0.00, 0.02, 0.01],
                  [0.20, 0.20, 0.00]])  # column sums 1.15, 0.52, 0.11
    d, c, per_code, weights, per_factor = dci_from_importance(r)
    d_ref, c_ref = qedr_d_and_c(r)
    assert abs(d - d_ref) <= 1e-10
    assert abs(c - c_ref) <= 1e-10

    # negative controls: C weighted by each factor's share of R (dlib's), and D as the plain mean over codes
    col_share = r.sum(0) / r.sum()
    assert abs(float(col_share @ per_factor) - c_ref) > 0.05
    assert abs(float(np.mean(per_code)) - d_ref) > 0.05

    # edge: qedr's entropy of a code with no importance is 0 / 0 (NaN, and so is its D); ident3d gives that code
    # D_i = 0 with weight 0, so D is qedr's D of the other codes
    d0, *_ = dci_from_importance(np.vstack([r, np.zeros(3)]))
    assert abs(d0 - d_ref) <= 1e-10


# ----- uniformity ----------------------------------------------------------------------------------------------
def test_uniformity_equals_wang_and_isolas_uniform_loss_on_unit_vectors():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, 5)) * rng.uniform(0.2, 3.0, size=(40, 1))  # rows of unequal lengths
    f = x / np.linalg.norm(x, axis=1, keepdims=True)
    ref = plain_uniform_loss(f)
    assert abs(plain_uniform_loss(f, pairs="i<j") - ref) <= 1e-12  # pdist's i < j is the same mean
    assert abs(uniformity(f) - ref) <= 1e-10
    assert abs(uniformity(x) - ref) <= 1e-10  # ident3d normalises the rows itself
    assert abs(uniformity(f, t=0.5) - plain_uniform_loss(f, t=0.5)) <= 1e-10

    # negative control: the formula on the non-normalised rows
    assert abs(plain_uniform_loss(x) - ref) > 0.05


@pytest.mark.parametrize("seed", [5, 6])
def test_uniformity_of_clumped_and_spread_rows_matches_the_plain_loss(seed):
    rng = np.random.default_rng(seed)
    clumped = np.array([1.0, 0.0, 0.0]) + 0.05 * rng.normal(size=(30, 3))
    f = clumped / np.linalg.norm(clumped, axis=1, keepdims=True)
    assert abs(uniformity(clumped) - plain_uniform_loss(f)) <= 1e-10
