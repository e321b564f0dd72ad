"""Self-supervised objectives, one module each, and nothing else: every module here registers its objective in
OBJECTIVES, and importing this package imports every module in it (a new objective is one new file here). What they
are built from registers nothing and lives beside it: the bases and parts in ``ident3d.training.objective_parts``,
the loss functions in ``ident3d.training.losses`` (``tests/test_layout_objectives.py`` holds the folder to this)."""

import importlib
import pkgutil

from ident3d.training.objective_parts.base import Objective
from ident3d.training.objective_parts.momentum import MomentumObjective
from ident3d.training.registry import OBJECTIVES

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["OBJECTIVES", "MomentumObjective", "Objective"]
