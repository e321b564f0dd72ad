"""Per-node intervention models of a dynamic SCM: at each step a node is intervened on with probability p.

``kind: hard`` replaces the mechanism's value by a draw from ``dist`` (a parentless mechanism on the node's
range: a do-intervention that ignores the parents); ``kind: soft`` adds a ``shift`` (a number or a parentless
mechanism) to the mechanism's output, clipped to the node's range. Nodes that name the same ``target`` are
intervened on together (one multidimensional causal variable, e.g. a 3-D position).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ident3d.causal.errors import SpecError
from ident3d.causal.mechanisms import Mechanism, Range, build_mechanism

KINDS = ("hard", "soft")
_KEYS = {"p", "kind", "dist", "shift", "target"}


@dataclass(frozen=True)
class Intervention:
    """How one node is intervened on: probability per step, kind, and what replaces or shifts its value."""

    p: float
    kind: str
    target: str
    dist: Mechanism | None = None  # hard: the do-distribution
    shift: Mechanism | float | None = None  # soft: added to the mechanism's output
    range: Range = None

    def apply(self, x: np.ndarray, u: np.ndarray, hit: np.ndarray) -> np.ndarray:
        """The node's values with the intervened rows (``hit``) replaced or shifted, using noise u."""
        if self.kind == "hard":
            new = self.dist.sample({}, u)
        else:
            shift = self.shift.sample({}, u) if isinstance(self.shift, Mechanism) else self.shift
            new = x + shift
            if self.range is not None:
                new = np.clip(new, *self.range)
        return np.where(hit, new, x)

    def describe(self) -> str:
        """One line for ``ident3d scm show``."""
        what = f"do ~ {self.dist.describe()}" if self.kind == "hard" else (
            f"+ {self.shift.describe() if isinstance(self.shift, Mechanism) else f'{self.shift:g}'}")
        return f"p={self.p:g} {self.kind}: {what}"


def _parentless(raw: object, rng: Range, where: str, what: str) -> Mechanism:
    mech = build_mechanism(raw, rng, f"{where} {what}")
    if mech.reads:
        raise SpecError(f"{where}: intervention {what} must not read parents, it reads {sorted(mech.reads)}")
    return mech


def parse_intervention(raw: object, name: str, rng: Range, categories: list[str] | None) -> Intervention:
    """An :class:`Intervention` from a node's ``intervention`` mapping (errors name the node and the key)."""
    where = f"node '{name}'"
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}: 'intervention' must be a mapping with 'p' and 'kind', got {raw!r}")
    extra = set(raw) - _KEYS
    if extra:
        raise SpecError(f"{where}: intervention has unknown key(s) {sorted(extra)}; allowed: {sorted(_KEYS)}")
    p = raw.get("p")
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1:
        raise SpecError(f"{where}: intervention 'p' must be a probability in [0, 1], got {p!r}")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise SpecError(f"{where}: intervention 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    target = raw.get("target", name)
    if not isinstance(target, str) or not target:
        raise SpecError(f"{where}: intervention 'target' must be a name, got {target!r}")
    other = "shift" if kind == "hard" else "dist"
    if other in raw:
        raise SpecError(f"{where}: intervention 'kind: {kind}' takes no '{other}'")
    if kind == "hard":
        if "dist" not in raw:
            raise SpecError(f"{where}: a hard intervention needs 'dist', the do-distribution (e.g. {{type: uniform}})")
        dist = _parentless(raw["dist"], rng, where, "dist")
        if (dist.categories is None) != (categories is None) or (
                categories is not None and dist.categories != categories):
            raise SpecError(f"{where}: intervention 'dist' must have the node's categories "
                            f"{categories}, got {dist.categories}")
        return Intervention(float(p), kind, target, dist=dist, range=rng)
    if categories is not None:
        raise SpecError(f"{where}: intervention 'kind: soft' shifts a number; a categorical node needs 'kind: hard'")
    shift = raw.get("shift")
    if isinstance(shift, int | float) and not isinstance(shift, bool):
        if not np.isfinite(shift):
            raise SpecError(f"{where}: intervention 'shift' must be finite, got {shift!r}")
        return Intervention(float(p), kind, target, shift=float(shift), range=rng)
    if shift is None:
        raise SpecError(f"{where}: a soft intervention needs 'shift', a number or a mechanism (e.g. "
                        "{type: additive, fn: 0.5, scale: 0.1})")
    mech = _parentless(shift, None, where, "shift")
    if mech.categories is not None:
        raise SpecError(f"{where}: intervention 'shift' must be numeric, not categorical")
    return Intervention(float(p), kind, target, shift=mech, range=rng)
