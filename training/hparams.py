"""Hyperparameters (``--hp``) and encoder options (``--encoder-arg``) declared once, in the signature that takes
them, and checked from that declaration wherever a value comes from (the command line, a config, Python).

The annotation is the declaration: ``float`` (a finite number), ``int`` (a whole number), ``bool``, ``str``, a
``Literal[...]`` of choices, ``Sequence[int]`` (a list of whole numbers), ``Sequence[float]`` (a list of finite
numbers); ``X | None`` also allows null; and
``Annotated[X, Range(...)]`` adds bounds (the aliases ``Positive``, ``NonNegative``, ``Unit``, ``Count`` and
``Counts`` cover the common ones)::

    def __init__(self, encoder, *, tau: Positive = 1.0, entropy: Literal["kl", "uniformity"] = "kl"): ...

Registered classes (``ident3d.training.registry``) check their declared arguments on construction, ``coerce`` converts
values to the declared type (``tau: 1`` -> 1.0, so equal settings compare and hash equal), and ``describe``
gives the text ``ident3d train --list`` shows. A bad value is one line naming the key, the value and what is
expected: ``objective infonce's hyperparameter tau must be a finite number > 0, got true``.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from ident3d.causal.errors import UserError


@dataclass(frozen=True)
class Range:
    """Bounds of a number (for a list of whole numbers: of each item)."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    def holds(self, x: float) -> bool:
        """Whether ``x`` is within every bound."""
        return ((self.gt is None or x > self.gt) and (self.ge is None or x >= self.ge)
                and (self.lt is None or x < self.lt) and (self.le is None or x <= self.le))

    def text(self) -> str:
        """'> 0', '>= 1', 'in [0, 1]', ..."""
        if self.ge is not None and self.le is not None:
            return f"in [{self.ge:g}, {self.le:g}]"
        parts = [f"{op} {v:g}" for op, v in ((">", self.gt), (">=", self.ge), ("<", self.lt), ("<=", self.le))
                 if v is not None]
        return " and ".join(parts)


Positive = Annotated[float, Range(gt=0)]
NonNegative = Annotated[float, Range(ge=0)]
Unit = Annotated[float, Range(ge=0, le=1)]
Count = Annotated[int, Range(ge=1)]
Counts = Annotated[Sequence[int], Range(ge=1)]

_KINDS = {float: "number", int: "whole", bool: "bool", str: "text"}


@dataclass(frozen=True)
class Param:
    """One declared argument: its kind (number, whole, bool, text, choice, wholes, numbers, or any), whether null is
    allowed, its bounds, its choices and its default."""

    name: str
    kind: str
    optional: bool = False
    range: Range | None = None
    choices: tuple[Any, ...] = ()
    default: Any = None

    def expected(self, example: bool = True) -> str:
        """What a value must be, in words (with an example where the form is not obvious)."""
        bounds = f" {self.range.text()}" if self.range else ""
        text = {"number": f"a finite number{bounds}", "whole": f"a whole number{bounds}", "bool": "true or false",
                "text": "text", "choice": "one of " + ", ".join(map(show, self.choices)),
                "wholes": f"a list of whole numbers{bounds}" + (", e.g. [100, 200]," if example else ""),
                "numbers": f"a list of finite numbers{bounds}" + (", e.g. [0.5, 1.5]," if example else ""),
                }.get(self.kind, "any value")
        return (text + (" or null" if self.optional else "")).rstrip(",")

    def convert(self, value: Any) -> Any:
        """``value`` in the declared type; raises ``ValueError`` when it does not fit the declaration."""
        if value is None and self.optional:
            return None
        if self.kind == "number" and _is_number(value) and math.isfinite(value):
            out: Any = float(value)
        elif self.kind == "whole" and _is_whole(value):
            out = int(value)
        elif self.kind == "bool" and isinstance(value, bool):
            return value
        elif self.kind == "text" and isinstance(value, str):
            return value
        elif self.kind == "choice":
            if any(value == c and type(value) is type(c) for c in self.choices):
                return value
            raise ValueError
        elif self.kind == "wholes" and isinstance(value, list | tuple) and all(_is_whole(v) for v in value):
            out = [int(v) for v in value]
        elif self.kind == "numbers" and isinstance(value, list | tuple) and all(
                _is_number(v) and math.isfinite(v) for v in value):
            out = [float(v) for v in value]
        elif self.kind == "any":
            return value
        else:
            raise ValueError
        items = out if isinstance(out, list) else [out]
        if self.range is not None and not all(self.range.holds(v) for v in items):
            raise ValueError
        return out

    def summary(self) -> str:
        """'tau=1.0 (a finite number > 0)' (the default, then what a value must be) for ``--list``."""
        return f"{self.name}={show(self.default)} ({self.expected(example=False)})"


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _is_whole(x: Any) -> bool:
    return _is_number(x) and math.isfinite(x) and float(x).is_integer()


def show(value: Any) -> str:
    """A value as the user would write it (true, null, 'two', [1, 2], nan)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, tuple):
        value = list(value)
    return repr(value) if isinstance(value, str) else str(value)


def _param(name: str, annotation: Any, default: Any) -> Param:
    """The Param an annotation declares (unknown annotations declare 'any')."""
    ann, optional, bounds = annotation, False, None
    while True:
        origin = typing.get_origin(ann)
        if origin is Annotated:
            ann, *meta = typing.get_args(ann)
            bounds = next((m for m in meta if isinstance(m, Range)), bounds)
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            optional = optional or len(args) < len(typing.get_args(ann))
            if len(args) != 1:
                return Param(name, "any", optional, default=default)
            ann = args[0]
        else:
            break
    if typing.get_origin(ann) is Literal:
        return Param(name, "choice", optional, choices=typing.get_args(ann), default=default)
    if typing.get_origin(ann) in (list, tuple, Sequence) and typing.get_args(ann)[:1] in ((int,), (float,)):
        kind = "wholes" if typing.get_args(ann)[0] is int else "numbers"
        return Param(name, kind, optional, bounds, default=default)
    return Param(name, _KINDS.get(ann, "any"), optional, bounds, default=default)


@functools.cache
def _declared(fn: Callable[..., Any]) -> dict[str, Param]:
    """Every keyword argument of ``fn`` with its declaration (string annotations resolved in fn's module)."""
    out = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) or p.name == "self":
            continue
        ann = p.annotation
        if isinstance(ann, str):
            ann = eval(ann, fn.__globals__)  # noqa: S307 - our own annotations, as typing.get_type_hints does
        default = None if p.default is inspect.Parameter.empty else p.default
        out[p.name] = _param(p.name, None if ann is inspect.Parameter.empty else ann, default)
    return out


def declared(cls: Any, fixed: frozenset[str] | set[str] = frozenset()) -> dict[str, Param]:
    """{name: Param} of what ``cls(...)`` (a class or a function) takes, besides the ``fixed`` arguments."""
    fn = inspect.unwrap(cls if inspect.isfunction(cls) else cls.__init__)
    return {k: v for k, v in _declared(fn).items() if k not in fixed}


def coerce(cls: Any, given: Mapping[str, Any], owner: str, word: str,
           fixed: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """``given`` with every declared value in its declared type; the first that does not fit is one line:
    "{owner}'s {word} {key} must be {expected}, got {value}". Undeclared keys pass through unchanged."""
    params = declared(cls, fixed)
    out = dict(given)
    for key, value in given.items():
        if key in params:
            try:
                out[key] = params[key].convert(value)
            except ValueError:
                raise UserError(f"{owner}'s {word} {key} must be {params[key].expected()}, got {show(value)}") \
                    from None
    return out


def describe(cls: Any, fixed: frozenset[str] | set[str] = frozenset()) -> str:
    """'tau=1.0 (a finite number > 0), ...' for ``ident3d train --list`` ('' when it takes none)."""
    return ", ".join(p.summary() for p in declared(cls, fixed).values())


def checked_init(cls: type, owner: Callable[[Any], str], word: str, fixed: frozenset[str] | set[str]) -> None:
    """Make ``cls(...)`` check (and convert) its declared arguments before its own ``__init__`` runs."""
    init = cls.__dict__.get("__init__")
    if init is None:
        return
    sig = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = sig.bind(self, *args, **kwargs)
        bound.arguments.update(coerce(init, {k: v for k, v in bound.arguments.items() if k != "self"},
                                      owner(self), word, fixed))
        init(*bound.args, **bound.kwargs)

    cls.__init__ = __init__  # type: ignore[misc]


def keyword_names(cls: Any, fixed: frozenset[str] | set[str]) -> list[str] | None:
    """The keyword arguments ``cls(...)`` (a class or a function) accepts besides the ``fixed`` ones the caller
    fills in; None if it takes **kwargs."""
    params = inspect.signature(cls if inspect.isfunction(cls) else cls.__init__).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.name not in fixed
            and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]


def check_keywords(kind: str, name: str, cls: Any, given: dict[str, Any], flag: str,
                   fixed: frozenset[str] | set[str]) -> None:
    """Refuse keys ``cls`` does not take, in our words (not Python's "unexpected keyword argument"),
    listing the ones it does take."""
    allowed = keyword_names(cls, fixed)
    if allowed is None:
        return
    unknown = [k for k in given if k not in allowed]
    if unknown:
        takes = ", ".join(allowed) or "none"
        raise UserError(f"{kind} {name} has no {flag} {unknown[0]!r}; it takes: {takes}")
