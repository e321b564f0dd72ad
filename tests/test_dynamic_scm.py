"""Dynamic SCMs: split-invariant rollouts, the intervention model (rates, do-distributions, soft shifts), the
must-show (an intervened factor forgets its lagged parents, a non-intervened one does not), spec validation with
one-line errors, and the built-in Temporal Causal3DIdent spec through the API and ``ident3d scm``."""

import copy

import numpy as np
import pytest
from helpers import read_png, run_cli

from ident3d.causal import DynamicSCM, SpecError, builtin_names, load_any, load_dynamic_scm, load_scm

BUILTIN = "temporal_causal3dident"


def _toy():
    """a: AR(1) with a hard do ~ N(0.3, 0.1); b: same-step child of a; c: same-step child of a and b, lagged on
    itself, soft shift +0.5 (wide range: never clipped); k: a sticky category, redrawn by a hard do."""
    return {
        "name": "toy",
        "dynamic": True,
        "nodes": [
            {"name": "a", "range": [-1, 1], "lag_parents": ["a"], "initial": {"type": "uniform"},
             "mechanism": {"type": "truncnorm", "mean": "0.9 * a_prev", "scale": 0.2},
             "intervention": {"p": 0.3, "kind": "hard", "dist": {"type": "additive", "fn": 0.3, "scale": 0.1}}},
            {"name": "b", "parents": ["a"], "range": [-1, 1],
             "mechanism": {"type": "truncnorm", "mean": "a", "scale": 0.2}},
            {"name": "c", "parents": ["a", "b"], "lag_parents": ["c"], "range": [-10, 10],
             "initial": {"type": "additive", "fn": "a", "scale": 0.1},
             "mechanism": {"type": "additive", "fn": "0.5*a + 0.3*b + 0.2*c_prev", "scale": 0.1},
             "intervention": {"p": 0.05, "kind": "soft", "shift": 0.5}},
            {"name": "k", "lag_parents": ["k"], "initial": {"type": "categorical", "categories": ["u", "v", "w"]},
             "mechanism": {"type": "sticky", "parent": "k_prev", "stay": 0.7, "categories": ["u", "v", "w"]},
             "intervention": {"p": 0.2, "kind": "hard", "dist": {"type": "categorical", "categories": ["u", "v", "w"]}}},
        ],
    }


def _node(spec, name):
    return next(n for n in spec["nodes"] if n["name"] == name)


def _edit(fn):
    spec = _toy()
    fn(spec)
    return spec


# ----- determinism ---------------------------------------------------------------------------------------------
def test_rollout_is_split_invariant_and_seeded():
    model = load_dynamic_scm(BUILTIN)
    whole = model.rollout(10, 8, seed=5)
    parts = [model.rollout(4, 8, seed=5, start=0), model.rollout(6, 8, seed=5, start=4)]
    assert whole.latents.shape == (10, 8, 10) and whole.latents.dtype == np.float32
    assert whole.targets.shape == (10, 8, 10) and whole.targets.dtype == bool
    assert np.array_equal(whole.latents, np.concatenate([p.latents for p in parts]))
    assert np.array_equal(whole.targets, np.concatenate([p.targets for p in parts]))
    assert whole.targets[:, 1:].any() and not whole.targets[:, 0].any()  # interventions happen, never at step 0
    assert np.array_equal(whole.index, np.arange(10))
    # a shorter rollout is the prefix of a longer one (step t depends only on steps before it)
    assert np.array_equal(model.rollout(10, 3, seed=5).latents, whole.latents[:, :3])
    other = model.rollout(10, 8, seed=6)
    cont = [j for j, n in enumerate(whole.names) if n != "class"]
    assert (other.latents[..., cont] != whole.latents[..., cont]).mean() > 0.99
    assert not np.array_equal(other.targets, whole.targets)


def test_intervention_free_mode_matches_until_the_first_intervention():
    model = DynamicSCM(_toy())
    obs = model.rollout(300, 12, seed=2, interventions=False)
    live = model.rollout(300, 12, seed=2)
    assert not obs.targets.any() and live.targets.any()
    first = np.where(live.targets.any(axis=2).any(axis=1), live.targets.any(axis=2).argmax(axis=1), 12)
    before = np.arange(12)[None, :] < first[:, None]
    assert before.sum() > 300 and np.array_equal(obs.latents[before], live.latents[before])
    assert not np.array_equal(obs.latents, live.latents)


# ----- the intervention model ----------------------------------------------------------------------------------
def test_intervention_rate_per_node_is_its_p():
    for model, n, length in ((load_dynamic_scm(BUILTIN), 3000, 20), (DynamicSCM(_toy()), 3000, 20)):
        r = model.rollout(n, length, seed=11)
        for j, name in enumerate(r.names):
            inter = model.nodes[name].intervention
            p = inter.p if inter else 0.0
            hits = r.targets[:, 1:, j]
            sd = np.sqrt(p * (1 - p) / hits.size)
            assert abs(hits.mean() - p) <= 3 * sd + 1e-12, (model.name, name, hits.mean(), p)
    r = load_dynamic_scm(BUILTIN).rollout(200, 10, seed=1)  # a multidimensional factor is intervened on as a whole
    pos = [r.names.index(n) for n in ("pos_x", "pos_y", "pos_z")]
    assert (r.targets[..., pos] == r.targets[..., pos[:1]]).all()
    assert not np.array_equal(r.intervened("pos_x"), r.intervened("spot_angle"))


def test_hard_interventions_draw_from_the_do_distribution():
    r = DynamicSCM(_toy()).rollout(3000, 20, seed=3)
    a = r.column("a")[r.intervened("a")]
    assert len(a) > 15000
    assert abs(a.mean() - 0.3) < 0.005 and abs(a.std() - 0.1) < 0.005  # N(0.3, 0.1), not the AR(1) mechanism
    free = r.column("a")[:, 1:][~r.intervened("a")[:, 1:]]
    assert free.std() > 0.3  # measured 0.35: the mechanism's own values spread far wider than the do-distribution
    r = load_dynamic_scm(BUILTIN).rollout(3000, 20, seed=3)
    x = r.column("pos_x")[r.intervened("pos_x")]  # U[-1, 1]: mean 0, sd 1/sqrt(3), flat
    assert abs(x.mean()) < 0.03 and abs(x.std() - 3 ** -0.5) < 0.01
    assert np.allclose(np.histogram(x, bins=4, range=(-1, 1))[0] / len(x), 0.25, atol=0.015)
    k = r.column("class")[r.intervened("class")]
    assert np.allclose(np.bincount(k.astype(int), minlength=7) / len(k), 1 / 7, atol=0.015)


def test_soft_intervention_adds_its_shift_and_sticky_keeps_the_category():
    model = DynamicSCM(_toy())
    live, obs = model.rollout(2000, 6, seed=4), model.rollout(2000, 6, seed=4, interventions=False)
    c = live.names.index("c")
    # steps where only c's soft shift fired, and nothing before it: the value is the observational one + 0.5
    clean = ~np.cumsum(live.targets.any(axis=2), axis=1).astype(bool)
    only_c = live.targets[..., c] & (live.targets.sum(axis=2) == 1)
    only_c[:, 1:] &= clean[:, :-1]
    assert only_c.sum() > 50
    assert np.allclose(live.latents[only_c][:, c] - obs.latents[only_c][:, c], 0.5, atol=1e-5)
    k = obs.column("k")
    assert set(np.unique(k)) == {0.0, 1.0, 2.0}
    stay = (k[:, 1:] == k[:, :-1]).mean()  # 0.7 kept + 0.3 redrawn onto the same of 3 categories = 0.8
    assert abs(stay - 0.8) < 0.01


# ----- the must-show: an intervened factor is independent of its lagged parents --------------------------------
def _lag_corr(child, parent, hit):
    """corr(child_t, parent_{t-1}) over steps t >= 1 where ``hit`` (child intervened) is True / False."""
    c, p, h = child[:, 1:], parent[:, :-1], hit[:, 1:]
    return np.corrcoef(c[h], p[h])[0, 1], np.corrcoef(c[~h], p[~h])[0, 1]


# measured on the built-in (CITRIS's dynamics), 2000 x 50 steps, seed 1: (intervened, non-intervened,
# time-shuffled non-intervened): pos_x <- pos_x: 0.004, 0.831, 0.087; spot_angle <- pos_x: -0.010, 0.597, 0.057;
# spot_hue <- bg_hue: 0.003, -0.720, -0.140 (about 13,000 intervened steps each, so sd(corr) = 0.01 under independence)
@pytest.mark.parametrize("child,parent", [("pos_x", "pos_x"), ("spot_angle", "pos_x"), ("spot_hue", "bg_hue")])
def test_intervened_factor_forgets_its_lagged_parents(child, parent):
    r = load_dynamic_scm(BUILTIN).rollout(2000, 50, seed=1)
    hit = r.intervened(child)
    assert hit[:, 1:].sum() > 8000
    on, off = _lag_corr(r.column(child), r.column(parent), hit)
    assert abs(on) < 0.05, on
    assert abs(off) > 0.3, off
    # shuffling each sequence's time axis keeps the marginals but breaks t-1 -> t: the check then fails
    order = np.argsort(np.random.default_rng(0).random(hit.shape), axis=1)
    shuffled = [np.take_along_axis(x, order, axis=1) for x in (r.column(child), r.column(parent), hit)]
    _, off_shuffled = _lag_corr(*shuffled)
    assert abs(off_shuffled) < 0.3, off_shuffled


# ----- validation ----------------------------------------------------------------------------------------------
BAD = {
    "cycle within a step": (lambda s: _node(s, "a").update(parents=["b"], mechanism={
        "type": "truncnorm", "mean": "0.9 * a_prev + b", "scale": 0.2}), "a", "cycle a -> b -> a"),
    "unknown lag parent": (lambda s: _node(s, "b").update(lag_parents=["zz"], initial={"type": "uniform"}),
                           "b", "unknown lag parent 'zz'"),
    "p above 1": (lambda s: _node(s, "a")["intervention"].update(p=1.5), "a", "intervention 'p' must be a probability"),
    "p not a number": (lambda s: _node(s, "a")["intervention"].update(p="often"), "a", "intervention 'p'"),
    "unknown parent": (lambda s: _node(s, "b").update(parents=["a", "zz"]), "b", "unknown parent 'zz'"),
    "reads x_prev without the lag parent": (lambda s: _node(s, "b")["mechanism"].update(mean="a + 0.1 * b_prev"),
                                            "b", "not among its lag_parents"),
    "lag parent unused": (lambda s: _node(s, "a").update(lag_parents=["a", "c"]), "a", "lag parent(s) ['c']"),
    "no initial with lag parents": (lambda s: _node(s, "a").pop("initial"), "a", "needs 'initial'"),
    "initial reads the previous step": (lambda s: _node(s, "a").update(initial={
        "type": "truncnorm", "mean": "a_prev", "scale": 0.1}), "a", "'initial' reads ['a_prev']"),
    "unknown intervention kind": (lambda s: _node(s, "a")["intervention"].update(kind="gentle"), "a",
                                  "intervention 'kind'"),
    "hard without dist": (lambda s: _node(s, "a")["intervention"].pop("dist"), "a", "needs 'dist'"),
    "dist reads a parent": (lambda s: _node(s, "a")["intervention"].update(dist={
        "type": "truncnorm", "mean": "b", "scale": 0.1}), "a", "dist must not read parents"),
    "soft on a category": (lambda s: _node(s, "k").update(intervention={"p": 0.1, "kind": "soft", "shift": 1}), "k",
                           "categorical node needs 'kind: hard'"),
    "dist with other categories": (lambda s: _node(s, "k")["intervention"]["dist"].update(categories=["u", "v"]),
                                   "k", "the node's categories"),
    "unknown intervention key": (lambda s: _node(s, "a")["intervention"].update(rate=0.1), "a", "['rate']"),
    "shared target, different p": (lambda s: _node(s, "c")["intervention"].update(target="a"), "c",
                                   "target 'a' has p=0.05"),
    "name ends in _prev": (lambda s: s["nodes"].append(
        {"name": "z_prev", "range": [0, 1], "mechanism": {"type": "uniform"}}), "z_prev", "may not end in '_prev'"),
    "unknown node key": (lambda s: _node(s, "a").update(lags=["a"]), "a", "unknown key(s) ['lags']"),
    "static checks still apply": (lambda s: _node(s, "b").update(range=[1, -1]), "b", "low < high"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_dynamic_spec_gives_one_line_error_naming_the_node(case):
    edit, node, expected = BAD[case]
    with pytest.raises(SpecError) as err:
        DynamicSCM(_edit(edit))
    msg = str(err.value)
    assert msg.startswith(f"node '{node}'") and expected in msg and "\n" not in msg, msg


def test_toy_spec_is_valid_and_spec_level_errors():
    model = DynamicSCM(_toy())
    assert model.order == ["a", "b", "c", "k"] and model.names == ["a", "b", "c", "k"]
    g = model.unrolled()
    assert g.edges["a[t]", "b[t]"]["kind"] == "instant" and g.edges["c[t-1]", "c[t]"]["kind"] == "lag"
    assert ("a[t-1]", "c[t]") not in g.edges and g.number_of_nodes() == 8
    spec = _toy()
    spec.pop("dynamic")
    with pytest.raises(SpecError, match="needs 'dynamic: true'"):
        DynamicSCM(spec)
    with pytest.raises(SpecError, match="node 'a': 'lag_parents' is a key of dynamic specs; add 'dynamic: true'"):
        load_scm(spec)
    with pytest.raises(SpecError, match="static SCM"):
        load_dynamic_scm("causal3dident")
    with pytest.raises(SpecError, match="length must be an integer >= 1"):
        model.rollout(3, 0)
    assert model.rollout(0, 4).latents.shape == (0, 4, 4)


@pytest.mark.parametrize("case,node,expected", [
    ("cycle within a step", "a", "cycle"), ("unknown lag parent", "b", "unknown lag parent 'zz'"),
    ("p above 1", "a", "got 1.5"),
])
def test_cli_scm_show_bad_dynamic_spec_exits_2(tmp_path, case, node, expected):
    import yaml

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_edit(BAD[case][0])))
    r = run_cli("scm", "show", str(path))
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"node '{node}'" in lines[0] and expected in lines[0], r.stderr
    assert "Traceback" not in r.stderr


# ----- the built-in spec ---------------------------------------------------------------------------------------
def test_builtin_spec_loads_validates_and_rolls_out_in_range():
    assert BUILTIN in builtin_names()
    model = load_dynamic_scm(BUILTIN)
    r = model.rollout(500, 8, seed=0)
    assert r.latents.shape == (500, 8, 10) and np.isfinite(r.latents).all()
    static = load_scm("causal3dident")
    assert set(r.names) == (set(static.names) - {"rot_gamma"}) | {"class"}  # names the renderer already maps
    for name, node in model.nodes.items():
        x = r.column(name)
        if node.categories is not None:
            assert node.categories == static.class_names and set(np.unique(x)) <= set(range(7))
        else:
            assert node.range == static.nodes[name].range
            assert x.min() >= node.range[0] and x.max() <= node.range[1], name
    assert all(not node.parents for node in model.nodes.values())  # CITRIS: no instantaneous effects
    assert isinstance(load_any(BUILTIN), DynamicSCM) and not isinstance(load_any("causal3dident"), DynamicSCM)
    with pytest.raises(SpecError, match="is a dynamic SCM") as err:
        load_scm(BUILTIN)
    assert "\n" not in str(err.value)


def test_cli_scm_list_show_and_plot_a_dynamic_spec(tmp_path):
    r = run_cli("scm", "list")
    assert r.returncode == 0 and BUILTIN in r.stdout and "causal3dident" in r.stdout
    r = run_cli("scm", "show", BUILTIN)
    assert r.returncode == 0, r.stderr
    assert "lag parents" in r.stdout and "spot_angle, pos_x" in r.stdout and "p=0.142857 hard" in r.stdout
    assert "(target" in r.stdout and "position)" in r.stdout and "rotation)" in r.stdout  # shared targets
    text = run_cli("scm", "show", BUILTIN, "--yaml").stdout
    spec = copy.deepcopy(load_dynamic_scm(BUILTIN).spec)
    path = tmp_path / "copy.yaml"
    path.write_text(text)
    assert load_dynamic_scm(path).spec == spec
    r = run_cli("scm", "plot", BUILTIN, "--out", str(tmp_path / "g.png"))
    assert r.returncode == 0, r.stderr
    h, w, colours = read_png(tmp_path / "g.png")
    assert h > 200 and w > 200 and colours > 20
    r = run_cli("sample", "--scm", BUILTIN, "--n", "3", "--out", str(tmp_path / "z.npz"))
    assert r.returncode == 2 and "is a dynamic SCM" in r.stderr


def test_readme_example_is_a_valid_dynamic_spec():
    from pathlib import Path

    from ident3d.causal import parse_spec

    text = (Path(__file__).resolve().parents[1] / "docs" / "causal.md").read_text()
    block = text.split("## Dynamic SCMs (sequences)")[1].split("```yaml\n")[1].split("```")[0]
    model = load_dynamic_scm(parse_spec(block))
    assert model.nodes["x"].lag_parents == ("x",) and model.nodes["y"].parents == ("x",)
    assert model.rollout(4, 5, seed=0).latents.shape == (4, 5, 2)
