"""Self-supervised objectives, one module each; importing this package imports every module in it, which registers
its objective in OBJECTIVES (a new objective is one new file here)."""

import importlib
import pkgutil

from ident3d.training.objectives.base import Objective
from ident3d.training.registry import OBJECTIVES

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["OBJECTIVES", "Objective"]
