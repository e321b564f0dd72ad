"""Plates: per-object node templates in an SCM spec, expanded into an ordinary spec for multi-object scenes.

A spec may declare ``objects: {slots: K, min: m, probs: [...]}`` and ``object_nodes:``, node templates whose
strings (name, parents, mechanism, group, description) write the object's slot as ``{k}`` and a neighbour's as
``{k-1}``, ``{k+1}``, ... . Expansion makes K copies of every template (slot-major: ``obj0_*``, ``obj1_*``, ...)
after the shared ``nodes`` and a ``present_{k}`` node per slot; the result is an ordinary spec that the sampler
samples unchanged. A template that reads another object (a parent with ``{k-1}``, ``{k+1}``, ...) needs
``boundary:``, the mechanism of the slots that lack that neighbour (it reads no other object).

The number of objects n is drawn from ``probs`` over m..K (uniform by default; ``min`` defaults to K): slots
0..n-1 are present, as a chain present_k ~ Bernoulli(P(n > k | n >= k)) * present_{k-1}. Absent objects'
nodes are still drawn (so a present object's values do not depend on how many follow it) and are stored as 0
(:meth:`Plates.mask`), the (N, K, D) zero-padded layout of Brady et al. 2023.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from ident3d.causal.errors import SpecError, check_keys

MAX_SLOTS = 8  # objects per scene
PLATE_KEYS = ("objects", "object_nodes")
PRESENT = "present_{k}"  # the template of the presence nodes, readable by object templates
_OBJECT_KEYS = {"slots", "min", "probs"}
_TEMPLATE_KEYS = {"name", "parents", "mechanism", "boundary", "range", "group", "description"}
_PLACEHOLDER = re.compile(r"\{k(?:([+-])(\d+))?\}")
_TEMPLATED = re.compile(r"\{\s*k\s*(?:[^A-Za-z0-9_{}\s][^{}]*)?\}")  # {k}, {k-1} and typos ({k - 1}, {k*2})


@dataclass(frozen=True)
class Plates:
    """The object layout of an expanded spec: K slots, the count distribution and every slot's node names."""

    slots: int
    min: int
    probs: tuple[float, ...]  # P(n = min), ..., P(n = slots)
    templates: tuple[str, ...]
    objects: tuple[tuple[str, ...], ...]  # per slot, its nodes in template order
    present: tuple[str, ...]  # present_0 .. present_{K-1}

    def mask(self, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The values with every absent object's nodes set to 0 (shared and presence nodes unchanged)."""
        out = dict(values)
        for names, flag in zip(self.objects, self.present, strict=True):
            keep = np.asarray(values[flag]) > 0.5
            for name in names:
                out[name] = np.where(keep, values[name], 0.0)
        return out

    def present_matrix(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """(N, K) bool: which slots hold an object in each row."""
        return np.stack([np.asarray(values[flag]) > 0.5 for flag in self.present], axis=1)


def _templated(value: object) -> str | None:
    """The first string (or mapping key) inside ``value`` that uses a ``{k}`` placeholder, or None."""
    if isinstance(value, str):
        return value if _TEMPLATED.search(value) else None
    if isinstance(value, Mapping):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        return None
    return next((found for item in items if (found := _templated(item)) is not None), None)


def check_no_templates(spec: Mapping[str, Any]) -> None:
    """Refuse a ``{k}`` placeholder anywhere but ``object_nodes`` (shared nodes, change sets, transform; a
    description is prose and may say anything)."""
    hint = "'{k}' templates belong under 'object_nodes' (with 'objects: {slots: K}')"
    nodes = spec.get("nodes")
    for i, raw in enumerate(nodes if isinstance(nodes, list) else []):
        found = _templated({k: v for k, v in raw.items() if k != "description"} if isinstance(raw, Mapping) else raw)
        if found is not None:
            name = raw.get("name") if isinstance(raw, Mapping) else None
            label = f"node '{name}'" if isinstance(name, str) else f"nodes[{i}]"
            raise SpecError(f"{label}: '{found}' is an object template in a shared node; {hint}")
    for key in ("class_node", "change_sets", "transform"):
        found = _templated(spec.get(key))
        if found is not None:
            raise SpecError(f"spec: {key} names the template '{found}'; {hint}, and a group shared by the "
                            "templates (e.g. group: positions) names every object's copy")


def _objects(raw: object) -> tuple[int, int, tuple[float, ...]]:
    """(slots, min, probabilities of min..slots objects) from the ``objects`` mapping."""
    if not isinstance(raw, Mapping):
        raise SpecError(f"spec: 'objects' must be a mapping like {{slots: 4, min: 2}}, got {raw!r}")
    check_keys(raw, _OBJECT_KEYS, "objects")
    slots = raw.get("slots")
    if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= MAX_SLOTS:
        raise SpecError(f"objects: 'slots' must be an integer from 1 to {MAX_SLOTS} (objects per scene), "
                        f"got {slots!r}")
    low = raw.get("min", slots)
    if isinstance(low, bool) or not isinstance(low, int) or not 1 <= low <= slots:
        raise SpecError(f"objects: 'min' must be an integer from 1 to slots ({slots}), got {low!r}")
    count = slots - low + 1
    probs = raw.get("probs")
    if probs is None:
        return slots, low, (1.0 / count,) * count
    ok = isinstance(probs, list) and len(probs) == count and all(
        isinstance(p, int | float) and not isinstance(p, bool) and np.isfinite(p) and p >= 0 for p in probs)
    if not ok:
        raise SpecError(f"objects: 'probs' must list {count} non-negative numbers, the probabilities of "
                        f"{low}..{slots} objects, got {probs!r}")
    if not np.isclose(sum(probs), 1.0, atol=1e-6):
        raise SpecError(f"objects: 'probs' must sum to 1, they sum to {sum(probs):g}")
    return slots, low, tuple(float(p) for p in probs)


def _present_nodes(slots: int, low: int, probs: tuple[float, ...]) -> list[dict[str, Any]]:
    """present_0..present_{K-1}: slots below ``min`` always filled, then P(n > k | n >= k) along the chain."""
    tail = [sum(probs[max(j - low, 0):]) if j <= slots else 0.0 for j in range(slots + 2)]  # P(n >= j)
    nodes = []
    for k in range(slots):
        name = f"present_{k}"
        if k < low:
            nodes.append({"name": name, "range": [0, 1], "mechanism": {"type": "deterministic", "fn": 1},
                          "description": f"slot {k} holds an object (always: at least {low} objects)"})
            continue
        q = tail[k + 1] / tail[k] if tail[k] > 0 else 0.0
        prev = f"present_{k - 1}"
        nodes.append({"name": name, "parents": [prev], "range": [0, 1],
                      "mechanism": {"type": "bernoulli", "p": {"type": "linear", "coef": {prev: q}}},
                      "description": f"slot {k} holds an object: P = {q:.4g} when slot {k - 1} does, else 0"})
    return nodes


def _offset(text: str) -> int | None:
    """The slot offset a parent string names ({k}: 0, {k-1}: -1), or None for a shared node."""
    m = _PLACEHOLDER.search(text)
    if m is None:
        return None
    return 0 if m.group(1) is None else int(m.group(2)) * (1 if m.group(1) == "+" else -1)


def _fill(value: Any, k: int, slots: int, where: str, strict: bool = True) -> Any:
    """``value`` with every placeholder replaced by slot numbers for object k (recursing into mappings/lists);
    ``strict=False`` (descriptions) leaves a placeholder of a slot that does not exist as it is written."""
    if isinstance(value, str):
        def slot(m: re.Match) -> str:
            j = k + (_offset(m.group(0)) or 0)
            if not strict and not 0 <= j < slots:
                return m.group(0)
            if not 0 <= j < slots:
                raise SpecError(f"{where}: object {k} has no slot {j} for '{value}' (slots 0..{slots - 1}); "
                                "read other objects only through parents and give 'boundary:'")
            return str(j)

        filled = _PLACEHOLDER.sub(slot, value)
        bad = _TEMPLATED.search(filled)
        if bad and strict:
            raise SpecError(f"{where}: unknown placeholder '{bad.group(0)}' in '{value}'; use {{k}}, {{k-1}}, "
                            "{k+1}, ...")
        return filled
    if isinstance(value, Mapping):
        return {_fill(key, k, slots, where): _fill(v, k, slots, where) for key, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, k, slots, where) for v in value]
    return value


def _check_template(raw: object, i: int) -> str:
    """A template's name after checking its keys, name and parents (edges to other templates checked later)."""
    if not isinstance(raw, Mapping):
        raise SpecError(f"object_nodes[{i}]: each template must be a mapping, got {raw!r}")
    name = raw.get("name")
    ok = isinstance(name, str) and name.count("{k}") == 1 and len(_TEMPLATED.findall(name)) == 1 and \
        re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.replace("{k}", "0")) is not None
    if not ok:
        raise SpecError(f"object_nodes[{i}]: 'name' must be an identifier with one {{k}} for the slot "
                        f"(e.g. obj{{k}}_pos_x), got {name!r}")
    where = f"object node '{name}'"
    check_keys(raw, _TEMPLATE_KEYS, where)
    parents = raw.get("parents", []) or []
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise SpecError(f"{where}: 'parents' must be a list of node names or templates, got {parents!r}")
    return name


def _expand_template(raw: Mapping[str, Any], k: int, slots: int, templates: set[str]) -> dict[str, Any]:
    """Object k's copy of one template: placeholders filled; ``boundary`` where a neighbour slot is missing."""
    where = f"object node '{raw['name']}'"
    parents = raw.get("parents", []) or []
    for p in parents:
        if _offset(p) is not None and _PLACEHOLDER.sub("{k}", p) not in templates:
            raise SpecError(f"{where}: parent '{p}' names no template; templates: {', '.join(sorted(templates))}")
    missing = [p for p in parents if _offset(p) and not 0 <= k + _offset(p) < slots]
    mechanism = raw.get("mechanism")
    if missing:
        if "boundary" not in raw:
            raise SpecError(f"{where}: object {k} has no '{missing[0]}' (slots 0..{slots - 1}); add 'boundary:', "
                            "the mechanism of objects without that neighbour (it reads no other object)")
        parents, mechanism = [p for p in parents if not _offset(p)], raw["boundary"]
    node = {key: _fill(raw[key], k, slots, where) for key in ("range", "group") if key in raw}
    if "description" in raw:
        node["description"] = _fill(raw["description"], k, slots, where, strict=False)
    node["name"] = _fill(raw["name"], k, slots, where)
    node["parents"] = _fill(parents, k, slots, where)
    if mechanism is not None:
        node["mechanism"] = _fill(mechanism, k, slots, where)
    return node


def _check_acyclic(nodes: list[dict[str, Any]], plates: Plates) -> None:
    """Refuse a cycle through an object's node (made by the expansion), naming it; shared-only cycles are left
    to the SCM's own check."""
    g = nx.DiGraph()
    names = {n["name"] for n in nodes}
    for node in nodes:
        g.add_edges_from((p, node["name"]) for p in node.get("parents") or [] if p in names)
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        return
    ring = [e[0] for e in cycle]
    order = [n["name"] for n in nodes]
    first = min(range(len(ring)), key=lambda i: order.index(ring[i]))  # start at the earliest node, as written
    path = ring[first:] + ring[:first] + [ring[first]]
    slot = {n: k for k, obj in enumerate(plates.objects) for n in obj}
    slots = {slot[n] for n in path if n in slot}
    if not slots:
        return
    hint = ("objects may read lower slots ({k-1}) or higher ones ({k+1}), not both round a loop"
            if len(slots) > 1 else f"within object {slots.pop()}")
    raise SpecError(f"object_nodes: expanding the templates for {plates.slots} objects makes a cycle "
                    f"{' -> '.join(path)}; an SCM must be acyclic ({hint})")


def expand_plates(spec: Mapping[str, Any]) -> tuple[dict[str, Any], Plates | None]:
    """The ordinary spec of a plate spec (shared nodes, present_0.., obj0_.., obj1_..) and its object layout;
    a spec without ``objects`` comes back as it is, with None."""
    check_no_templates(spec)
    has = [key for key in PLATE_KEYS if key in spec]
    if not has:
        return dict(spec), None
    if len(has) == 1:
        other = ({"objects"} - set(has)) or {"object_nodes"}
        raise SpecError(f"spec: '{has[0]}' needs '{other.pop()}' too: 'objects: {{slots: K, min: m}}' and the "
                        "per-object templates under 'object_nodes'")
    slots, low, probs = _objects(spec["objects"])
    raw = spec["object_nodes"]
    if not isinstance(raw, list) or not raw:
        raise SpecError("spec: 'object_nodes' must be a non-empty list of node templates (names with {k})")
    names = [_check_template(t, i) for i, t in enumerate(raw)]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise SpecError(f"object node '{dup}': defined twice")
    shared = spec.get("nodes", []) or []
    if not isinstance(shared, list):
        raise SpecError("spec: 'nodes' must be a list of the shared nodes")
    known = set(names) | {PRESENT}
    objects = [[_expand_template(t, k, slots, known) for t in raw] for k in range(slots)]
    present = _present_nodes(slots, low, probs)
    plates = Plates(slots, low, probs, tuple(names), tuple(tuple(n["name"] for n in obj) for obj in objects),
                    tuple(n["name"] for n in present))
    nodes = [*shared, *present, *(node for obj in objects for node in obj)]
    _check_acyclic(nodes, plates)
    flat = {key: value for key, value in spec.items() if key not in PLATE_KEYS}
    flat["nodes"] = nodes
    return flat, plates
