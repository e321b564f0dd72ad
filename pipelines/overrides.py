"""``--set PATH=VALUE`` overrides of an experiment config (``train.steps=3``, ``rows[1].train.hp.tau=0.5``,
``seeds=[0,1]``): applied to the parsed YAML before the kind checks it, so an override is held to every rule the
config file is; a path that leads nowhere is one line naming it and the keys that are there.

A path is dotted keys with list indices in brackets; the value is read as YAML with the config's own number rules
(``3`` an int, ``1e-3`` a float, ``[0, 1]`` a list, ``null``, ``true``, anything else text). The last key may be new
(``train.hp.tau`` where ``hp`` holds no ``tau``): the kind's checks then say whether it is a setting there.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from ident3d.causal.errors import UserError
from ident3d.causal.yamlnum import load_yaml

STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[-?\d+\])*)")


def parse_path(path: str) -> list[str | int]:
    """``rows[1].train.steps`` -> ``["rows", 1, "train", "steps"]``; anything else is one line."""
    steps: list[str | int] = []
    for part in path.split("."):
        m = STEP.fullmatch(part)
        if m is None:
            raise UserError(f"--set {path}: {part!r} is not a key (letters, digits, _) with optional [index]es; "
                            "e.g. --set train.steps=3 or --set rows[0].views=colour")
        steps.append(m.group(1))
        steps += [int(i) for i in re.findall(r"\[(-?\d+)\]", m.group(2))]
    return steps


def parse_override(text: str) -> tuple[str, list[str | int], Any]:
    """``PATH=VALUE`` -> (the path as written, its steps, the value read as YAML)."""
    path, sep, raw = text.partition("=")
    if not sep or not path.strip():
        raise UserError(f"--set {text}: give PATH=VALUE, e.g. --set train.steps=3")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except Exception as exc:  # noqa: BLE001 - any YAML error of the value is one line
        raise UserError(f"--set {text}: the value is not YAML ({str(exc).splitlines()[0]})") from None
    return path.strip(), parse_path(path.strip()), value


def _where(steps: Sequence[str | int]) -> str:
    """Steps as a path again: ``rows[1].train``."""
    text = ""
    for s in steps:
        text += f"[{s}]" if isinstance(s, int) else (f".{s}" if text else s)
    return text or "the config"


def apply_overrides(cfg: Any, overrides: Sequence[str]) -> Any:
    """A copy of the parsed config with every ``PATH=VALUE`` of ``overrides`` set, in order (a later one wins)."""
    if not overrides:
        return cfg
    out = copy.deepcopy(cfg)
    for text in overrides:
        path, steps, value = parse_override(text)
        node = out
        for i, step in enumerate(steps):
            last = i == len(steps) - 1
            here = _where(steps[:i])
            if isinstance(step, int):
                if not isinstance(node, list):
                    raise UserError(f"--set {path}: {here} is not a list")
                if not -len(node) <= step < len(node):
                    raise UserError(f"--set {path}: {here} has {len(node)} items (indices 0..{len(node) - 1})")
            elif not isinstance(node, dict):
                raise UserError(f"--set {path}: {here} is not a mapping with keys")
            elif step not in node and not last:
                keys = ", ".join(sorted(map(str, node))) or "none"
                raise UserError(f"--set {path}: {here} has no key {step!r} (its keys: {keys})")
            if last:
                node[step] = value
            else:
                node = node[step]
    return out


def add_set_flag(p: Any) -> None:
    """The ``--set PATH=VALUE`` flag of every command that runs an experiment config (repeatable)."""
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="override a setting of the config, e.g. --set train.steps=3 --set rows[0].views=colour "
                        "(repeatable; checked as the config file is; recorded in the output's marker)")
