"""Dynamic SCMs: first-order dynamic Bayesian networks with per-node interventions, rolled out as sequences.

A dynamic spec (top-level ``dynamic: true``) has the static spec's nodes (name, parents, mechanism, range, group,
description) plus ``lag_parents`` (nodes at the previous step; the mechanism reads them as ``NAME_prev``),
``initial`` (the mechanism of step 0, which has no previous step; default: ``mechanism`` where the node has no
lag parents) and ``intervention`` (:mod:`causal.interventions`). ``parents`` are instantaneous effects and must
be acyclic within a step. ``rollout`` is counter-based: sequence i depends only on (seed, i) and step t only on
steps before it, however sequences are split and however long the rollout.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from ident3d.causal import rng
from ident3d.causal.errors import SpecError
from ident3d.causal.interventions import Intervention, parse_intervention
from ident3d.causal.mechanisms import Mechanism, build_mechanism
from ident3d.causal.scm import _NODE_KEYS, _parse_node
from ident3d.causal.sequences import Rollout

PREV = "_prev"  # a mechanism reads lag parent x (x at t-1) as x_prev
DYNAMIC_NODE_KEYS = ("lag_parents", "initial", "intervention")  # node keys a static spec does not have
_TOP_KEYS = {"name", "description", "dynamic", "nodes"}


@dataclass(frozen=True)
class DynamicNode:
    """One variable of a dynamic SCM: same-step and previous-step parents, its mechanisms and intervention."""

    name: str
    parents: tuple[str, ...]
    lag_parents: tuple[str, ...]
    mechanism: Mechanism  # steps t >= 1
    initial: Mechanism  # step 0
    intervention: Intervention | None
    range: tuple[float, float] | None
    group: str | None
    description: str = ""

    @property
    def categories(self) -> list[str] | None:
        return self.mechanism.categories


def is_dynamic(spec: Mapping[str, Any]) -> bool:
    """Whether a spec mapping is a dynamic SCM (top-level ``dynamic: true``)."""
    return spec.get("dynamic") is True


def _parse_dynamic_node(raw: object, i: int) -> DynamicNode:
    if not isinstance(raw, Mapping):
        raise SpecError(f"nodes[{i}]: each node must be a mapping, got {raw!r}")
    allowed = _NODE_KEYS | set(DYNAMIC_NODE_KEYS)
    extra = set(raw) - allowed
    if extra:
        label = f"node '{raw['name']}'" if isinstance(raw.get("name"), str) else f"nodes[{i}]"
        raise SpecError(f"{label}: unknown key(s) {sorted(extra)}; allowed: {sorted(allowed)}")
    base = _parse_node({k: v for k, v in raw.items() if k not in DYNAMIC_NODE_KEYS}, i)
    where = f"node '{base.name}'"
    if base.name.endswith(PREV):
        raise SpecError(f"{where}: a node name may not end in '{PREV}' (mechanisms read lag parents as NAME{PREV})")
    lags = raw.get("lag_parents", []) or []
    if not isinstance(lags, list) or not all(isinstance(p, str) for p in lags):
        raise SpecError(f"{where}: 'lag_parents' must be a list of node names, got {lags!r}")
    if len(set(lags)) != len(lags):
        raise SpecError(f"{where}: 'lag_parents' has duplicates: {lags}")
    if "initial" in raw:
        initial = build_mechanism(raw["initial"], base.range, f"{where} initial")
    elif lags:
        raise SpecError(f"{where}: has 'lag_parents', so it needs 'initial', the mechanism of step 0 "
                        "(e.g. {type: uniform})")
    else:
        initial = base.mechanism
    if initial.categories != base.mechanism.categories:
        raise SpecError(f"{where}: 'initial' must have the mechanism's categories {base.mechanism.categories}, "
                        f"got {initial.categories}")
    inter = raw.get("intervention")
    inter = None if inter is None else parse_intervention(inter, base.name, base.range, base.mechanism.categories)
    return DynamicNode(base.name, base.parents, tuple(lags), base.mechanism, initial, inter, base.range,
                       base.group, base.description)


class DynamicSCM:
    """A first-order dynamic SCM over named latents, built and validated from a spec mapping."""

    def __init__(self, spec: Mapping[str, Any]):
        if not isinstance(spec, Mapping):
            raise SpecError(f"a dynamic SCM spec must be a mapping with 'nodes', got {type(spec).__name__}")
        extra = set(spec) - _TOP_KEYS
        if extra:
            raise SpecError(f"spec: unknown top-level key(s) {sorted(extra)} in a dynamic spec; "
                            f"allowed: {sorted(_TOP_KEYS)}")
        if not is_dynamic(spec):
            raise SpecError(f"spec: a dynamic SCM needs 'dynamic: true', got {spec.get('dynamic')!r}")
        raw_nodes = spec.get("nodes")
        if not isinstance(raw_nodes, list) or not raw_nodes:
            raise SpecError("spec: 'nodes' must be a non-empty list")
        self.spec: dict[str, Any] = copy.deepcopy(dict(spec))
        self.name: str = str(spec.get("name", "custom"))
        self.nodes: dict[str, DynamicNode] = {}
        for i, raw in enumerate(raw_nodes):
            node = _parse_dynamic_node(raw, i)
            if node.name in self.nodes:
                raise SpecError(f"node '{node.name}': defined twice")
            self.nodes[node.name] = node
        self.names: list[str] = list(self.nodes)
        for node in self.nodes.values():
            self._check_node(node)
        self._check_targets()
        self.graph = self._instant_graph()
        self.order: list[str] = list(nx.lexicographical_topological_sort(self.graph, key=self.names.index))

    # ----- validation -------------------------------------------------------------------------
    def _check_node(self, node: DynamicNode) -> None:
        where = f"node '{node.name}'"
        for key, names in (("parents", node.parents), ("lag_parents", node.lag_parents)):
            for p in names:
                if p not in self.nodes:
                    raise SpecError(f"{where}: unknown {key[:-1].replace('_', ' ')} '{p}' in '{key}'; known nodes: "
                                    f"{', '.join(self.nodes)}")
        lagged = {p + PREV: p for p in node.lag_parents}
        reads = node.mechanism.reads
        unknown = reads - set(node.parents) - set(lagged)
        for name in sorted(unknown):
            stem = name[: -len(PREV)] if name.endswith(PREV) else None
            if stem in self.nodes:
                raise SpecError(f"{where}: mechanism reads '{name}' ({stem} at t-1), which is not among its "
                                f"lag_parents {list(node.lag_parents)}; add '{stem}' to 'lag_parents'")
            raise SpecError(f"{where}: mechanism reads '{name}', which is not among its parents "
                            f"{list(node.parents)} (nor NAME{PREV} of a lag parent); add it to 'parents'")
        unread = [p for p in node.parents if p not in reads]
        if unread:
            raise SpecError(f"{where}: parent(s) {unread} are not used by the mechanism; remove them or use them")
        unread = [q for p, q in lagged.items() if p not in reads]
        if unread:
            raise SpecError(f"{where}: lag parent(s) {unread} are not used by the mechanism (it reads a lag parent "
                            f"x as x{PREV}); remove them or use them")
        bad_initial = node.initial.reads - set(node.parents)
        if bad_initial:
            raise SpecError(f"{where}: 'initial' reads {sorted(bad_initial)}; step 0 has no previous step, so "
                            f"it may read only same-step parents {list(node.parents)}")
        for mech, label in ((node.mechanism, "mechanism"), (node.initial, "initial")):
            for parent, size in mech.tables:
                cats = self.nodes[lagged.get(parent, parent)].categories
                if cats is None:
                    raise SpecError(f"{where}: {label} has a table over '{parent}', which is not categorical")
                if size != len(cats):
                    raise SpecError(f"{where}: {label} has a table over '{parent}' with {size} values, "
                                    f"'{lagged.get(parent, parent)}' has {len(cats)} categories")

    def _check_targets(self) -> None:
        seen: dict[str, tuple[str, float]] = {}
        for node in self.nodes.values():
            if node.intervention is None:
                continue
            target, p = node.intervention.target, node.intervention.p
            first = seen.setdefault(target, (node.name, p))
            if first[1] != p:
                raise SpecError(f"node '{node.name}': intervention target '{target}' has p={p:g} here but "
                                f"p={first[1]:g} at node '{first[0]}'; nodes intervened on together share p")

    def _instant_graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        for node in self.nodes.values():
            g.add_node(node.name, group=node.group, mechanism=node.mechanism.kind)
        g.add_edges_from((p, node.name) for node in self.nodes.values() for p in node.parents)
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            return g
        path = " -> ".join([e[0] for e in cycle] + [cycle[0][0]])
        raise SpecError(f"node '{cycle[0][0]}': 'parents' make a cycle {path} within a step; same-step effects "
                        "must be acyclic (effects from the previous step go in 'lag_parents')")

    # ----- graphs -----------------------------------------------------------------------------
    @property
    def groups(self) -> dict[str, list[str]]:
        """Group name -> member nodes, in spec order."""
        out: dict[str, list[str]] = {}
        for node in self.nodes.values():
            if node.group:
                out.setdefault(node.group, []).append(node.name)
        return out

    def unrolled(self) -> nx.DiGraph:
        """The two-slice graph: nodes ``x[t-1]`` and ``x[t]`` (attrs ``node``, ``step`` 0/1, ``group``), same-step
        edges in both slices (``kind='instant'``) and previous-step edges into slice t (``kind='lag'``)."""
        g = nx.DiGraph()
        for step, label in ((0, "t-1"), (1, "t")):
            for node in self.nodes.values():
                g.add_node(f"{node.name}[{label}]", node=node.name, step=step, group=node.group)
            for node in self.nodes.values():
                for p in node.parents:
                    g.add_edge(f"{p}[{label}]", f"{node.name}[{label}]", kind="instant")
        for node in self.nodes.values():
            for p in node.lag_parents:
                g.add_edge(f"{p}[t-1]", f"{node.name}[t]", kind="lag")
        return g

    def step0_spec(self) -> dict[str, Any]:
        """The static SCM spec of step 0 (each node's ``initial`` mechanism and same-step parents): what a store of
        rolled-out sequences records as its ``scm`` (names, groups, ranges, the class node), beside the dynamic spec."""
        nodes = []
        for raw in self.spec["nodes"]:
            node = {k: v for k, v in raw.items() if k not in DYNAMIC_NODE_KEYS and k != "mechanism"}
            node["mechanism"] = raw.get("initial", raw["mechanism"])  # default: the mechanism (no lag parents)
            nodes.append(node)
        return {"name": self.name, "description": f"step 0 of the dynamic SCM {self.name}", "nodes": nodes}

    # ----- rollout ----------------------------------------------------------------------------
    def rollout(self, n_sequences: int, length: int, seed: int = 0, start: int = 0,
                interventions: bool = True) -> Rollout:
        """Sequences ``start .. start+n_sequences-1`` of ``length`` steps; ``interventions=False`` sets every p to 0
        (the same draws otherwise: such a rollout equals the interventional one up to its first intervention)."""
        for what, value, low in (("n_sequences", n_sequences, 0), ("length", length, 1), ("start", start, 0)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise SpecError(f"{what} must be an integer >= {low}, got {value!r}")
        index = np.arange(start, start + n_sequences, dtype=np.int64)
        latents = np.zeros((n_sequences, length, len(self.names)), np.float32)
        targets = np.zeros((n_sequences, length, len(self.names)), bool)
        prev: dict[str, np.ndarray] = {}
        for t in range(length):
            values = {name + PREV: x for name, x in prev.items()}
            for name in self.order:
                node = self.nodes[name]
                u = rng.uniforms(rng.stream_key(seed, "node", name, t), index)
                x = (node.mechanism if t else node.initial).sample(values, u)
                inter = node.intervention
                if t and interventions and inter is not None and inter.p > 0:
                    hit = rng.uniforms(rng.stream_key(seed, "intervene", inter.target, t), index) < inter.p
                    x = inter.apply(x, rng.uniforms(rng.stream_key(seed, "do", name, t), index), hit)
                    targets[:, t, self.names.index(name)] = hit
                values[name] = np.asarray(x, dtype=np.float64)
            prev = {name: values[name] for name in self.names}
            latents[:, t] = np.stack([prev[name] for name in self.names], axis=1)
        return Rollout(latents, targets, list(self.names), index)
