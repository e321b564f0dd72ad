"""Mechanisms: how a node's value is made from its parents and its own noise u ~ U(0, 1).

Every mechanism is an inverse-CDF map ``sample(parents, u)``; the matching ``noise(parents, x)``
recovers u from a value (abduction), which is what counterfactual transformations need.
Mechanism types are registered by name so specs can refer to them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import ndtr, ndtri

from ident3d.causal.errors import SpecError
from ident3d.causal.functions import Function, Values, compile_function

Range = tuple[float, float] | None
MECHANISMS: dict[str, type[Mechanism]] = {}


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: make a mechanism type available to specs under ``cls.kind``."""
    MECHANISMS[cls.kind] = cls
    return cls


class Mechanism(ABC):
    """One node's structural equation."""

    kind: ClassVar[str]
    keys: ClassVar[frozenset[str]]
    reads: frozenset[str] = frozenset()
    tables: tuple[tuple[str, int], ...] = ()
    categories: list[str] | None = None

    @abstractmethod
    def sample(self, values: Values, u: np.ndarray) -> np.ndarray:
        """Values of this node for parent values and uniform noise u (one per row)."""

    def noise(self, values: Values, x: np.ndarray) -> np.ndarray:
        """The noise u that would have produced x under these parent values."""
        return np.full(len(x), 0.5)

    @abstractmethod
    def describe(self) -> str:
        """One line for ``ident3d scm show``."""

    @classmethod
    def _functions(cls, *fns: Function) -> tuple[frozenset[str], tuple[tuple[str, int], ...]]:
        reads = frozenset().union(*(f.reads for f in fns))
        return reads, tuple(t for f in fns for t in f.tables)


def _positive(x: object, where: str, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not x > 0 or not np.isfinite(x):
        raise SpecError(f"{where}: {what} must be a positive number, got {x!r}")
    return float(x)


def _bounded(rng: Range, where: str, kind: str) -> tuple[float, float]:
    if rng is None:
        raise SpecError(f"{where}: a {kind} node needs a 'range: [low, high]'")
    return rng


@register
@dataclass
class Uniform(Mechanism):
    """Uniform on the node's range: exogenous latents such as the 3DIdent box."""

    kind: ClassVar[str] = "uniform"
    keys: ClassVar[frozenset[str]] = frozenset()
    low: float = -1.0
    high: float = 1.0

    @classmethod
    def build(cls, spec: Mapping, rng: Range, where: str) -> Uniform:
        lo, hi = _bounded(rng, where, "uniform")
        return cls(lo, hi)

    def sample(self, values: Values, u: np.ndarray) -> np.ndarray:
        return self.low + (self.high - self.low) * u

    def noise(self, values: Values, x: np.ndarray) -> np.ndarray:
        return (x - self.low) / (self.high - self.low)

    def describe(self) -> str:
        return f"U[{self.low:g}, {self.high:g}]"


@register
@dataclass
class Categorical(Mechanism):
    """A categorical variable with fixed probabilities; sampled as the category index."""

    kind: ClassVar[str] = "categorical"
    keys: ClassVar[frozenset[str]] = frozenset({"categories", "probs"})
    categories: list[str] | None = None
    probs: np.ndarray | None = None

    @classmethod
    def build(cls, spec: Mapping, rng: Range, where: str) -> Categorical:
        cats = spec.get("categories")
        if not isinstance(cats, list) or not cats or not all(isinstance(c, str) for c in cats):
            raise SpecError(f"{where}: 'categories' must be a non-empty list of names")
        if len(set(cats)) != len(cats):
            raise SpecError(f"{where}: 'categories' has duplicate names")
        probs = spec.get("probs")
        if probs is None:
            p = np.full(len(cats), 1.0 / len(cats))
        else:
            if not isinstance(probs, list) or len(probs) != len(cats):
                raise SpecError(f"{where}: 'probs' must list one probability per category")
            if any(isinstance(q, bool) or not isinstance(q, int | float) or q < 0 for q in probs):
                raise SpecError(f"{where}: 'probs' must be non-negative numbers")
            p = np.asarray(probs, dtype=np.float64)
            if not np.isclose(p.sum(), 1.0, atol=1e-6):
                raise SpecError(f"{where}: 'probs' must sum to 1, they sum to {p.sum():g}")
        return cls(categories=list(cats), probs=p)

    def sample(self, values: Values, u: np.ndarray) -> np.ndarray:
        edges = np.cumsum(self.probs)[:-1]
        return np.searchsorted(edges, u, side="right").astype(np.float64)

    def describe(self) -> str:
        probs = "uniform" if np.allclose(self.probs, self.probs[0]) else list(np.round(self.probs, 3))
        return f"Categorical({len(self.categories)}: {', '.join(self.categories)}; p={probs})"


@register
@dataclass
class Sticky(Mechanism):
    """A categorical that keeps its parent's category with probability ``stay``, else draws from ``probs``:
    a shape that persists over time (``parent: class_prev`` in a dynamic spec)."""

    kind: ClassVar[str] = "sticky"
    keys: ClassVar[frozenset[str]] = frozenset({"categories", "probs", "parent", "stay"})
    categories: list[str] | None = None
    probs: np.ndarray | None = None
    parent: str = ""
    stay: float = 1.0

    @classmethod
    def build(cls, spec: Mapping, rng: Range, where: str) -> Sticky:
        base = Categorical.build({k: v for k, v in spec.items() if k in Categorical.keys}, rng, where)
        parent = spec.get("parent")
        if not isinstance(parent, str) or not parent:
            raise SpecError(f"{where}: a sticky mechanism needs 'parent', the categorical node it keeps")
        stay = spec.get("stay", 1.0)
        if isinstance(stay, bool) or not isinstance(stay, int | float) or not 0 <= stay <= 1:
            raise SpecError(f"{where}: 'stay' must be a probability in [0, 1], got {stay!r}")
        obj = cls(base.categories, base.probs, parent, float(stay))
        obj.reads, obj.tables = frozenset({parent}), ((parent, len(base.categories)),)
        return obj

    def sample(self, values: Values, u: np.ndarray) -> np.ndarray:
        keep = u < self.stay
        fresh = np.clip((u - self.stay) / max(1.0 - self.stay, 1e-300), 0.0, 1.0 - 1e-16)
        drawn = np.searchsorted(np.cumsum(self.probs)[:-1], fresh, side="right").astype(np.float64)
        return np.where(keep, np.asarray(values[self.parent], dtype=np.float64), drawn)

    def describe(self) -> str:
        return f"{self.parent} w.p. {self.stay:g}, else Categorical({len(self.categories)})"


@register
@dataclass
class Bernoulli(Mechanism):
    """1 with probability p (a function of the parents, clipped to [0, 1]), else 0: e.g. a filled object slot."""

    kind: ClassVar[str] = "bernoulli"
    keys: ClassVar[frozenset[str]] = frozenset({"p"})
    p: Function | None = None

    @classmethod
    def build(cls, spec: Mapping, rng: Range, where: str) -> Bernoulli:
        p = compile_function(spec.get("p", 0.5), f"{where} p")
        obj = cls(p)
        obj.reads, obj.tables = cls._functions(p)
        return obj

    def _prob(self, values: Values, n: int) -> np.ndarray:
        return np.clip(self.p(values, n), 0.0, 1.0)

    def sample(self, values: Values, u: np.ndarray) -> np.ndarray:
        return (u < self._prob(values, len(u))).astype(np.float64)

    def noise(self, values: Values, x: np.ndarray) -> np.ndarray:
        p = self._prob(values, len(x))
        return np.where(np.asarray(x) > 0.5, 0.5 * p, p + 0.5 * (1.0 - p))

    def describe(self) -> str:
        return f"Bernoulli({self.p.text})"


def truncnorm_ppf(u: np.ndarray, mu: np.ndarray, sigma: float, lo: float, hi: float) -> np.ndarray:
    """Inverse CDF of N(mu, sigma) truncated to [lo, hi]; reflects upper-tail cases for accuracy."""
    a, b = (lo - mu) / sigma, (hi - mu) / sigma
    flip = a > 0  # whole interval in the upper tail: work on the mirror image instead
    a2, b2 = np.where(flip, -b, a), np.where(flip, -a, b)
    u2 = np.where(flip, 1.0 - u, u)
    pa, pb = ndtr(a2), ndtr(b2)
    z = ndtri(pa + u2 * (pb - pa))
    x = mu + sigma * np.where(flip, -z, z)
    return np.clip(np.nan_to_num(x, nan=0.5 * (lo + hi)), lo, hi)


def trunclaplace_ppf(u: np.ndarray, mu: np.ndarray, b: float, lo: float, hi: float) -> np.ndarray:
    """Inverse CDF of Laplace(mu, b) truncated to [lo, hi] (paper 001's Laplace conditional on a bounded latent)."""
    def cdf(x: np.ndarray) -> np.ndarray:
        t = (x - mu) / b
        return np.where(t < 0, 0.5 * np.exp(np.minimum(t, 0)), 1 - 0.5 * np.exp(-np.maximum(t, 0)))

    p = cdf(np.asarray(lo, dtype=np.float64)) + u * (cdf(np.asarray(hi, dtype=np.float64)) - cdf(lo))
    p = np.clip(p, 1e-300, 1 - 1e-16)
    x = np.where(p < 0.5, mu + b * np.log(2 * p), mu - b * np.log(2 * (1 - p)))
    return np.clip(x, lo, hi)


def truncnorm_cdf(x: np.ndarray, mu: np.ndarray, sigma: float, lo: float, hi: float) -> np.ndarray:
    """CDF of N(mu, sigma) truncated to [lo, hi] (the inverse of truncnorm_ppf)."""
    a, b, t = (lo - mu) / sigma, (hi - mu) / sigma, (x - mu) / sigma
    flip = a > 0
    a2, b2, t2 = np.where(flip, -b, a), np.where(flip, -a, b), np.where(flip, -t, t)
    pa, pb = ndtr(a2), ndtr(b2)
    with np.errstate(invalid="ignore", divide="ignore"):
        v = (ndtr(t2) - pa) / (pb - pa)
    v = np.clip(np.nan_to_num(v, nan=0.5), 0.0, 1.0)
    return np.where(flip, 1.0 - v, v)


@register
@dataclass
class TruncNormal(Mechanism):
    """Normal truncated to the node's range, mean a function of the parents (SPEC's TN)."""

    kind: ClassVar[str] = "truncnorm"
    keys: ClassVar[frozenset[str]] = frozenset({"mean", "scale"})
    mean: Function | None = None
    scale: float = 1.0
    low: float = -1.0
    high: float = 1.0

    @classmethod
    def build(cls, spec: Mapping, rng: Range, where: str) -> TruncNormal:
        lo, hi = _bounded(rng, where, "truncnorm")
        mean = compile_function(spec.get("mean", 0.0), f"{where} mean")
        obj = cls(mean, _positive(spec.get("scale", 1.0), where, "scale"), lo, hi)
        obj.reads, obj.tables = cls._functions(mean)
        return obj

    def sample(self, values: Values, u: np.ndarray) -> np.ndarray:
        return truncnorm_ppf(u, self.mean(values, len(u)), self.scale, self.low, self.high)

    def noise(self, values: Values, x: np.ndarray) -> np.ndarray:
        return truncnorm_cdf(x, self.mean(values, len(x)), self.scale, self.low, self.high)

    def describe(self) -> str:
        return f"TN({self.mean.text}, sd={self.scale:g}) on [{self.low:g}, {self.high:g}]"


_NOISE: dict[str, tuple[Callable, Callable]] = {  # name -> (ppf, cdf) of the unit noise
    "normal": (ndtri, ndtr),
    "laplace": (
        lambda u: -np.sign(u - 0.5) * np.log1p(-2 * np.abs(u - 0.5)),
        lambda e: np.where(e < 0, 0.5 * np.exp(e), 1 - 0.5 * np.exp(-e)),
    ),
    "uniform": (lambda u: 2 * u - 1, lambda e: (e + 1) / 2),
}


@register
@dataclass
class Additive(Mechanism):
    """Additive-noise model x = f(parents) + scale * e, e normal, Laplace or uniform on [-1, 1]."""

    kind: ClassVar[str] = "additive"
    keys: ClassVar[frozenset[str]] = frozenset({"fn", "noise", "scale"})
    fn: Function | None = None
    noise_kind: str = "normal"
    scale: float = 1.0
    rng: Range = None

    @classmethod
    def build(cls, spec: Mapping, rng: Range, where: str) -> Additive:
        fn = compile_function(spec.get("fn", 0.0), f"{where} fn")
        noise = spec.get("noise", "normal")
        if noise not in _NOISE:
            raise SpecError(f"{where}: unknown noise {noise!r}; use one of: {', '.join(_NOISE)}")
        obj = cls(fn, noise, _positive(spec.get("scale", 1.0), where, "scale"), rng)
        obj.reads, obj.tables = cls._functions(fn)
        return obj

    def sample(self, values: Values, u: np.ndarray) -> np.ndarray:
        x = self.fn(values, len(u)) + self.scale * _NOISE[self.noise_kind][0](u)
        return np.clip(x, *self.rng) if self.rng else x

    def noise(self, values: Values, x: np.ndarray) -> np.ndarray:
        return _NOISE[self.noise_kind][1]((x - self.fn(values, len(x))) / self.scale)

    def describe(self) -> str:
        return f"{self.fn.text} + {self.scale:g}*{self.noise_kind}"


@register
@dataclass
class Deterministic(Mechanism):
    """x = f(parents) exactly (clipped to the range if one is given); no noise of its own."""

    kind: ClassVar[str] = "deterministic"
    keys: ClassVar[frozenset[str]] = frozenset({"fn"})
    fn: Function | None = None
    rng: Range = None

    @classmethod
    def build(cls, spec: Mapping, rng: Range, where: str) -> Deterministic:
        if "fn" not in spec:
            raise SpecError(f"{where}: a deterministic mechanism needs 'fn'")
        fn = compile_function(spec["fn"], f"{where} fn")
        obj = cls(fn, rng)
        obj.reads, obj.tables = cls._functions(fn)
        return obj

    def sample(self, values: Values, u: np.ndarray) -> np.ndarray:
        x = self.fn(values, len(u))
        return np.clip(x, *self.rng) if self.rng else x

    def describe(self) -> str:
        return f"{self.fn.text} (no noise)"


def build_mechanism(spec: object, rng: Range, where: str) -> Mechanism:
    """Build a registered mechanism from its spec mapping (``type`` + parameters)."""
    if not isinstance(spec, Mapping):
        raise SpecError(f"{where}: 'mechanism' must be a mapping with a 'type', got {spec!r}")
    kind = spec.get("type")
    if kind not in MECHANISMS:
        raise SpecError(
            f"{where}: unknown mechanism {kind!r}; use one of: {', '.join(sorted(MECHANISMS))}"
        )
    cls = MECHANISMS[kind]
    extra = set(spec) - {"type"} - cls.keys
    if extra:
        raise SpecError(
            f"{where}: mechanism {kind!r} has unknown key(s) {sorted(extra)}; "
            f"allowed: {sorted(cls.keys) or 'none'}"
        )
    return cls.build(spec, rng, where)
