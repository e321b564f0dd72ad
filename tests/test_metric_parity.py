"""Parity of MCC, R^2 and DCI-gbt with their references, each against a plain implementation written here from the
reference's definition (not its code): cl-ica's MCC (Pearson matrix, best permutation by brute force, equal widths
only), least-squares R^2 (numpy's lstsq), disentanglement_lib's DCI (a GradientBoostingClassifier per discrete factor,
|feature importances| as the matrix, entropies of R + 1e-11, D and C weighted by importance shares, test accuracy).
Each parity has a negative control: the form the metric had before (a partial MCC of 2 codes for 3 factors, R^2 = 1
for a constant factor, a regressor's D and C) differs from the reference on the same data. Then the misuse cases of
``ident3d.metrics``, each one ``UserError`` line."""

import itertools
import math

import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

import ident3d.metrics as M
from ident3d.causal.errors import UserError
from ident3d.evaluation.dci import dci_from_importance, factor_classes
from ident3d.evaluation.mcc import matched_corr, report_mcc
from ident3d.evaluation.metric_base import BUILTIN_SCORES_VERSION
from ident3d.evaluation.metric_suite import DCI
from ident3d.evaluation.synthetic import score


def split(z, c, k):
    return {"factors": z[:k], "codes": c[:k], "factors_test": z[k:], "codes_test": c[k:]}


# ----- plain references ----------------------------------------------------------------------------------------
def plain_abs_pearson(a, b):
    """|Pearson r| of every column of a with every column of b, from sums."""
    out = np.zeros((a.shape[1], b.shape[1]))
    for i in range(a.shape[1]):
        x = a[:, i] - a[:, i].sum() / len(a)
        for j in range(b.shape[1]):
            y = b[:, j] - b[:, j].sum() / len(b)
            out[i, j] = abs((x * y).sum()) / math.sqrt((x * x).sum() * (y * y).sum())
    return out


def plain_mcc(z, h, zt=None, ht=None):
    """cl-ica's MCC by brute force: the permutation of codes with the largest summed |r| (on the first pair), and
    the mean |r| of its pairs (on the test pair when given). Equal widths only, as cl-ica."""
    assert z.shape[1] == h.shape[1]
    fit = plain_abs_pearson(z, h)
    score = fit if zt is None else plain_abs_pearson(zt, ht)
    k = z.shape[1]
    best = max(itertools.permutations(range(k)), key=lambda p: sum(fit[i, p[i]] for i in range(k)))
    return sum(score[i, best[i]] for i in range(k)) / k


def old_partial_mcc(z, h):
    """The form ident3d.metrics.mcc had: the best one-to-one matching of the min(K, L) pairs, their mean |r|."""
    c = plain_abs_pearson(z, h)
    k, n = c.shape
    if n <= k:
        return max(sum(c[rows[j], j] for j in range(n)) / n for rows in itertools.permutations(range(k), n))
    return max(sum(c[i, cols[i]] for i in range(k)) / k for cols in itertools.permutations(range(n), k))


def plain_linear_r2(z, c, zt, ct):
    """Test R^2 per factor of least squares (numpy lstsq, intercept column) on data standardised on the fit split;
    0 / 0 (a constant factor) stays NaN."""
    def std(fit, test):
        s = fit.std(0)
        s = np.where(s > 0, s, 1.0)
        return (fit - fit.mean(0)) / s, (test - fit.mean(0)) / s

    (c, ct), (z, zt) = std(c, ct), std(z, zt)
    w, *_ = np.linalg.lstsq(np.c_[c, np.ones(len(c))], z, rcond=None)
    pred = np.c_[ct, np.ones(len(ct))] @ w
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1 - ((zt - pred) ** 2).sum(0) / ((zt - zt.mean(0)) ** 2).sum(0)


def dlib_one_minus_entropy(values, base):
    """1 - H(p) in ``base`` of p = (values + 1e-11) normalised, as dlib's scipy.stats.entropy(R + 1e-11)."""
    p = [v + 1e-11 for v in values]
    total = sum(p)
    return 1 + sum((q / total) * math.log(q / total, base) for q in p)


def plain_dlib_dci(z, c, zt, ct, seed=0, n_estimators=100):
    """disentanglement_lib's DCI on discrete factors: (D, C, informativeness, R)."""
    n_factors, n_codes = z.shape[1], c.shape[1]
    r = [[0.0] * n_factors for _ in range(n_codes)]
    accuracy = []
    for j in range(n_factors):
        model = GradientBoostingClassifier(n_estimators=n_estimators, random_state=seed).fit(c, z[:, j])
        for i in range(n_codes):
            r[i][j] = abs(float(model.feature_importances_[i]))
        pred = model.predict(ct)
        accuracy.append(sum(float(p == t) for p, t in zip(pred, zt[:, j], strict=True)) / len(zt))
    rows, cols = [sum(row) for row in r], [sum(r[i][j] for i in range(n_codes)) for j in range(n_factors)]
    total = sum(rows)
    d = sum(rows[i] / total * dlib_one_minus_entropy(r[i], n_factors) for i in range(n_codes))
    cc = sum(cols[j] / total * dlib_one_minus_entropy([r[i][j] for i in range(n_codes)], n_codes)
             for j in range(n_factors))
    return d, cc, sum(accuracy) / n_factors, np.array(r)


def old_regressor_dci(z, c, seed=0):
    """The form ``dci(importance="gbt")`` had: gradient-boosted regressors (depth 3) on standardised data, the paper's
    exact entropies and an unweighted C."""
    zs, cs = (z - z.mean(0)) / z.std(0), (c - c.mean(0)) / c.std(0)
    n_factors, n_codes = z.shape[1], c.shape[1]
    r = np.zeros((n_codes, n_factors))
    for j in range(n_factors):
        r[:, j] = GradientBoostingRegressor(n_estimators=100, max_depth=3, random_state=seed).fit(
            cs, zs[:, j]).feature_importances_

    def one_minus_h(values, base):
        total = sum(values)
        return 1 + sum(v / total * math.log(v / total, base) for v in values if v > 0)

    d = sum(r[i].sum() / r.sum() * one_minus_h(r[i], n_factors) for i in range(n_codes))
    cc = sum(one_minus_h(r[:, j], n_codes) for j in range(n_factors)) / n_factors
    return d, cc


# ----- MCC ------------------------------------------------------------------------------------------------------
def mixed(n=400, k=4, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.uniform(-1, 1, (n, k))
    h = z[:, rng.permutation(k)] @ (np.eye(k) + 0.4 * rng.normal(size=(k, k))) + 0.2 * rng.normal(size=(n, k))
    return z, h


def test_mcc_equals_cl_icas_definition_by_brute_force():
    z, h = mixed()
    got_in, want_in = M.mcc(factors=z, codes=h), plain_mcc(z, h)
    s = split(z, h, 250)
    got_out = M.mcc(**s)
    want_out = plain_mcc(s["factors"], s["codes"], s["factors_test"], s["codes_test"])
    assert abs(got_in - want_in) < 1e-12 and abs(got_out - want_out) < 1e-12, (got_in - want_in, got_out - want_out)
    assert 0.5 < want_out < 0.99  # a partial recovery: the permutation matters
    # Spearman: Pearson of the ranks (continuous data, no ties)
    ranks = lambda a: np.argsort(np.argsort(a, axis=0), axis=0).astype(float)  # noqa: E731
    assert M.mcc(factors=z, codes=h, method="spearman") == pytest.approx(plain_mcc(ranks(z), ranks(h)), abs=1e-12)


def test_mcc_refuses_unequal_widths_where_the_old_partial_mcc_gave_one():
    z, _ = mixed(k=3)
    two = z[:, [2, 0]] * np.array([2.0, -1.0])  # codes that equal 2 of the 3 factors: factor 1 not recovered at all
    assert old_partial_mcc(z, two) == pytest.approx(1.0, abs=1e-12)  # the negative control: the old form said 1
    with pytest.raises(UserError) as err:
        M.mcc(factors=z, codes=two)
    text = str(err.value)
    assert "ident3d.metrics.mcc: MCC needs as many code dimensions as factors" in text and "got 3 factors and 2 code " \
        "dimensions" in text and "content block" in text and "\n" not in text
    # the best-K matching of wider codes is a number of its own, never called MCC
    wide = np.c_[z, np.random.default_rng(1).normal(size=(len(z), 2))]
    assert matched_corr(z, wide) == pytest.approx(old_partial_mcc(z, wide), abs=1e-12)


def test_reports_name_the_mcc_they_compute():
    rng = np.random.default_rng(2)
    names = [f"c{i}" for i in range(1, 6)] + [f"s{i}" for i in range(1, 6)]
    z = rng.normal(size=(600, 10))
    h = z[:, :5] @ (np.eye(5) + 0.3 * rng.normal(size=(5, 5)))  # 5 codes for the 5 content latents (paper 000)
    args = (z[:400], h[:400], z[400:], h[400:], names, names[:5])
    got = report_mcc(*args)
    want = plain_mcc(z[:400, :5], h[:400], z[400:, :5], h[400:])
    assert got.name == "mcc_content" and abs(got.value - want) < 1e-12 and "c1, c2, c3, c4, c5" in got.note
    nine = report_mcc(z[:400], z[:400, :9], z[400:], z[400:, :9], names, names[:5])  # out_dim 9 for 10 latents
    assert nine.name is None and nine.value is None and "9 code dimensions for 10 factors" in nine.note
    wide = report_mcc(z[:400], np.c_[z[:400], h[:400]], z[400:], np.c_[z[400:], h[400:]], names, names[:5],
                      wider=True)
    assert wide.name == "matched_corr" and wide.value == pytest.approx(1.0) and "not cl-ica's MCC" in wide.note
    # synthetic score: paper 000's shapes give mcc_content and no "mcc"; a constant latent is NaN and left out
    groups = {"content": names[:5], "style": names[5:]}
    zc = z.copy()
    zc[:, 9] = 0.5  # s5 constant
    out = score(h[:400], zc[:400], h[400:], zc[400:], names, groups)
    assert "mcc" not in out and abs(out["mcc_content"] - want) < 1e-12
    lin = plain_linear_r2(zc[:400], h[:400], zc[400:], h[400:])
    assert math.isnan(out["latent_r2/s5"]) and np.isnan(lin[9])
    assert out["linear_r2/style"] == pytest.approx(lin[5:9].mean(), abs=1e-9)
    assert out["linear_r2"] == pytest.approx(lin[:9].mean(), abs=1e-9)
    equal = score(z[:400, :5] * 2, z[:400, :5], z[400:, :5] * 2, z[400:, :5], names[:5], {})
    assert equal["mcc"] == pytest.approx(1.0) and "mcc_content" not in equal


# ----- R^2 ------------------------------------------------------------------------------------------------------
def test_linear_r2_equals_numpy_least_squares_and_a_constant_factor_is_undefined():
    rng = np.random.default_rng(3)
    z = rng.uniform(-1, 1, (300, 4))
    z[:, 3] = 1.0  # a factor that never varies (present_0 of a multi-object store)
    h = np.c_[z[:, 0] + 0.2 * rng.normal(size=300), z[:, 1] + 0.8 * rng.normal(size=300), rng.normal(size=(300, 2))]
    s = split(z, h, 200)
    got = M.r2(**s)
    want = plain_linear_r2(s["factors"], s["codes"], s["factors_test"], s["codes_test"])
    diff = np.abs(got.scores[:3] - want[:3]).max()
    assert diff < 1e-9, diff
    assert np.isnan(got.scores[3]) and np.isnan(want[3]) and got.undefined == {3: "constant in the fit and test splits"}
    # negative control: the old path (scikit-learn's r2_score of the standardised constant, predicted exactly) gave 1
    y_std = np.zeros(100)  # a constant standardised by its fit split
    old_pred = LinearRegression().fit(s["codes"], np.zeros(200)).predict(s["codes_test"])
    assert r2_score(y_std, old_pred) == 1.0
    # content_style: NaN, named and left out of the block means and the columns
    cs = M.content_style(**s, names=["a", "b", "c", "present"], style=["c"], groups={"ab": ["a", "b", "present"]})
    assert cs.undefined == {"present": "constant in the fit and test splits"} and math.isnan(cs.per_factor["present"])
    assert cs.content == pytest.approx(want[:2].mean(), abs=1e-9) and cs.style == pytest.approx(want[2], abs=1e-9)
    assert cs.columns["ab: a"] == pytest.approx(want[0], abs=1e-9) and math.isnan(cs.columns["ab: present"])
    old_content = np.mean([*want[:2], 1.0])  # what the block mean was with the constant's 1.0 in it
    assert old_content > cs.content + 0.1 and 0.4 < cs.content < 0.8, (old_content, cs.content)


def test_constant_factor_only_on_the_test_split_is_undefined_too():
    rng = np.random.default_rng(4)
    z = rng.normal(size=(120, 2))
    z[80:, 1] = 0.0
    got = M.r2(**split(z, z + 0.1 * rng.normal(size=z.shape), 80))
    assert got.undefined == {1: "constant in the test split"} and got.mean() == pytest.approx(got.scores[0])


# ----- DCI gbt --------------------------------------------------------------------------------------------------
def discrete_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 4, (n, 3)).astype(float)
    mix = np.array([[1, 0.5, 0], [0, 1, 0.4], [0.3, 0, 1], [0.2, 0.2, 0.2]])
    return z, z @ mix.T + 0.3 * rng.normal(size=(n, 4))


def test_dci_gbt_equals_disentanglement_libs_definition_on_discrete_factors():
    z, c = discrete_data()
    s = split(z, c, 400)
    got = M.dci(**s, importance="gbt", seed=3)
    d, cc, acc, r = plain_dlib_dci(s["factors"], s["codes"], s["factors_test"], s["codes_test"], seed=3)
    diffs = (abs(got.disentanglement - d), abs(got.completeness - cc), abs(got.informativeness - acc),
             np.abs(got.importance - r).max())
    assert max(diffs) < 1e-12, diffs
    assert 0.2 < d < 0.8 and 0.5 < acc < 1  # a partly mixed code: neither 0 nor 1
    # negative control: the old regressor form misses dlib's D and C by more than 0.1 on the same data
    d_old, c_old = old_regressor_dci(s["factors"], s["codes"])
    assert abs(d_old - d) > 0.1 and abs(c_old - cc) > 0.1, (d_old, d, c_old, cc)


def test_dlib_entropies_and_weights_on_hand_built_matrices():
    r = np.random.default_rng(5).uniform(0, 1, (5, 3)) ** 3
    r[1, 2] = r[4, 0] = 0.0
    d, c, per_code, weights, per_factor = dci_from_importance(r, form="dlib")
    want_code = [dlib_one_minus_entropy(r[i], 3) for i in range(5)]
    want_factor = [dlib_one_minus_entropy(r[:, j], 5) for j in range(3)]
    assert per_code == pytest.approx(want_code, abs=1e-12) and per_factor == pytest.approx(want_factor, abs=1e-12)
    assert d == pytest.approx(sum(r[i].sum() / r.sum() * want_code[i] for i in range(5)), abs=1e-12)
    assert c == pytest.approx(sum(r[:, j].sum() / r.sum() * want_factor[j] for j in range(3)), abs=1e-12)
    assert c != pytest.approx(np.mean(want_factor), abs=1e-3)  # weighted, not the paper's plain mean
    assert dci_from_importance(np.zeros((4, 3)), form="dlib")[:2] == pytest.approx((0.0, 0.0), abs=1e-9)


def test_continuous_factors_are_cut_into_bins_of_the_fit_split():
    rng = np.random.default_rng(6)
    z_fit = np.c_[rng.uniform(-1, 1, 300), rng.integers(0, 3, 300)]
    z_test = np.c_[rng.uniform(-1.2, 1.2, 100), rng.integers(0, 4, 100)]  # beyond the fit range; a new value 3
    y_fit, y_test, cut = factor_classes(z_fit, z_test, n_bins=20)
    lo, hi = z_fit[:, 0].min(), z_fit[:, 0].max()
    plain = lambda x: np.clip(np.floor((x - lo) / ((hi - lo) / 20)), 0, 19)  # noqa: E731  equal widths, fit range
    assert cut == [0] and np.array_equal(y_fit[:, 0], plain(z_fit[:, 0])) and np.array_equal(y_test[:, 0],
                                                                                            plain(z_test[:, 0]))
    assert np.array_equal(y_fit[:, 1], z_fit[:, 1]) and np.array_equal(y_test[:, 1],
                                                                        np.where(z_test[:, 1] < 3, z_test[:, 1], -1))


def test_lasso_dci_and_its_registry_version_are_unchanged():
    z, c = mixed()
    got = M.dci(**split(z, c, 250))
    assert got.completeness == pytest.approx(dci_from_importance(got.importance)[1]) and got.method == "lasso (CV alpha)"
    assert DCI.version == 1 and BUILTIN_SCORES_VERSION == 2  # lasso's numbers are the same; reports' R^2 / MCC not


# ----- misuse: one UserError line each --------------------------------------------------------------------------
Z, H = mixed(n=60, k=3)
S = split(Z, H, 40)
Z3 = split(Z[:6], H[:6], 3)  # the filer's 3 fit samples (R^2 -34.5, MCC 0.87 before)


@pytest.mark.parametrize("call, message", [
    (lambda: M.r2(**Z3), "ident3d.metrics.r2: linear R^2 needs more fit samples than code dimensions + 1 (at least 5 "
                         "for 3 code dimensions), got 3"),
    (lambda: M.r2(**split(Z[:4, :1], H[:4], 2), kind="kernel"), "kernel R^2 needs at least 3 fit samples"),
    (lambda: M.r2(**split(Z[:41, :1], H[:41], 40)), "R^2 needs at least 2 test samples"),
    (lambda: M.mcc(factors=Z[:3], codes=H[:3]), "ident3d.metrics.mcc: MCC needs at least 10 samples, got 3"),
    (lambda: M.mcc(**split(Z[:45], H[:45], 40)), "MCC needs at least 10 samples (test split), got 5"),
    (lambda: M.mcc(factors=Z, codes=H[:, :2]), "got 3 factors and 2 code dimensions"),
    (lambda: M.mcc(factors=np.c_[Z[:, :2], np.ones(60)], codes=H), "factor 2 is constant"),
    (lambda: M.mcc(factors=Z, codes=H, method="kendall"), "method must be pearson or spearman"),
    (lambda: M.r2(**{**S, "factors": Z[:40, 0], "factors_test": Z[40:, 0]}),
     "ident3d.metrics.r2: factors must be a 2-D array (samples x dimensions), got a 1-D array of 40 values"),
    (lambda: M.mcc(factors=Z[:, 0], codes=H[:, 0]), "factors must be a 2-D array"),
    (lambda: M.dci(**{**S, "codes": H[:40, 0]}), "codes must be a 2-D array"),
    (lambda: M.dci(**S, alpha=-1.0), "ident3d.metrics.dci: alpha must be a number > 0"),
    (lambda: M.dci(**S, alpha=float("nan")), "alpha must be a number > 0"),
    (lambda: M.dci(**S, n_estimators=0), "n_estimators must be a whole number >= 1, got 0"),
    (lambda: M.dci(**S, importance="gbt", n_estimators=2.5), "n_estimators must be a whole number >= 1, got 2.5"),
    (lambda: M.dci(**S, importance="svm"), "importance must be one of lasso, forest, gbt"),
    (lambda: M.dci(**S, importance="gbt", n_bins=1), "n_bins must be a whole number >= 2"),
    (lambda: M.dci(**{**S, "factors": np.c_[Z[:40, :2], np.ones(40)]}, importance="gbt"),
     "factor 2 has one value (class) on the fit split"),
    (lambda: M.r2(**S, kind="cubic"), "kind must be linear or kernel"),
    (lambda: M.r2(**S, kind="kernel", n_components=0), "n_components must be a whole number >= 1"),
    (lambda: M.r2(**S, exact_max=-1), "exact_max must be a whole number >= 0"),
    (lambda: M.mig(factors=Z, codes=H, n_bins=1.5), "ident3d.metrics.mig: n_bins must be a whole number >= 2"),
    (lambda: M.probe(factors=(Z[:40, 0] > 0).astype(int), codes=H[:40], factors_test=(Z[40:, 0] > 0).astype(int),
                     codes_test=H[40:], kind="tree"), "kind must be one of linear, knn, mlp"),
])
def test_misuse_is_one_user_error_line(call, message):
    with pytest.raises(UserError) as err:
        call()
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_probe_labels_stay_one_dimensional():
    y = (Z[:, 0] > 0).astype(int)
    assert 0.5 < M.probe(factors=y[:40], codes=H[:40], factors_test=y[40:], codes_test=H[40:]) <= 1.0
