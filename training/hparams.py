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

import dataclasses
import functools
import inspect
import json
import math
import operator
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
            return f"in [{_num(self.ge)}, {_num(self.le)}]"
        parts = [f"{op} {_num(v)}" for op, v in ((">", self.gt), (">=", self.ge), ("<", self.lt), ("<=", self.le))
                 if v is not None]
        return " and ".join(parts)


def _num(v: float) -> str:
    """A bound as written: a whole number in full (2**63 - 1, not 9.22337e+18), else compactly."""
    return str(v) if isinstance(v, int) else f"{v:g}"


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


# ----- whole configs: nested dataclasses, lists and mappings, parsed by their annotations ---------------------
@dataclass(frozen=True)
class PartialOf:
    """``Annotated[dict[str, Any], PartialOf(TrainConfig, exclude=..., extra=...)]``: a mapping of some of a
    dataclass's fields (each held to that field's annotation) plus ``extra`` keys of their own types; parsed to a
    plain dict of the keys given (a section that rows override key by key)."""

    of: type
    exclude: frozenset[str] = frozenset()
    extra: tuple[tuple[str, Any], ...] = ()  # (key, annotation) pairs (hashable, as Annotated's metadata must be)


@dataclass(frozen=True)
class Tagged:
    """``Annotated[A | B | C, Tagged(pick)]``: a union of dataclasses whose member ``pick(value, path)`` names (a tagged
    union: e.g. a store spec is a dataset, sequence or image store by the keys it has)."""

    pick: Callable[[Any], type]


@dataclass(frozen=True)
class NonBlank:
    """``Annotated[str, NonBlank()]``: text that is not empty or only spaces (a name)."""


class ConfigError(UserError):
    """A value of a config that does not fit its declaration, at ``path`` (``rows[2].train.steps``)."""

    def __init__(self, path: str, text: str) -> None:
        super().__init__(f"{path}: {text}" if path else text)
        self.path, self.text = path, text


def _at(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def parse(ann: Any, value: Any, path: str = "") -> Any:
    """``value`` (parsed YAML) checked against the annotation ``ann`` and converted: a dataclass from a mapping
    (unknown and missing keys refused, each field by its own annotation, then its ``__post_init__`` checks), a tuple
    from a list, a dict from a mapping, a tagged union, or a scalar as the hyperparameters are (``Param``). The
    first value that does not fit is one ``ConfigError`` line naming its key path:
    ``rows[2].train.steps: must be a whole number >= 1, got 2.5``."""
    meta: list[Any] = []
    optional = False
    while True:  # peel Annotated[...] (keeping its metadata) and X | None (keeping that null is allowed)
        if typing.get_origin(ann) is Annotated:
            ann, *more = typing.get_args(ann)
            meta += more
        elif typing.get_origin(ann) in (typing.Union, types.UnionType) and type(None) in typing.get_args(ann):
            optional = True
            if value is None:
                return None
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            ann = functools.reduce(operator.or_, args)  # what is left of the union
        else:
            break
    for m in meta:
        if isinstance(m, PartialOf):
            return _parse_partial(m, value, path)
        if isinstance(m, Tagged):
            return parse(m.pick(value, path), value, path)  # the member the value's keys name
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):  # e.g. str | int: the first member the value fits
        wants = []
        for member in typing.get_args(ann):
            try:
                return parse(typing.Annotated[(member, *meta)] if meta else member, value, path)
            except ConfigError as exc:
                wants.append(exc.text.removeprefix("must be ").split(", got ")[0])
        raise ConfigError(path, f"must be {' or '.join(wants)}{' or null' if optional else ''}, got {show(value)}")
    if dataclasses.is_dataclass(ann):
        return _parse_dataclass(ann, value, path)
    if origin in (list, tuple, Sequence) and not (typing.get_args(ann)[:1] in ((int,), (float,)) and any(
            isinstance(m, Range) for m in meta)):
        if not isinstance(value, list | tuple):
            raise ConfigError(path, f"must be a list, got {show(value)}")
        item = typing.get_args(ann)[0] if typing.get_args(ann) else Any
        return tuple(parse(item, v, _at(path, i)) for i, v in enumerate(value))
    if origin in (dict, Mapping):
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ConfigError(path, f"must be a mapping, got {show(value)}")
        item = typing.get_args(ann)[1] if typing.get_args(ann) else Any
        return {k: parse(item, v, _at(path, k)) for k, v in value.items()}
    param = _param(path, typing.Annotated[(ann, *meta)] if meta else ann, None)
    if optional:
        param = dataclasses.replace(param, optional=True)
    try:
        out = param.convert(value)
    except ValueError:
        raise ConfigError(path, f"must be {param.expected()}, got {show(value)}") from None
    if any(isinstance(m, NonBlank) for m in meta) and isinstance(out, str) and not out.strip():
        raise ConfigError(path, f"must be text that is not blank, got {show(value)}")
    return out


def _parse_dataclass(cls: type, value: Any, path: str) -> Any:
    """A dataclass from a mapping of its fields (the required ones given, no unknown ones)."""
    fields_ = {f.name: f for f in dataclasses.fields(cls) if f.init}
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be a mapping with keys {', '.join(fields_)}, got {show(value)}")
    if unknown := [k for k in value if k not in fields_]:
        raise ConfigError(_at(path, str(unknown[0])), f"is not a setting here; allowed: {', '.join(fields_)}")
    required = [n for n, f in fields_.items() if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    if missing := [k for k in required if k not in value]:
        raise ConfigError(_at(path, missing[0]), f"is missing (required: {', '.join(required)})")
    hints = _hints(cls)
    args = {k: parse(hints[k], v, _at(path, k)) for k, v in value.items()}
    try:
        return cls(**args)
    except ConfigError as exc:  # a cross-field rule of __post_init__, at a path below this one
        raise ConfigError(_at(path, exc.path) if exc.path else path, exc.text) from None
    except UserError as exc:  # a check __post_init__ calls (a registry's, the renderer's) that names its own key
        raise ConfigError(path, str(exc)) from None


def _parse_partial(spec: PartialOf, value: Any, path: str) -> dict[str, Any]:
    """Some of a dataclass's fields (and ``extra`` keys), each by its annotation, as a dict of the keys given."""
    hints = {**{k: v for k, v in _hints(spec.of).items() if k not in spec.exclude}, **dict(spec.extra)}
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be a mapping of settings ({', '.join(sorted(hints))}), got {show(value)}")
    if unknown := [k for k in value if k not in hints]:
        raise ConfigError(_at(path, str(unknown[0])), f"is not a setting here; allowed: {', '.join(sorted(hints))}")
    return {k: parse(hints[k], v, _at(path, k)) for k, v in value.items()}


def parse_config(cls: type, value: Any, head: str) -> Any:
    """A whole config of type ``cls``; an error is one line ``HEAD: PATH: what is wrong`` (``head``: e.g.
    ``config configs/x.yaml``)."""
    try:
        return parse(cls, value)
    except ConfigError as exc:
        raise UserError(f"{head}: {exc}") from None
