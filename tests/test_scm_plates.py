"""Object plates in SCM specs (issue 35 §1): templates expanded per object, a variable object count with absent
objects zero-padded, the two multi-object built-ins, split-invariant sampling and one-line refusals."""

import copy

import numpy as np
import pytest
import yaml
from helpers import run_cli

from ident3d.causal import SCM, load_scm, parse_spec, read_spec_text
from ident3d.causal.plates import expand_plates

TEMPLATES = [
    {"name": "obj{k}_hue", "parents": ["hue_shift"], "range": [-1, 1],
     "mechanism": {"type": "truncnorm", "mean": "hue_shift", "scale": 0.3}},
    {"name": "obj{k}_pos_x", "parents": ["obj{k}_hue", "obj{k-1}_pos_x"], "range": [-1, 1],
     "mechanism": {"type": "truncnorm", "mean": "0.3 * obj{k}_hue + 0.6 * obj{k-1}_pos_x", "scale": 0.3},
     "boundary": {"type": "truncnorm", "mean": "0.3 * obj{k}_hue", "scale": 0.3}},
]


def _spec(slots=3, low=1, **extra):
    """A plate spec: a shared hue_shift, per object a hue (hue_shift ->) and an x (own hue ->, object k-1's x ->)."""
    return {"name": "plates", "objects": {"slots": slots, "min": low},
            "nodes": [{"name": "hue_shift", "range": [-1, 1], "mechanism": {"type": "uniform"}}],
            "object_nodes": copy.deepcopy(TEMPLATES), **extra}


# ----- expansion ------------------------------------------------------------------------------------------------
def test_expansion_for_three_slots_gives_exactly_the_expected_nodes_and_edges():
    scm = SCM(_spec())
    assert list(scm.nodes) == ["hue_shift", "present_0", "present_1", "present_2",
                               "obj0_hue", "obj0_pos_x", "obj1_hue", "obj1_pos_x", "obj2_hue", "obj2_pos_x"]
    assert set(scm.graph.edges) == {
        ("hue_shift", "obj0_hue"), ("hue_shift", "obj1_hue"), ("hue_shift", "obj2_hue"),  # shared -> every object
        ("obj0_hue", "obj0_pos_x"), ("obj1_hue", "obj1_pos_x"), ("obj2_hue", "obj2_pos_x"),  # within an object
        ("obj0_pos_x", "obj1_pos_x"), ("obj1_pos_x", "obj2_pos_x"),  # object k-1 -> object k, k >= 1 only
        ("present_0", "present_1"), ("present_1", "present_2"),  # the count chain (present_0 always: min 1)
    }
    assert scm.plates.objects == (("obj0_hue", "obj0_pos_x"), ("obj1_hue", "obj1_pos_x"), ("obj2_hue", "obj2_pos_x"))
    assert scm.plates.present == ("present_0", "present_1", "present_2")
    assert scm.nodes["obj0_pos_x"].mechanism.mean.text == "0.3 * obj0_hue"  # object 0: the boundary mechanism
    assert scm.nodes["obj2_pos_x"].mechanism.mean.text == "0.3 * obj2_hue + 0.6 * obj1_pos_x"
    flat, plates = expand_plates(_spec())
    assert "objects" not in flat and "object_nodes" not in flat and plates.slots == 3
    assert SCM(flat).sample(50, seed=1).latents.tobytes() != b""  # the expanded spec is an ordinary one
    assert expand_plates({"nodes": []}) == ({"nodes": []}, None)  # no plates: unchanged


def test_expanded_spec_samples_like_the_plain_sampler_and_mechanisms_read_the_right_objects():
    scm = SCM(_spec(low=3))
    flat, _ = expand_plates(_spec(low=3))
    s, plain = scm.sample(20_000, seed=4), SCM(flat).sample(20_000, seed=4)
    assert np.array_equal(s.latents, plain.latents)  # all present (min = slots): nothing is masked
    v = s.values()
    assert np.corrcoef(v["obj1_pos_x"], v["obj2_pos_x"])[0, 1] > 0.3  # the cross-object edge is real
    assert np.corrcoef(v["hue_shift"], v["obj2_hue"])[0, 1] > 0.5  # the shared edge is real


# ----- the built-ins --------------------------------------------------------------------------------------------
def _corr(a, b):
    return float(np.corrcoef(a, b)[0, 1])


def test_causal_builtin_shows_cross_object_dependence_and_the_independent_one_does_not():
    rng = np.random.default_rng(0)
    causal = load_scm("multi3dident_causal").sample(20_000, seed=0).values()
    indep = load_scm("multi3dident_independent").sample(20_000, seed=0).values()
    assert set(causal) == set(indep)  # same nodes
    assert abs(_corr(causal["obj0_pos_x"], causal["obj1_pos_x"])) > 0.3
    assert abs(_corr(causal["obj0_pos_y"], causal["obj1_pos_y"])) > 0.3
    assert _corr(causal["obj0_hue"], causal["obj1_hue"]) > 0.2  # the shared hues drive every object's hue
    assert abs(_corr(causal["obj0_pos_x"], rng.permutation(causal["obj1_pos_x"]))) < 0.05  # shuffled control
    for a, b in (("obj0_pos_x", "obj1_pos_x"), ("obj0_pos_y", "obj1_pos_y"), ("obj0_hue", "obj1_hue")):
        assert abs(_corr(indep[a], indep[b])) < 0.05, (a, b)
    # within an object the hue depends on the class, as in Causal3DIdent: class means increase with the class
    means = [causal["obj0_hue"][causal["obj0_class"] == c].mean() for c in range(7)]
    assert np.all(np.diff(means) > 0) and means[-1] - means[0] > 0.3
    means = [indep["obj0_hue"][indep["obj0_class"] == c].mean() for c in range(7)]
    assert max(means) - min(means) < 0.05


def test_builtins_are_listed_and_their_yaml_round_trips():
    r = run_cli("scm", "list")
    assert r.returncode == 0 and "multi3dident_independent" in r.stdout and "multi3dident_causal" in r.stdout
    for name in ("multi3dident_independent", "multi3dident_causal"):
        scm = load_scm(name)
        assert scm.plates.slots == 4 and scm.plates.min == 2 and len(scm.plates.templates) == 8
        assert scm.nodes["obj0_class"].mechanism.categories == load_scm("causal3dident").class_names
        assert SCM(parse_spec(read_spec_text(name))).spec == scm.spec
        assert scm.resolve("positions")[:1] == ["spot_angle"] and "obj3_pos_z" in scm.resolve("positions")
        r = run_cli("scm", "show", name)
        assert r.returncode == 0 and "obj3_hue" in r.stdout and "present_3" in r.stdout, r.stderr


# ----- object count and absent objects --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["multi3dident_independent", "multi3dident_causal"])
def test_absent_objects_are_exactly_zero_and_counts_are_uniform_over_min_to_slots(name):
    s = load_scm(name).sample(20_000, seed=2)
    present, objects = s.present, s.object_latents()
    assert present.shape == (20_000, 4) and objects.shape == (20_000, 4, 8)
    assert np.all(present[:, :-1] >= present[:, 1:])  # objects 0..n-1 present
    assert np.all(objects[~present] == 0) and np.all(np.abs(objects[present]).sum(-1) > 0)
    counts = np.bincount(present.sum(1), minlength=5)
    assert counts[:2].sum() == 0 and np.all(np.abs(counts[2:] / 20_000 - 1 / 3) < 0.02), counts
    assert np.array_equal(s.column("present_3") > 0.5, present[:, 3])


def test_spec_probabilities_set_the_count_distribution():
    spec = _spec(slots=4, low=1)
    spec["objects"]["probs"] = [0.1, 0.2, 0.3, 0.4]
    counts = np.bincount(SCM(spec).sample(20_000, seed=3).present.sum(1), minlength=5)
    assert np.allclose(counts[1:] / 20_000, [0.1, 0.2, 0.3, 0.4], atol=0.015), counts
    spec["objects"] = {"slots": 3}  # min defaults to slots: always 3 objects
    assert SCM(spec).sample(100, seed=0).present.all()


def test_interventions_and_transforms_keep_absent_objects_zero():
    scm = load_scm("multi3dident_causal")
    s = scm.do(present_2=0).sample(2000, seed=5)
    assert not s.present[:, 2:].any() and s.present[:, :2].all()  # the chain: no slot 2, so no slot 3
    assert np.all(s.object_latents()[:, 2:] == 0)
    base = scm.sample(2000, seed=5)
    moved = scm.transform(base, "positions", seed=1)
    assert np.array_equal(moved.present, base.present)
    assert np.all(moved.object_latents()[~moved.present] == 0)
    assert not np.array_equal(moved.object_latents(), base.object_latents())


# ----- determinism ----------------------------------------------------------------------------------------------
def test_split_sampling_equals_one_shot_bit_for_bit(tmp_path):
    scm = load_scm("multi3dident_causal")
    whole = scm.sample(1000, seed=7)
    parts = [scm.sample(n, seed=7, start=a) for a, n in ((0, 137), (137, 463), (600, 400))]
    assert np.array_equal(np.concatenate([p.latents for p in parts]), whole.latents)
    assert np.array_equal(np.concatenate([p.present for p in parts]), whole.present)
    assert np.concatenate([p.object_latents() for p in parts]).tobytes() == whole.object_latents().tobytes()
    assert not np.array_equal(scm.sample(1000, seed=8).latents, whole.latents)
    for args in (("--n", "300"), ("--n", "200", "--start", "300"), ("--n", "500")):
        out = tmp_path / f"{'_'.join(args)}.npz"
        assert run_cli("sample", "--scm", "multi3dident_causal", "--seed", "7", *args, "--out", out).returncode == 0
    a, b, c = (np.load(tmp_path / f) for f in ("--n_300.npz", "--n_200_--start_300.npz", "--n_500.npz"))
    assert np.array_equal(np.concatenate([a["present"], b["present"]]), c["present"])
    assert np.concatenate([a["latents"], b["latents"]]).tobytes() == c["latents"].tobytes()
    assert np.array_equal(c["latents"], whole.latents[:500])


# ----- refusals -------------------------------------------------------------------------------------------------
def _cycle(s):
    s["object_nodes"] = [
        {"name": "obj{k}_a", "parents": ["obj{k+1}_b"], "range": [-1, 1],
         "mechanism": {"type": "truncnorm", "mean": "obj{k+1}_b"}, "boundary": {"type": "uniform"}},
        {"name": "obj{k}_b", "parents": ["obj{k-1}_a"], "range": [-1, 1],
         "mechanism": {"type": "truncnorm", "mean": "obj{k-1}_a"}, "boundary": {"type": "uniform"}}]


BAD = {
    "cycle across objects": (_cycle, "makes a cycle obj0_a -> obj1_b -> obj0_a"),
    "slots 0": (lambda s: s["objects"].update(slots=0), "'slots' must be an integer from 1 to 8"),
    "slots 9": (lambda s: s["objects"].update(slots=9), "'slots' must be an integer from 1 to 8"),
    "min above slots": (lambda s: s["objects"].update(min=4), "'min' must be an integer from 1 to slots (3)"),
    "unknown template": (lambda s: s["object_nodes"][1].update(parents=["obj{k}_hu", "obj{k-1}_pos_x"]),
                         "parent 'obj{k}_hu' names no template"),
    "template in a shared node": (lambda s: s["nodes"].append(
        {"name": "mean_x", "parents": ["obj{k}_pos_x"], "mechanism": {"type": "deterministic", "fn": "obj{k}_pos_x"}}),
        "node 'mean_x': 'obj{k}_pos_x' is an object template in a shared node"),
    "template in a change set": (lambda s: s.update(change_sets={"pos": ["obj{k}_pos_x"]}),
                                 "change_sets names the template 'obj{k}_pos_x'"),
    "no boundary": (lambda s: s["object_nodes"][1].pop("boundary"), "object 0 has no 'obj{k-1}_pos_x'"),
    "bad placeholder": (lambda s: s["object_nodes"][0].update(parents=["hue_shift"], mechanism={
        "type": "truncnorm", "mean": "obj{k*2}_hue"}), "unknown placeholder '{k*2}'"),
    "objects without templates": (lambda s: s.pop("object_nodes"), "'objects' needs 'object_nodes' too"),
    "probs of the wrong length": (lambda s: s["objects"].update(probs=[0.5, 0.5]), "must list 3 non-negative"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_plate_spec_is_refused_in_one_line_with_exit_2_and_no_file(case, tmp_path):
    spec = _spec()
    BAD[case][0](spec)
    path, out = tmp_path / "bad.yaml", tmp_path / "z.npz"
    path.write_text(yaml.safe_dump(spec))
    r = run_cli("sample", "--scm", path, "--n", "5", "--out", out)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and BAD[case][1] in lines[0], r.stderr
    assert "Traceback" not in r.stderr and not out.exists() and not list(tmp_path.glob("z*"))
    r = run_cli("scm", "show", path)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.strip().splitlines() == [
        lines[0].replace("ident3d sample:", "ident3d scm:")]
