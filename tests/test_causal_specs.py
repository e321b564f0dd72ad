"""Spec validation: every malformed spec gives a one-line SpecError naming the offending node."""

import copy

import pytest

from ident3d.causal import SCM, SpecError, load_scm, parse_spec


def _base():
    return {
        "name": "toy",
        "nodes": [
            {"name": "k", "mechanism": {"type": "categorical", "categories": ["a", "b"]}},
            {"name": "x", "range": [-1, 1], "mechanism": {"type": "uniform"}},
            {"name": "y", "parents": ["x", "k"], "range": [-1, 1],
             "mechanism": {"type": "truncnorm", "scale": 0.5,
                           "mean": {"type": "linear", "coef": {"x": 0.5},
                                    "offsets": {"parent": "k", "values": [0.1, -0.1]}}}},
        ],
    }


def _edit(fn):
    spec = _base()
    fn(spec)
    return spec


def _node(spec, name):
    return next(n for n in spec["nodes"] if n["name"] == name)


BAD = {
    "cycle": (lambda s: (_node(s, "x").update(parents=["y"], mechanism={"type": "truncnorm", "mean": "y"})),
              "cycle"),
    "unknown parent": (lambda s: _node(s, "y").update(parents=["x", "k", "zz"]), "unknown parent 'zz'"),
    "mechanism reads a non-parent": (lambda s: _node(s, "y").update(parents=["k"]), "not among its parents"),
    "unused parent": (lambda s: _node(s, "x").update(parents=["k"]), "not used"),
    "range reversed": (lambda s: _node(s, "x").update(range=[1, -1]), "low < high"),
    "range not numbers": (lambda s: _node(s, "x").update(range=["a", 1]), "two finite numbers"),
    "truncnorm without range": (lambda s: _node(s, "y").pop("range"), "needs a 'range"),
    "unknown mechanism": (lambda s: _node(s, "x").update(mechanism={"type": "gamma"}), "unknown mechanism 'gamma'"),
    "mechanism not a mapping": (lambda s: _node(s, "x").update(mechanism="uniform"), "must be a mapping"),
    "wrong type scale": (lambda s: _node(s, "y")["mechanism"].update(scale="big"), "positive number"),
    "negative scale": (lambda s: _node(s, "y")["mechanism"].update(scale=-1), "positive number"),
    "unknown mechanism key": (lambda s: _node(s, "y")["mechanism"].update(sd=1), "unknown key(s) ['sd']"),
    "unknown function type": (lambda s: _node(s, "y")["mechanism"].update(mean={"type": "spline"}), "unknown function type"),
    "table wrong length": (lambda s: _node(s, "y")["mechanism"]["mean"]["offsets"].update(values=[1, 2, 3]), "has 3 values"),
    "table over continuous": (lambda s: (_node(s, "y").update(parents=["x"]),
                                         _node(s, "y")["mechanism"]["mean"]["offsets"].update(parent="x")),
                              "not categorical"),
    "bad expression": (lambda s: _node(s, "y")["mechanism"].update(mean="x +"), "cannot parse"),
    "unsafe expression": (lambda s: _node(s, "y")["mechanism"].update(mean="__import__('os')"), "unknown function"),
    "parents wrong type": (lambda s: _node(s, "y").update(parents="x"), "must be a list"),
    "duplicate node": (lambda s: s["nodes"].append(copy.deepcopy(_node(s, "x"))), "defined twice"),
    "bad name": (lambda s: _node(s, "x").update(name="my node"), "identifier"),
    "unknown node key": (lambda s: _node(s, "x").update(colour="red"), "unknown key(s) ['colour']"),
    "probs do not sum to 1": (lambda s: _node(s, "k")["mechanism"].update(probs=[0.2, 0.2]), "sum to 1"),
    "missing mechanism": (lambda s: _node(s, "x").pop("mechanism"), "missing 'mechanism'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_spec_gives_one_line_error(case):
    edit, expected = BAD[case]
    with pytest.raises(SpecError) as err:
        SCM(_edit(edit))
    msg = str(err.value)
    assert expected in msg and "\n" not in msg
    if case not in {"duplicate node", "bad name"}:
        assert msg.startswith("node '"), msg


def test_base_spec_is_valid_and_spec_level_errors():
    scm = SCM(_base())
    assert scm.class_node == "k" and scm.names == ["x", "y"]
    with pytest.raises(SpecError, match="non-empty list"):
        SCM({"nodes": []})
    with pytest.raises(SpecError, match="unknown top-level"):
        SCM({**_base(), "edges": []})
    with pytest.raises(SpecError, match="not valid YAML at line"):
        parse_spec("nodes: [\n  - {name: x\n", "bad.yaml")
    with pytest.raises(SpecError, match="unknown node, group or change set 'wheels'"):
        load_scm("causal3dident").resolve("positions+wheels")


def test_do_rejects_bad_values():
    scm = load_scm("causal3dident")
    with pytest.raises(SpecError, match="outside its range"):
        scm.do(pos_x=3.0)
    with pytest.raises(SpecError, match="unknown node 'speed'"):
        scm.do(speed=1.0)
    with pytest.raises(SpecError, match="must be one of"):
        scm.do(**{"class": "Unicorn"})


def test_expression_and_additive_mechanisms_work():
    spec = {"nodes": [
        {"name": "a", "range": [0, 1], "mechanism": {"type": "uniform"}},
        {"name": "b", "parents": ["a"], "mechanism": {"type": "deterministic", "fn": "sin(pi * a)"}},
        {"name": "c", "parents": ["a", "b"],
         "mechanism": {"type": "additive", "fn": "a + 2 * b", "noise": "laplace", "scale": 0.1}},
        {"name": "h", "parents": ["a"], "range": [-1, 1], "mechanism": {
            "type": "truncnorm", "scale": 0.01, "mean": {"type": "circular", "weights": {"a": 1.0}}}},
    ]}
    import numpy as np
    s = SCM(spec).sample(5000, seed=0)
    a, b, c = s.column("a"), s.column("b"), s.column("c")
    assert np.allclose(b, np.sin(np.pi * a), atol=1e-6)
    e = c - (a + 2 * b)
    assert abs(np.median(e)) < 0.01 and abs(np.mean(np.abs(e)) - 0.1) < 0.01  # Laplace(0, 0.1)
    # circular mean of one angle is the angle itself (wrapped into one period of 4 raw units)
    assert np.allclose(s.column("h"), a, atol=0.05)
