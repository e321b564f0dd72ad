"""The experiment kinds, one module each: a kind is this folder's module of its name (``compare.py``,
``synthetic.py``, ``scaling.py``, ...), so a new kind is one new file here. ``ident3d experiment CONFIG`` runs a config
of any of them (its ``kind:`` key names the module) and every kind is also a subcommand of its name, both found here
without importing a kind before it is run.

A kind's module defines its config (frozen dataclasses, parsed by ``ident3d.training.hparams.parse``) and an
``ExperimentKind`` subclass named as the module, and these functions:

- ``load_config(path, overrides=(), missing=None)``: the config checked before any work (``missing``: a list that
  collects the data a dry run would need, for kinds that read data);
- ``plan(cfg, out)``: every cell as (row, seed, folder), what ``--dry-run`` lists;
- ``cell_settings_of(cfg)``: every cell as ``"ROW/seed_S"`` -> the settings it is keyed by (what ``cells`` claims);
- ``add_parser(sub)`` and ``run(args)``: the subcommand.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def names() -> list[str]:
    """The kinds: this folder's modules, none imported."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def module(name: str) -> ModuleType:
    """A kind's module (imported now)."""
    return importlib.import_module(f"{__name__}.{name}")
