"""Name -> class registries: the one style of every extension point (objectives, view makers, encoders, metrics,
synthetic sources, DA recipes, datasets, built-in meshes, mesh file formats).

An entry is a class registered with ``@REGISTRY.register("name")``; its docstring's first paragraph is its line in
a listing (:meth:`Registry.describe`), and :meth:`Registry.get` turns an unknown name into one line naming the
choices and where to see them. It lives in the lowest layer so that every package may keep one (``render`` and
``ingest`` sit below ``training``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from ident3d.causal.errors import UserError

T = TypeVar("T")


class Registry:
    """A named collection of classes registered with ``@REGISTRY.register("name")``; ``sort=False`` keeps them in
    registration order (names, listings and messages), for a list whose order means something."""

    def __init__(self, kind: str, hint: str, *, sort: bool = True):
        self.kind = kind  # what an entry is, in messages: "dataset", "DA recipe"
        self.hint = hint  # where a user sees the entries
        self.sort = sort
        self._items: dict[str, type] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """A class decorator that adds the class as ``name`` (and sets its ``registry_name``)."""

        def deco(cls: type[T]) -> type[T]:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            cls.registry_name = name  # type: ignore[attr-defined]
            self.added(name, cls)
            self._items[name] = cls
            return cls

        return deco

    def added(self, name: str, cls: type) -> None:
        """Called once per registration, before the entry is visible: a registry that builds more from its entries
        (settings checks, a view maker per DA recipe) overrides it; raising leaves the entry out."""

    def unregister(self, name: str) -> None:
        """Remove an entry (a test's own registration, undone when the test ends)."""
        del self._items[name]

    def get(self, name: str) -> type:
        """The class registered as ``name``, or one ``UserError`` line naming the choices."""
        if name not in self._items:
            raise UserError(f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names())} "
                            f"(see {self.hint})")
        return self._items[name]

    def names(self) -> list[str]:
        """Every entry's name: sorted, or in registration order (``sort=False``)."""
        return sorted(self._items) if self.sort else list(self._items)

    def items(self) -> list[tuple[str, type]]:
        """(name, class) of every entry, in :meth:`names` order."""
        return [(n, self._items[n]) for n in self.names()]

    def values(self) -> list[type]:
        """The class of every entry, in :meth:`names` order."""
        return [self._items[n] for n in self.names()]

    def describe(self) -> list[tuple[str, str]]:
        """(name, the docstring's first paragraph on one line) for every entry: a summary that wraps onto a second
        line is shown whole, not cut mid-sentence."""
        return [(n, summary(cls)) for n, cls in self.items()]

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def summary(cls: type) -> str:
    """A class docstring's first paragraph on one line ('' without a docstring)."""
    return " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
