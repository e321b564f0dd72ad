"""Structural causal models: a networkx DAG plus one mechanism per node, built from a spec.

Sampling is vectorised and counter-based (row i depends only on (seed, i)); interventions
return new SCMs; latent transformations resample a change set as in the papers' LT pairs.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
from scipy.special import ndtri

from ident3d.causal import rng
from ident3d.causal.errors import SpecError, check_keys
from ident3d.causal.mechanisms import Categorical, Mechanism, build_mechanism, trunclaplace_ppf, truncnorm_ppf
from ident3d.causal.object_scope import restrict, scope_nodes, split_scope
from ident3d.causal.plates import PLATE_KEYS, Plates, expand_plates
from ident3d.causal.samples import Samples

_NODE_KEYS = {"name", "parents", "mechanism", "range", "group", "description"}
_TOP_KEYS = {"name", "description", "nodes", "class_node", "change_sets", "transform", *PLATE_KEYS}
CONDITIONALS = ("normal", "laplace")  # p(z~ | z) of a latent transformation (spec transform.conditional)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Node:
    """One variable: its parents, mechanism, value range and group (e.g. ``positions``)."""

    name: str
    parents: tuple[str, ...]
    mechanism: Mechanism
    range: tuple[float, float] | None
    group: str | None
    description: str = ""


def _range(value: object, where: str) -> tuple[float, float] | None:
    if value is None:
        return None
    ok = isinstance(value, list | tuple) and len(value) == 2 and all(
        isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v) for v in value)
    if not ok:
        raise SpecError(f"{where}: 'range' must be [low, high] with two finite numbers, got {value!r}")
    lo, hi = float(value[0]), float(value[1])
    if not lo < hi:
        raise SpecError(f"{where}: 'range' must have low < high, got [{lo:g}, {hi:g}]")
    return lo, hi


def _parse_node(raw: object, i: int) -> Node:
    if not isinstance(raw, Mapping):
        raise SpecError(f"nodes[{i}]: each node must be a mapping, got {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise SpecError(f"nodes[{i}]: 'name' must be an identifier (letters, digits, _), got {name!r}")
    where = f"node '{name}'"
    check_keys(raw, _NODE_KEYS, where)
    parents = raw.get("parents", []) or []
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise SpecError(f"{where}: 'parents' must be a list of node names, got {parents!r}")
    if len(set(parents)) != len(parents) or name in parents:
        raise SpecError(f"{where}: 'parents' has duplicates or the node itself: {parents}")
    group = raw.get("group")
    if group is not None and not isinstance(group, str):
        raise SpecError(f"{where}: 'group' must be a string, got {group!r}")
    if "mechanism" not in raw:
        raise SpecError(f"{where}: missing 'mechanism'")
    rng_ = _range(raw.get("range"), where)
    mech = build_mechanism(raw["mechanism"], rng_, where)
    desc = raw.get("description", "")
    return Node(name, tuple(parents), mech, rng_, group, str(desc))


class SCM:
    """A structural causal model over named latents, built and validated from a spec mapping."""

    def __init__(self, spec: Mapping[str, Any]):
        if not isinstance(spec, Mapping):
            raise SpecError(f"an SCM spec must be a mapping with 'nodes', got {type(spec).__name__}")
        extra = set(spec) - _TOP_KEYS
        if extra:
            raise SpecError(f"spec: unknown top-level key(s) {sorted(extra)}; allowed: {sorted(_TOP_KEYS)}")
        flat, plates = expand_plates(spec)  # object templates -> an ordinary spec (plates.py)
        self.plates: Plates | None = plates  # the object layout: absent objects' latents are stored as 0
        self._flat: dict[str, Any] = copy.deepcopy(flat)
        raw_nodes = flat.get("nodes")
        if not isinstance(raw_nodes, list) or not raw_nodes:
            raise SpecError("spec: 'nodes' must be a non-empty list")
        self.spec: dict[str, Any] = copy.deepcopy(dict(spec))
        self.name: str = str(spec.get("name", "custom"))
        nodes = [_parse_node(raw, i) for i, raw in enumerate(raw_nodes)]
        self.nodes: dict[str, Node] = {}
        for node in nodes:
            if node.name in self.nodes:
                raise SpecError(f"node '{node.name}': defined twice")
            self.nodes[node.name] = node
        self.graph = self._build_graph()
        self.order: list[str] = list(nx.lexicographical_topological_sort(
            self.graph, key=list(self.nodes).index))
        self.class_node = self._find_class_node(spec.get("class_node"))
        self.names: list[str] = [n for n in self.nodes if n != self.class_node]
        self.change_sets = self._parse_change_sets(spec.get("change_sets") or {})
        self.transform_sigma = self._parse_transform(spec.get("transform") or {})

    # ----- construction helpers -------------------------------------------------------------
    def _build_graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        for node in self.nodes.values():
            g.add_node(node.name, group=node.group, mechanism=node.mechanism.kind)
        for node in self.nodes.values():
            where = f"node '{node.name}'"
            for p in node.parents:
                if p not in self.nodes:
                    raise SpecError(f"{where}: unknown parent '{p}'; known nodes: {', '.join(self.nodes)}")
                g.add_edge(p, node.name)
            unread = set(node.parents) - node.mechanism.reads
            unknown = node.mechanism.reads - set(node.parents)
            if unknown:
                raise SpecError(f"{where}: mechanism reads {sorted(unknown)}, which are not among its "
                                f"parents {list(node.parents)}; add them to 'parents'")
            if unread:
                raise SpecError(f"{where}: parent(s) {sorted(unread)} are not used by the mechanism; "
                                "remove them or use them")
            for parent, size in node.mechanism.tables:
                cats = self.nodes[parent].mechanism.categories
                if cats is None:
                    raise SpecError(f"{where}: table over '{parent}', which is not categorical")
                if size != len(cats):
                    raise SpecError(f"{where}: table over '{parent}' has {size} values, "
                                    f"'{parent}' has {len(cats)} categories")
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            return g
        path = " -> ".join([e[0] for e in cycle] + [cycle[0][0]])
        raise SpecError(f"node '{cycle[0][0]}': the graph has a cycle {path}; an SCM must be acyclic")

    def _find_class_node(self, declared: object) -> str | None:
        cats = [n for n, node in self.nodes.items() if isinstance(node.mechanism, Categorical)]
        if declared is None:
            return cats[0] if len(cats) == 1 else None
        if declared not in cats:
            raise SpecError(f"spec: class_node {declared!r} is not a categorical node ({cats or 'none'})")
        return str(declared)

    def _parse_change_sets(self, raw: object) -> dict[str, list[str]]:
        if not isinstance(raw, Mapping):
            raise SpecError(f"spec: 'change_sets' must map a name to a list of nodes/groups, got {raw!r}")
        out = {}
        for name, members in raw.items():
            if not isinstance(members, list) or not members:
                raise SpecError(f"change set '{name}': must be a non-empty list of nodes or groups")
            out[str(name)] = self._expand(members, f"change set '{name}'", sets={})
        return out

    def _parse_transform(self, raw: object) -> dict[str, float]:
        if not isinstance(raw, Mapping) or set(raw) - {"sigma", "p_change", "conditional"}:
            raise SpecError(f"spec: 'transform' may set 'sigma', 'p_change' and 'conditional', got {raw!r}")
        kind = raw.get("conditional", "normal")
        if kind not in CONDITIONALS:
            raise SpecError(f"spec: transform conditional must be one of {', '.join(CONDITIONALS)}, got {kind!r}")
        self.transform_conditional = kind
        p = raw.get("p_change", 1.0)
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
            raise SpecError(f"spec: transform p_change must be in (0, 1], got {p!r}")
        self.transform_p_change = float(p)
        sigma = raw.get("sigma", 1.0)
        per = sigma if isinstance(sigma, Mapping) else {n: sigma for n in self.nodes}
        out = {}
        for n, s in per.items():
            if n not in self.nodes:
                raise SpecError(f"spec: transform sigma for unknown node '{n}'")
            if isinstance(s, bool) or not isinstance(s, int | float) or not s > 0:
                raise SpecError(f"node '{n}': transform sigma must be a positive number, got {s!r}")
            out[n] = float(s)
        return {n: out.get(n, 1.0) for n in self.nodes}

    # ----- naming -----------------------------------------------------------------------------
    @property
    def groups(self) -> dict[str, list[str]]:
        """Group name -> member nodes, in spec order."""
        out: dict[str, list[str]] = {}
        for node in self.nodes.values():
            if node.group:
                out.setdefault(node.group, []).append(node.name)
        return out

    @property
    def class_names(self) -> list[str] | None:
        return self.nodes[self.class_node].mechanism.categories if self.class_node else None

    def _expand(self, items: Iterable[str], where: str, sets: Mapping[str, list[str]]) -> list[str]:
        """Nodes of '+'-joined parts, each a node, change set or group, optionally restricted to one object's or the
        shared nodes by an ``objK:`` / ``shared:`` prefix (causal/object_scope.py)."""
        out: list[str] = []
        for item in items:
            for part in str(item).split("+"):
                part = part.strip()
                scope, name = split_scope(part)
                allowed = None if scope is None else scope_nodes(scope, part, self.plates, self.nodes, self.name,
                                                                  where)
                found = self._lookup(name, where, sets)
                if scope is not None:
                    found = restrict(found, allowed or set(), scope, part, where)
                out += [f for f in found if f not in out]
        return out

    def _lookup(self, name: str, where: str, sets: Mapping[str, list[str]]) -> list[str]:
        """The nodes one name stands for: itself (a node), a change set's or a group's members."""
        if name in self.nodes:
            return [name]
        if name in sets:
            return sets[name]
        if name in self.groups:
            return self.groups[name]
        known = sorted(set(self.nodes) | set(self.groups) | set(sets))
        raise SpecError(f"{where}: unknown node, group or change set '{name}'; known: {', '.join(known)}")

    def resolve(self, change: str | Sequence[str]) -> list[str]:
        """Node names of a change set given as nodes, groups or set names (``'positions+hues'``); on an SCM with object
        plates a part may be restricted to one object or the shared nodes (``'obj1:positions+shared:hues'``)."""
        items = [change] if isinstance(change, str) else list(change)
        nodes = self._expand(items, "change", self.change_sets)
        return [n for n in self.nodes if n in nodes]

    def partition(self, change: str | Sequence[str]) -> tuple[list[str], list[str]]:
        """(content, style) node names when views differ in ``change`` (style = what changes)."""
        style = set(self.resolve(change))
        return [n for n in self.nodes if n not in style], [n for n in self.nodes if n in style]

    # ----- sampling ---------------------------------------------------------------------------
    def sample(self, n: int, seed: int = 0, start: int = 0) -> Samples:
        """Rows ``start .. start+n-1``; row i depends only on (seed, i), however rows are split."""
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise SpecError(f"n must be a non-negative integer, got {n!r}")
        if isinstance(start, bool) or not isinstance(start, int | np.integer) or start < 0:
            raise SpecError(f"start must be a non-negative integer, got {start!r}")
        index = np.arange(start, start + n, dtype=np.int64)
        values: dict[str, np.ndarray] = {}
        for name in self.order:
            u = rng.uniforms(rng.stream_key(seed, "node", name), index)
            values[name] = self.nodes[name].mechanism.sample(values, u)
        return self._pack(values, index)

    def _pack(self, values: Mapping[str, np.ndarray], index: np.ndarray) -> Samples:
        n = len(index)
        present = objects = None
        if self.plates is not None:  # absent objects' latents are stored as 0, their slots flagged in `present`
            values = self.plates.mask(values)
            present, objects = self.plates.present_matrix(values), self.plates.objects
        latents = np.stack([values[k] for k in self.names], axis=1).astype(np.float32) \
            if self.names else np.zeros((n, 0), np.float32)
        classes = values[self.class_node].astype(np.int64) if self.class_node else None
        return Samples(latents, classes, list(self.names), index, self.class_node, self.class_names, present,
                       objects)

    # ----- interventions and transformations --------------------------------------------------
    def do(self, **values: float | str | Mapping[str, Any]) -> SCM:
        """A new SCM with the named nodes fixed (number, or class name) or given a new mechanism
        (a mechanism mapping without parents); their incoming edges are cut."""
        spec = copy.deepcopy(self._flat)  # a plate spec's expanded nodes: do() names concrete nodes (obj1_pos_x)
        by_name = {raw["name"]: raw for raw in spec["nodes"]}
        for name, value in values.items():
            if name not in self.nodes:
                raise SpecError(f"do: unknown node '{name}'; known: {', '.join(self.nodes)}")
            node, raw = self.nodes[name], by_name[name]
            raw["parents"] = []
            if isinstance(value, Mapping):
                raw["mechanism"] = dict(value)
            elif node.mechanism.categories is not None:
                cats = node.mechanism.categories
                k = cats.index(value) if value in cats else value
                if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 0 <= k < len(cats):
                    raise SpecError(f"do: '{name}' must be one of {cats} or an index, got {value!r}")
                raw["mechanism"] = {"type": "categorical", "categories": cats,
                                    "probs": [float(i == k) for i in range(len(cats))]}
            else:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise SpecError(f"do: '{name}' needs a number, got {value!r}")
                if node.range and not node.range[0] <= value <= node.range[1]:
                    raise SpecError(f"do: {name}={value} is outside its range {list(node.range)}")
                raw["mechanism"] = {"type": "deterministic", "fn": float(value)}
        spec["description"] = f"{spec.get('description', '')} do({', '.join(values)})".strip()
        out = SCM(spec)
        out.plates = self.plates  # the expanded spec has no 'objects': keep its layout (absent objects stored as 0)
        return out

    def transform(self, samples: Samples, change: str | Sequence[str], seed: int = 0,
                  sigma: float | None = None, propagate: bool = False,
                  p_change: float | None = None) -> Samples:
        """Latent transformation: resample the change set around the current values.

        Continuous nodes get z~ ~ N(z, sigma) truncated to the node's range (unbounded nodes:
        z + sigma * N(0, 1)), or Laplace(z, sigma) truncated alike where the spec's transform says
        ``conditional: laplace``; categorical nodes are redrawn from their mechanism. Each changed
        node changes with probability ``p_change`` (default: the spec's). ``propagate=False`` keeps every other node
        (the papers' LT); ``True`` recomputes descendants with their abducted noise
        (a counterfactual). Draws are counter-based on the samples' row ids. On an SCM with object plates an
        absent object's nodes are redrawn but stored as 0 again (``_pack``) and presence flags change only if named,
        so a view of one object (``obj1:positions``) leaves the rows without that object exactly as they were.
        """
        targets = self.resolve(change)
        p_change = self.transform_p_change if p_change is None else p_change
        if not 0.0 <= p_change <= 1.0:
            raise SpecError(f"p_change must be in [0, 1], got {p_change}")
        if sigma is not None and not sigma > 0:
            raise SpecError(f"sigma must be > 0, got {sigma}")
        old = samples.values()
        new = dict(old)
        changed: set[str] = set()
        for name in self.order:
            node = self.nodes[name]
            if name in targets:
                u = rng.uniforms(rng.stream_key(seed, "transform", name), samples.index)
                draw = self._redraw(node, new, old[name], u, sigma)
                keep = rng.uniforms(rng.stream_key(seed, "transform-mask", name), samples.index)
                new[name] = np.where(keep < p_change, draw, old[name])
                changed.add(name)
            elif propagate and changed.intersection(node.parents):
                u = node.mechanism.noise(old, old[name])
                new[name] = node.mechanism.sample(new, u)
                changed.add(name)
        packed = self._pack(new, samples.index)
        return samples.with_latents(packed.latents, packed.classes, packed.present)

    def _redraw(self, node: Node, values: Mapping[str, np.ndarray], x: np.ndarray,
                u: np.ndarray, sigma: float | None) -> np.ndarray:
        if node.mechanism.categories is not None:
            return node.mechanism.sample(values, u)
        s = self.transform_sigma[node.name] if sigma is None else float(sigma)
        if self.transform_conditional == "laplace":
            if node.range is None:
                return x - s * np.sign(u - 0.5) * np.log1p(-2 * np.abs(u - 0.5))
            return trunclaplace_ppf(u, x, s, *node.range)
        if node.range is None:
            return x + s * ndtri(u)
        return truncnorm_ppf(u, x, s, *node.range)
