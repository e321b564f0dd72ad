"""Functions of a node's parents, declared in specs: constants, linear maps, per-class tables,
circular means (for hues) and safe arithmetic expressions.

A function spec is a number (constant), a string (expression) or a dict with a ``type``.
Each compiled function knows which parents it reads, so the SCM can check them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ident3d.causal.errors import SpecError

Values = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Function:
    """A compiled parent function: ``fn(values, n) -> float64 array of length n``."""

    kind: str
    reads: frozenset[str]
    fn: Callable[[Values, int], np.ndarray]
    tables: tuple[tuple[str, int], ...] = field(default=())  # (categorical parent, #values)
    text: str = ""  # human-readable formula for `ident3d scm show`

    def __call__(self, values: Values, n: int) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.fn(values, n), dtype=np.float64), (n,))


def _number(x: object, where: str, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise SpecError(f"{where}: {what} must be a number, got {x!r}")
    if not np.isfinite(x):
        raise SpecError(f"{where}: {what} must be finite, got {x!r}")
    return float(x)


def _weights(x: object, where: str, what: str) -> dict[str, float]:
    if x is None:
        return {}
    if not isinstance(x, Mapping):
        raise SpecError(f"{where}: {what} must be a mapping parent -> number, got {x!r}")
    return {str(k): _number(v, where, f"{what}[{k}]") for k, v in x.items()}


def _table(x: object, where: str) -> tuple[str, np.ndarray] | None:
    if x is None:
        return None
    if not isinstance(x, Mapping) or set(x) != {"parent", "values"}:
        raise SpecError(f"{where}: a table needs exactly 'parent' and 'values', got {x!r}")
    vals = x["values"]
    if not isinstance(vals, list) or not vals:
        raise SpecError(f"{where}: table 'values' must be a non-empty list of numbers")
    arr = np.array([_number(v, where, "table value") for v in vals])
    return str(x["parent"]), arr


def _lookup(table: tuple[str, np.ndarray]) -> Callable[[Values], np.ndarray]:
    parent, arr = table
    return lambda v: arr[np.asarray(v[parent], dtype=np.int64)]


def _linear(spec: Mapping, where: str) -> Function:
    bias = _number(spec.get("bias", 0.0), where, "bias")
    coef = _weights(spec.get("coef"), where, "coef")
    table = _table(spec.get("offsets"), where)
    look = _lookup(table) if table else None

    def fn(v: Values, n: int) -> np.ndarray:
        out = np.full(n, bias)
        for p, w in coef.items():
            out = out + w * v[p]
        return out + look(v) if look else out

    reads = set(coef) | ({table[0]} if table else set())
    tables = ((table[0], len(table[1])),) if table else ()
    terms = [f"{w:g}*{p}" for p, w in coef.items()] + ([f"table[{table[0]}]"] if table else [])
    text = " + ".join(terms + ([f"{bias:g}"] if bias or not terms else []))
    return Function("linear", frozenset(reads), fn, tables, text)


def _circular(spec: Mapping, where: str) -> Function:
    """Weighted circular mean of parents read as angles (value / period turns), in value units."""
    period = _number(spec.get("period", 4.0), where, "period")
    if period <= 0:
        raise SpecError(f"{where}: period must be > 0, got {period}")
    weights = _weights(spec.get("weights"), where, "weights")
    table = _table(spec.get("offsets"), where)
    look = _lookup(table) if table else None
    scale = 2 * np.pi / period

    def fn(v: Values, n: int) -> np.ndarray:
        s, c = np.zeros(n), np.zeros(n)
        terms = [(w, v[p]) for p, w in weights.items()] + ([(1.0, look(v))] if look else [])
        for w, x in terms:
            s = s + w * np.sin(scale * x)
            c = c + w * np.cos(scale * x)
        return np.arctan2(s, c) / scale

    reads = set(weights) | ({table[0]} if table else set())
    tables = ((table[0], len(table[1])),) if table else ()
    args = [f"{w:g}*{p}" for p, w in weights.items()] + ([f"table[{table[0]}]"] if table else [])
    return Function("circular", frozenset(reads), fn, tables, f"circmean({', '.join(args)})")


def _table_fn(spec: Mapping, where: str) -> Function:
    table = _table(dict(spec), where)
    if table is None:
        raise SpecError(f"{where}: a table function needs 'parent' and 'values'")
    look = _lookup(table)
    return Function("table", frozenset({table[0]}), lambda v, n: look(v), ((table[0], len(table[1])),),
                    f"table[{table[0]}]")


_EXPR_FUNCS: dict[str, Callable] = {
    name: getattr(np, name)
    for name in (
        "sin cos tan arcsin arccos arctan arctan2 sinh cosh tanh exp log log1p sqrt abs "
        "square clip minimum maximum where sign floor"
    ).split()
}
_EXPR_FUNCS["sigmoid"] = lambda x: 1.0 / (1.0 + np.exp(-x))
_EXPR_CONSTS = {"pi": np.pi, "e": np.e}
_EXPR_NODES = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.Call, ast.Name, ast.Load, ast.Constant,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.Mod, ast.USub, ast.UAdd,
    ast.Compare, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
)


def _expr(text: str, where: str) -> Function:
    """A numpy arithmetic expression over parent names, e.g. ``0.8*pos_x + 0.2*sin(pi*pos_y)``."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise SpecError(f"{where}: cannot parse expression {text!r} ({exc.msg})") from None
    reads: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _EXPR_NODES):
            raise SpecError(f"{where}: expression {text!r} uses {type(node).__name__}, not allowed")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _EXPR_FUNCS
        ):
            raise SpecError(
                f"{where}: expression {text!r} calls an unknown function; allowed: "
                + ", ".join(sorted(_EXPR_FUNCS))
            )
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
            raise SpecError(f"{where}: expression {text!r} has a non-numeric constant")
        if isinstance(node, ast.Name) and node.id not in _EXPR_FUNCS | _EXPR_CONSTS:
            reads.add(node.id)
    code = compile(tree, f"<{where}>", "eval")

    def fn(v: Values, n: int) -> np.ndarray:
        scope = {**_EXPR_FUNCS, **_EXPR_CONSTS, **{p: v[p] for p in reads}}
        return eval(code, {"__builtins__": {}}, scope)  # noqa: S307 - AST checked above

    return Function("expr", frozenset(reads), fn, text=text)


_KINDS: dict[str, Callable[[Mapping, str], Function]] = {
    "linear": _linear,
    "circular": _circular,
    "table": _table_fn,
    "expr": lambda s, w: _expr(s.get("expr", ""), w),
    "constant": lambda s, w: _constant(_number(s.get("value"), w, "value")),
}


_KEYS: dict[str, set[str]] = {
    "linear": {"bias", "coef", "offsets"},
    "circular": {"weights", "offsets", "period"},
    "table": {"parent", "values"},
    "expr": {"expr"},
    "constant": {"value"},
}


def _constant(value: float) -> Function:
    return Function("constant", frozenset(), lambda v, n: np.full(n, value), text=f"{value:g}")


def compile_function(spec: object, where: str) -> Function:
    """Compile a function spec (number, expression string or typed dict) into a Function."""
    if isinstance(spec, int | float) and not isinstance(spec, bool):
        return _constant(_number(spec, where, "value"))
    if isinstance(spec, str):
        return _expr(spec, where)
    if not isinstance(spec, Mapping):
        raise SpecError(f"{where}: a function must be a number, an expression or a mapping, got {spec!r}")
    kind = spec.get("type")
    if kind not in _KINDS:
        raise SpecError(
            f"{where}: unknown function type {kind!r}; use one of: {', '.join(sorted(_KINDS))}"
        )
    extra = set(spec) - {"type"} - _KEYS[kind]
    if extra:
        raise SpecError(
            f"{where}: function type {kind!r} has unknown key(s) {sorted(extra)}; "
            f"allowed: {sorted(_KEYS[kind])}"
        )
    return _KINDS[kind]({k: v for k, v in spec.items() if k != "type"}, where)
