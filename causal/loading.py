"""Finding and reading SCM specs (static or dynamic): built-in names, YAML/JSON files, or dicts."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ident3d.causal.dynamic import DYNAMIC_NODE_KEYS, DynamicSCM, is_dynamic
from ident3d.causal.errors import SpecError, UserError
from ident3d.causal.scm import SCM
from ident3d.causal.yamlnum import load_yaml


def builtin_names() -> list[str]:
    """Names of the SCM specs shipped with the package (``causal/specs/*.yaml``)."""
    files = resources.files("ident3d.causal").joinpath("specs").iterdir()
    return sorted(f.name[: -len(".yaml")] for f in files if f.name.endswith(".yaml"))


def read_spec_text(name_or_path: str | Path) -> str:
    """The YAML text of a built-in spec or a spec file (for showing or copying it)."""
    text = str(name_or_path)
    if text in builtin_names():
        return resources.files("ident3d.causal").joinpath("specs", f"{text}.yaml").read_text()
    path = Path(text)
    if not path.is_file():
        raise UserError(f"no built-in SCM or spec file named '{text}'; built-ins: "
                        f"{', '.join(builtin_names())}, or give a path to a .yaml/.json file")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read spec file {path}: {exc}") from None


def parse_spec(text: str, source: str = "spec") -> dict[str, Any]:
    """Parse YAML (a superset of JSON; numbers read by ``ident3d.causal.yamlnum``) into a spec mapping, with one-line
    errors."""
    try:
        spec = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(f"{source}: not valid YAML{where} ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(spec, Mapping):
        raise SpecError(f"{source}: a spec must be a mapping with 'nodes', got {type(spec).__name__}")
    return dict(spec)


def _spec(name_or_spec: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """The spec mapping; a static spec with a dynamic node key says to add ``dynamic: true``."""
    spec = dict(name_or_spec) if isinstance(name_or_spec, Mapping) else parse_spec(
        read_spec_text(name_or_spec), str(name_or_spec))
    nodes = spec.get("nodes")
    if not is_dynamic(spec) and isinstance(nodes, list):
        for raw in nodes:
            key = next((k for k in DYNAMIC_NODE_KEYS if isinstance(raw, Mapping) and k in raw), None)
            if key:
                raise SpecError(f"node '{raw.get('name')}': '{key}' is a key of dynamic specs; add 'dynamic: true' "
                                "at the top of the spec")
    return spec


def load_scm(name_or_spec: str | Path | Mapping[str, Any]) -> SCM:
    """An SCM from a built-in name (``3dident``, ``causal3dident``, ...), a spec file or a dict."""
    spec = _spec(name_or_spec)
    if is_dynamic(spec):
        raise SpecError(f"{spec.get('name', name_or_spec)} is a dynamic SCM (sequences, 'dynamic: true'), not a "
                        "static one; use causal.load_dynamic_scm(...).rollout(...)")
    return SCM(spec)


def load_dynamic_scm(name_or_spec: str | Path | Mapping[str, Any]) -> DynamicSCM:
    """A dynamic SCM from a built-in name (``temporal_causal3dident``), a spec file or a dict."""
    spec = _spec(name_or_spec)
    if not is_dynamic(spec):
        raise SpecError(f"{spec.get('name', name_or_spec)} is a static SCM; a dynamic one says 'dynamic: true' "
                        "(use causal.load_scm for static SCMs)")
    return DynamicSCM(spec)


def load_any(name_or_spec: str | Path | Mapping[str, Any]) -> SCM | DynamicSCM:
    """A static or a dynamic SCM, whichever the spec is (``dynamic: true`` marks a dynamic one)."""
    spec = _spec(name_or_spec)
    return DynamicSCM(spec) if is_dynamic(spec) else SCM(spec)
