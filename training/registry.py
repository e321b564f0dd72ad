"""Name -> class registries for objectives, view makers and encoders (solo-learn style).

Each registered class has a one-line docstring; ``ident3d train --list`` prints them. A registry whose entries take
settings (``--hp`` for objectives, ``--encoder-arg`` for encoders) makes each registered class check the arguments
its signature declares on construction (``ident3d.training.hparams``). The registry itself is
``ident3d.causal.registry.Registry``, the one style of every extension point; this one adds the settings.
"""

from __future__ import annotations

from ident3d.causal.registry import Registry as NamedRegistry

FIXED_ARGS = frozenset({"encoder", "out_dim", "constraint", "image_size"})  # filled in by the trainer, not the user


class Registry(NamedRegistry):
    """A named collection of classes registered with ``@REGISTRY.register("name")``, whose entries may take
    settings (``word``: what one is called, "hyperparameter"; None: no settings) checked on construction."""

    def __init__(self, kind: str, word: str | None = None, hint: str = "ident3d train --list", *, sort: bool = True):
        super().__init__(kind, hint, sort=sort)
        self.word = word

    def added(self, name: str, cls: type) -> None:
        """Make a class that takes settings check them on construction (one line naming a bad one)."""
        if self.word is not None:
            from ident3d.training.hparams import checked_init

            checked_init(cls, lambda obj: f"{self.kind} {type(obj).registry_name}", self.word, FIXED_ARGS)

    def settings(self, name: str) -> str:
        """The declared settings of entry ``name`` in words ('' when it takes none): what ``--list`` shows."""
        from ident3d.training.hparams import describe

        return describe(self.get(name), FIXED_ARGS) if self.word else ""


OBJECTIVES = Registry("objective", "hyperparameter")
VIEWS = Registry("view maker")
ENCODERS = Registry("encoder", "option")
