"""Latent-transformation (LT) view makers: the second view is an image of transformed latents z~.

``lt_exact``: z~'s image was rendered exactly (``views/NAME`` in the store, ``ident3d render --views``).
``lt_nn``: the original Causal3DIdent method: z~ is drawn from the store's SCM and snapped to the
nearest stored image of the same class; the dataset does the search (``training.data``) and this
maker only presents the pair.
"""

from __future__ import annotations

from typing import Any

import torch

from causal.errors import UserError
from training.registry import VIEWS
from training.views.base import Normalize, ViewMaker, to_float


@VIEWS.register("lt_exact")
class ExactLTViews(ViewMaker):
    """LT pairs rendered exactly: anchor and its stored counterpart views/NAME (use lt_exact:NAME)."""

    def __init__(self, normalize: Normalize, view: str | None = None, **options: Any):
        super().__init__(normalize, **options)
        if not view:
            raise UserError("lt_exact needs the name of a stored view, e.g. --views lt_exact:hues")
        self.view = view
        self.requires = (f"views/{view}/images",)

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        return [self.normalize(to_float(batch["images"])), self.normalize(to_float(batch[self.requires[0]]))]


@VIEWS.register("lt_nn")
class NearestNeighbourLTViews(ViewMaker):
    """LT pairs as in the original: z~ from the SCM, snapped to the nearest same-class image (lt_nn:CHANGE)."""

    requires = ("pair/images",)

    def __init__(self, normalize: Normalize, change: str | None = None, **options: Any):
        super().__init__(normalize, **options)
        if not change:
            raise UserError("lt_nn needs a change set, e.g. --views lt_nn:positions+hues")
        self.change = change

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        if "pair/snap" in batch:
            self.last_params = {"snap_distance": batch["pair/snap"]}
        return [self.normalize(to_float(batch["images"])), self.normalize(to_float(batch["pair/images"]))]
