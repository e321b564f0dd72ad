"""View makers: turn a batch of anchors into the views an objective compares (see ``ident3d.training.views.base``).

Importing this package imports every module in it, which registers its view makers in ``VIEWS`` (a new view maker is
one new file here, as a new objective is one file in ``ident3d.training.objectives``)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from ident3d.causal.errors import UserError
from ident3d.training.registry import VIEWS
from ident3d.training.views.augment import DA_RECIPES, DAViewMaker, parse_recipe
from ident3d.training.views.base import Normalize, Style, ViewMaker, to_float

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["Normalize", "Style", "ViewMaker", "make_view_maker", "to_float"]


def make_view_maker(spec: str, normalize: Normalize, **options: Any) -> ViewMaker:
    """Build a view maker from a registered name, a '+' combination of DA recipes (e.g. 'crop_large+colour'),
    or a maker with its argument, 'NAME:ARG' (the keyword its class declares in ``arg``: 'lt_exact:VIEW', a stored
    view, or 'lt_nn:CHANGE', a change set)."""
    name, sep, arg = spec.partition(":")
    if sep:
        cls = VIEWS.get(name) if name in VIEWS.names() else None
        if cls is None or cls.arg is None:
            raise UserError(f"view maker {name!r} takes no ':' argument; choose one of: {choices()}")
        return cls(normalize, **{cls.arg: arg}, **options)
    parts = [p.strip() for p in spec.split("+")]
    if len(parts) == 1 and parts[0] in VIEWS.names():
        return VIEWS.get(parts[0])(normalize, **options)
    names = [parse_recipe(p)[0] for p in parts]
    if (len(parts) > 1 or parts != names) and all(n in DA_RECIPES for n in names):  # a combination, or settings
        return DAViewMaker(normalize, recipes=parts, **options)
    bad = [p for p, n in zip(parts, names, strict=True) if n not in DA_RECIPES] if len(parts) > 1 else parts
    what = f"unknown view maker {spec!r}" if bad == parts else f"unknown DA recipe {bad[0]!r} in {spec!r}"
    raise UserError(f"{what}; choose one of: {choices()} (see ident3d train --list)")


def choices() -> str:
    """The view makers as a user writes them: plain names, the makers that take an argument with it, DA
    combinations."""
    named = [n if VIEWS.get(n).arg is None else f"{n}:{VIEWS.get(n).arg.upper()}" for n in VIEWS.names()]
    return (f"{', '.join(named)}, or DA recipes joined by '+', with settings in parentheses, e.g. "
            f"crop_large+colour(strength=0.5) (recipes: {', '.join(DA_RECIPES)})")
