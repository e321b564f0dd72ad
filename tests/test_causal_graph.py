"""Causal structure of causal3dident: edges show dependence, d-separated pairs show none;
do() cuts edges; latent transformations change exactly their change set."""

import networkx as nx
import numpy as np
import pytest
from scipy import stats

from ident3d.causal import load_scm

N = 50_000


@pytest.fixture(scope="module")
def c3d():
    scm = load_scm("causal3dident")
    return scm, scm.sample(N, seed=3)


def _design(s, names, class_node="class"):
    cols = [np.ones(len(s))]
    for n in names:
        if n == class_node:
            cols += [(s.classes == k).astype(float) for k in range(1, 7)]
        else:
            cols.append(s.column(n).astype(float))
    return np.stack(cols, 1)


def _residual(y, design):
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    return y - design @ coef


def _edge_pvalue(s, parent, child, others):
    """p-value that child depends on parent given the child's other parents."""
    y = _residual(s.column(child).astype(float), _design(s, others))
    if parent == "class":
        return stats.f_oneway(*[y[s.classes == k] for k in range(7)]).pvalue
    x = _residual(s.column(parent).astype(float), _design(s, others))
    return stats.pearsonr(x, y).pvalue


def test_each_edge_shows_dependence_given_the_other_parents(c3d):
    scm, s = c3d
    edges = list(scm.graph.edges)
    assert len(edges) == 11
    for parent, child in edges:
        others = [p for p in scm.nodes[child].parents if p != parent]
        p = _edge_pvalue(s, parent, child, others)
        assert p < 1e-6, f"edge {parent} -> {child} shows no dependence (p={p:.2g})"


def _chi2_independent(a, b, bins=5):
    qa = np.searchsorted(np.quantile(a, np.linspace(0, 1, bins + 1)[1:-1]), a)
    qb = np.searchsorted(np.quantile(b, np.linspace(0, 1, bins + 1)[1:-1]), b)
    table = np.zeros((bins, bins))
    np.add.at(table, (qa, qb), 1)
    return stats.chi2_contingency(table).pvalue


@pytest.mark.parametrize("a,b", [("bg_hue", "spot_hue"), ("bg_hue", "pos_x"),
                                 ("spot_hue", "rot_gamma"), ("bg_hue", "spot_angle")])
def test_pairs_without_a_path_are_independent(c3d, a, b):
    """No open path (every path has a collider, e.g. bg_hue -> obj_hue <- class -> pos_x)."""
    scm, s = c3d
    assert nx.is_d_separator(scm.graph, {a}, {b}, set())
    assert _chi2_independent(s.column(a), s.column(b)) > 1e-3


def test_dependent_pair_is_detected_by_the_same_test(c3d):
    _, s = c3d
    assert _chi2_independent(s.column("pos_x"), s.column("pos_y")) < 1e-6  # via class


def test_spotlight_is_independent_of_class_given_position(c3d):
    _, s = c3d
    assert _edge_pvalue(s, "class", "spot_angle", ["pos_x", "pos_y"]) > 1e-3
    assert _edge_pvalue(s, "class", "spot_angle", []) < 1e-6  # marginally dependent


def test_do_cuts_incoming_edges_and_removes_dependence():
    scm = load_scm("causal3dident")
    cut = scm.do(pos_x=0.3, pos_y=-0.2)
    assert set(cut.graph.predecessors("pos_x")) == set() and ("class", "pos_x") in scm.graph.edges
    s = cut.sample(N, seed=5)
    assert np.all(s.column("pos_x") == np.float32(0.3)) and np.all(s.column("pos_y") == np.float32(-0.2))
    t = s.column("spot_angle")
    assert stats.f_oneway(*[t[s.classes == k] for k in range(7)]).pvalue > 1e-3
    m = 0.8 * 0.3 + 0.2 * -0.2
    dist = stats.truncnorm((-1 - m) / 0.3, (1 - m) / 0.3, loc=m, scale=0.3)
    assert stats.kstest(t, dist.cdf).pvalue > 1e-3
    # class is still a cause of the rest
    assert stats.f_oneway(*[s.column("rot_alpha")[s.classes == k] for k in range(7)]).pvalue < 1e-6


def test_do_on_class_by_name_and_soft_intervention():
    scm = load_scm("causal3dident")
    s = scm.do(**{"class": "Cow"}).sample(1000, seed=0)
    assert np.all(s.classes == 3)
    soft = scm.do(obj_hue={"type": "uniform"})
    u = soft.sample(N, seed=0)
    assert stats.pearsonr(u.column("obj_hue"), u.column("bg_hue")).pvalue > 1e-3
    assert stats.kstest(u.column("obj_hue"), stats.uniform(-1, 2).cdf).pvalue > 1e-3


@pytest.mark.parametrize("change", ["positions", "hues", "rotations", "positions+hues"])
def test_transform_changes_exactly_the_change_set(c3d, change):
    scm, s = c3d
    t = scm.transform(s, change=change, seed=11)
    targets = scm.resolve(change)
    for j, name in enumerate(s.names):
        same = s.latents[:, j] == t.latents[:, j]
        if name in targets:
            assert same.mean() < 0.001, name
        else:
            assert same.all(), name
    assert np.array_equal(t.classes, s.classes)
    assert np.abs(t.latents).max() <= 1.0


def test_transform_draws_truncated_normals_around_the_current_value(c3d):
    scm, s = c3d
    t = scm.transform(s, change=["bg_hue"], seed=2, sigma=0.2)
    z, zt = s.column("bg_hue").astype(float), t.column("bg_hue").astype(float)
    mid = np.abs(z) < 0.2
    d = zt[mid] - z[mid]
    assert abs(d.mean()) < 0.01 and abs(d.std() - 0.2) < 0.01


def test_transform_propagates_to_descendants_as_a_counterfactual(c3d):
    scm, s = c3d
    t = scm.transform(s, change=["pos_x"], seed=4, propagate=True)
    changed = {n for j, n in enumerate(s.names) if not np.array_equal(s.latents[:, j], t.latents[:, j])}
    assert changed == {"pos_x", "spot_angle"}
    # the spotlight keeps its own noise: its quantile under the new parents equals the old one
    mech = scm.nodes["spot_angle"].mechanism
    u_old = mech.noise(s.values(), s.values()["spot_angle"])
    u_new = mech.noise(t.values(), t.values()["spot_angle"])
    ok = (u_old > 0.01) & (u_old < 0.99)
    assert np.abs(u_old[ok] - u_new[ok]).max() < 1e-3


def test_transform_is_split_invariant_and_respects_p_change(c3d):
    scm, s = c3d
    whole = scm.transform(s, change="hues", seed=9, p_change=0.5)
    sub = scm.sample(500, seed=3, start=200)
    part = scm.transform(sub, change="hues", seed=9, p_change=0.5)
    assert np.array_equal(whole.latents[200:700], part.latents)
    moved = (whole.column("obj_hue") != s.column("obj_hue")).mean()
    assert 0.48 < moved < 0.52


def test_content_style_partition_and_default_p_change():
    scm = load_scm("content_style")
    content, style = scm.partition("style")
    assert content == ["c1", "c2", "c3", "c4", "c5"] and style == ["s1", "s2", "s3", "s4", "s5"]
    s = scm.sample(20_000, seed=0)
    t = scm.transform(s, change="style", seed=1)
    moved = (t.latents != s.latents).mean(0)
    assert np.all(moved[:5] == 0) and np.all(np.abs(moved[5:] - 0.75) < 0.02)
