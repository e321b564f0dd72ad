"""Latent-transformation (LT) view makers: the second view is an image of transformed latents z~.

``lt_exact``: z~'s image was rendered exactly (``views/NAME`` in the store, ``ident3d render --views``).
``lt_nn``: the original Causal3DIdent method: z~ is drawn from the store's SCM and snapped to the
nearest stored image of the same class; the dataset does the search (``ident3d.training.data``) and this
maker only presents the pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ident3d.causal.errors import UserError
from ident3d.training.registry import VIEWS
from ident3d.training.views.base import Normalize, Style, ViewMaker, to_float

if TYPE_CHECKING:
    from ident3d.causal.scm import SCM
    from ident3d.training.data import StoreBatches
    from ident3d.training.objective_parts.base import Objective


@VIEWS.register("lt_exact")
class ExactLTViews(ViewMaker):
    """LT pairs rendered exactly: anchor and its stored counterpart views/NAME (use lt_exact:NAME)."""

    arg = "view"

    def __init__(self, normalize: Normalize, view: str | None = None, **options: Any):
        super().__init__(normalize, **options)
        if not view:
            raise UserError("lt_exact needs the name of a stored view, e.g. --views lt_exact:hues")
        self.view = view
        self.requires = (f"views/{view}/images",)

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        return [self.normalize(to_float(batch["images"])), self.normalize(to_float(batch[self.requires[0]]))]

    def style(self, scm: SCM, stored_views: Mapping[str, Sequence[str]],
              da_style: Mapping[str, Sequence[str]] | None = None) -> Style:
        """The stored view's change set (the latents it was rendered with changed); a view the store does not list
        is read as a change set of the SCM (view names are often change-set names)."""
        if self.view in stored_views:
            return Style(set(stored_views[self.view]))
        return Style(set(scm.resolve(self.view)) & set(scm.names))


@VIEWS.register("lt_nn")
class NearestNeighbourLTViews(ViewMaker):
    """LT pairs as in the original: z~ from the SCM, snapped to the nearest same-class image (lt_nn:CHANGE)."""

    requires = ("pair/images",)
    arg = "change"

    def __init__(self, normalize: Normalize, change: str | None = None, **options: Any):
        super().__init__(normalize, **options)
        if not change:
            raise UserError("lt_nn needs a change set, e.g. --views lt_nn:positions+hues")
        self.change = change

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        if "pair/snap" in batch:
            self.last_params = {"snap_distance": batch["pair/snap"]}
        return [self.normalize(to_float(batch["images"])), self.normalize(to_float(batch["pair/images"]))]

    def style(self, scm: SCM, stored_views: Mapping[str, Sequence[str]],
              da_style: Mapping[str, Sequence[str]] | None = None) -> Style:
        """The SCM's change set CHANGE: the latents z~ is drawn anew in."""
        return Style(set(scm.resolve(self.change)) & set(scm.names))

    def bind(self, dataset: StoreBatches, objective: Objective, seed: int) -> None:
        """Have the dataset draw each anchor's partner (z~ from the SCM, snapped to the nearest stored image)."""
        from ident3d.training.pairs import NearestNeighbourPairs

        dataset.pairing = NearestNeighbourPairs(dataset, self.change, seed)
