"""Placement rules as one typed value: what a scene's ``placement:`` block (or ``ident3d render --support-*``) asks of
every stored row, parsed and checked in one place (no scene, SCM or Blender here; ``render/placement.py`` applies them).

    placement: {min_distance: 2.5, min_visible: 0.005, retries: 100,
                support: {exclude: {obj0_pos_x: [0.2, 1.0], obj1_pos_x: [0.2, 1.0]}}}

``min_distance``: least distance (world units) between the centres of any two present objects; ``min_visible``: least
visible share of the frame of every present object (and at least one pixel); ``retries``: redraws of a row that breaks
a rule before its chunk fails; ``support``: ``exclude`` rejects rows whose listed latents ALL lie in their intervals (a
held-out corner), ``only`` keeps just those rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ident3d.causal.errors import UserError

RULE_KEYS = ("min_distance", "min_visible", "retries", "support")
SUPPORT_MODES = ("exclude", "only")
DEFAULT_RETRIES = 100


@dataclass(frozen=True)
class Support:
    """A support region: ``mode`` 'exclude' (reject rows inside the box) or 'only' (keep only those), ``box`` the
    listed latents' closed intervals as (name, low, high)."""

    mode: str
    box: tuple[tuple[str, float, float], ...]

    def to_dict(self) -> dict[str, dict[str, list[float]]]:
        """Plain form, as the YAML and the store's attributes write it."""
        return {self.mode: {name: [low, high] for name, low, high in self.box}}

    def describe(self) -> str:
        """A few words for messages: 'support exclude obj0_pos_x in [0.2, 1]'."""
        return f"support {self.mode} " + ", ".join(f"{n} in [{lo:g}, {hi:g}]" for n, lo, hi in self.box)


@dataclass(frozen=True)
class PlacementRules:
    """A render's placement rules (0 / None: that rule is off)."""

    min_distance: float = 0.0
    min_visible: float = 0.0
    retries: int = DEFAULT_RETRIES
    support: Support | None = None

    @property
    def active(self) -> bool:
        """Whether any rule can reject a row."""
        return self.min_distance > 0 or self.min_visible > 0 or self.support is not None

    @property
    def on_latents(self) -> bool:
        """Whether a rule is checked on the latents, before rendering (min_distance, support)."""
        return self.min_distance > 0 or self.support is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain form (the scene YAML's and the store attribute ``placement``); rules that are off are left out."""
        out: dict[str, Any] = {}
        if self.min_distance > 0:
            out["min_distance"] = self.min_distance
        if self.min_visible > 0:
            out["min_visible"] = self.min_visible
        out["retries"] = self.retries
        if self.support is not None:
            out["support"] = self.support.to_dict()
        return out


def _number(x: Any, what: str, low: float, high: float = math.inf) -> float:
    """A finite number in [low, high) as a float, or a one-line UserError naming the setting."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or not low <= x < high:
        bound = f"in [{low:g}, {high:g})" if math.isfinite(high) else f">= {low:g}"
        raise UserError(f"{what} must be a number {bound}, got {x!r}")
    return float(x)


def parse_rules(data: Any, where: str = "placement") -> PlacementRules:
    """Validate a ``placement:`` mapping into PlacementRules (one-line UserError for a bad key or value)."""
    if not isinstance(data, Mapping):
        raise UserError(f"{where} must be a mapping of {', '.join(RULE_KEYS)}, got {data!r}")
    if unknown := sorted(set(data) - set(RULE_KEYS)):
        raise UserError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(RULE_KEYS)}")
    retries = data.get("retries", DEFAULT_RETRIES)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise UserError(f"{where}.retries must be a whole number >= 0 (redraws of a rejected row), got {retries!r}")
    support = data.get("support")
    return PlacementRules(min_distance=_number(data.get("min_distance", 0.0), f"{where}.min_distance", 0.0),
                          min_visible=_number(data.get("min_visible", 0.0), f"{where}.min_visible", 0.0, 1.0),
                          retries=retries, support=None if support is None else parse_support(support,
                                                                                              f"{where}.support"))


def parse_support(data: Any, where: str = "support") -> Support:
    """Validate ``{exclude: {NAME: [LOW, HIGH], ...}}`` or ``{only: {...}}`` into a Support (names are checked against
    the SCM later, ``ident3d.render.placement.check_rules``)."""
    if not isinstance(data, Mapping) or len(data) != 1 or next(iter(data)) not in SUPPORT_MODES:
        raise UserError(f"{where} must be {{exclude: {{NAME: [LOW, HIGH], ...}}}} or {{only: {{...}}}}, got {data!r}")
    mode, box = next(iter(data.items()))
    if not isinstance(box, Mapping) or not box:
        raise UserError(f"{where}.{mode} must map latent names to [LOW, HIGH] intervals, got {box!r}")
    return Support(mode, tuple(_interval(str(name), interval, f"{where}.{mode}") for name, interval in box.items()))


def _interval(name: str, interval: Any, where: str) -> tuple[str, float, float]:
    """One support latent's closed interval as (name, low, high), or a one-line UserError."""
    ok = isinstance(interval, list | tuple) and len(interval) == 2 and all(
        not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v) for v in interval)
    if not ok or not interval[0] < interval[1]:
        raise UserError(f"{where}: {name} must be an interval [LOW, HIGH] of two finite numbers with LOW < HIGH, "
                        f"got {interval!r}")
    return name, float(interval[0]), float(interval[1])


def support_from_flags(exclude: str | None, only: str | None) -> dict[str, dict[str, list[float]]] | None:
    """``--support-exclude`` / ``--support-only`` text (``NAME=LOW:HIGH[,NAME=LOW:HIGH]``) as a support mapping (None:
    neither given); both given, or a malformed item, is a one-line UserError."""
    if exclude is not None and only is not None:
        raise UserError("give --support-exclude or --support-only, not both (one support region per store)")
    if exclude is None and only is None:
        return None
    mode, text = ("exclude", exclude) if exclude is not None else ("only", only)
    box: dict[str, list[float]] = {}
    for item in str(text).split(","):
        name, eq, interval = item.strip().partition("=")
        low, colon, high = interval.partition(":")
        try:
            values = [float(low), float(high)]
        except ValueError:
            values = []
        if not eq or not colon or not name or len(values) != 2:
            raise UserError(f"--support-{mode}: expected NAME=LOW:HIGH[,NAME=LOW:HIGH], e.g. obj0_pos_x=0.2:1, "
                            f"got {item.strip()!r}")
        if name in box:
            raise UserError(f"--support-{mode}: latent {name} given twice")
        box[name] = list(_interval(name, values, f"--support-{mode}")[1:])
    return {mode: box}
