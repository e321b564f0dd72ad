"""Name -> class registries for objectives, view makers and encoders (solo-learn style).

Each registered class has a one-line docstring; ``ident3d train --list`` prints them. A registry whose entries take
settings (``--hp`` for objectives, ``--encoder-arg`` for encoders) makes each registered class check the arguments
its signature declares on construction (``ident3d.training.hparams``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ident3d.causal.errors import UserError

T = TypeVar("T")

FIXED_ARGS = frozenset({"encoder", "out_dim", "constraint", "image_size"})  # filled in by the trainer, not the user


class Registry:
    """A named collection of classes registered with ``@REGISTRY.register("name")``."""

    def __init__(self, kind: str, word: str | None = None, hint: str = "ident3d train --list"):
        self.kind, self.word = kind, word  # word: what one setting is called ("hyperparameter"), None: no settings
        self.hint = hint  # where a user sees the entries
        self._items: dict[str, type] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        def deco(cls: type[T]) -> type[T]:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = cls
            cls.registry_name = name  # type: ignore[attr-defined]
            if self.word is not None:
                from ident3d.training.hparams import checked_init

                checked_init(cls, lambda obj: f"{self.kind} {type(obj).registry_name}", self.word, FIXED_ARGS)
            return cls

        return deco

    def unregister(self, name: str) -> None:
        """Remove an entry (a test's own registration, undone when the test ends)."""
        del self._items[name]

    def get(self, name: str) -> type:
        if name not in self._items:
            raise UserError(f"unknown {self.kind} {name!r}; choose one of: {', '.join(sorted(self._items))} "
                            f"(see {self.hint})")
        return self._items[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def describe(self) -> list[tuple[str, str]]:
        """(name, the docstring's first paragraph on one line) for every entry: a summary that wraps onto a second
        line is shown whole, not cut mid-sentence."""
        return [(n, " ".join((self._items[n].__doc__ or "").strip().split("\n\n")[0].split())) for n in self.names()]

    def settings(self, name: str) -> str:
        """The declared settings of entry ``name`` in words ('' when it takes none): what ``--list`` shows."""
        from ident3d.training.hparams import describe

        return describe(self.get(name), FIXED_ARGS) if self.word else ""


OBJECTIVES = Registry("objective", "hyperparameter")
VIEWS = Registry("view maker")
ENCODERS = Registry("encoder", "option")
