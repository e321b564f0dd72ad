"""The view maker of image/text pairs: each anchor image with its own caption, as token ids (the objective's
vocabulary), for the image/text objectives (``multimodal_infonce``, ``clip``; Daunhawer et al., ICLR 2023)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

from ident3d.causal.errors import UserError
from ident3d.training.registry import VIEWS
from ident3d.training.views.base import ViewMaker, to_float

if TYPE_CHECKING:
    from ident3d.training.data import StoreBatches
    from ident3d.training.objective_parts.base import Objective


@VIEWS.register("image_text")
class ImageText(ViewMaker):
    """[normalised images, caption token ids (B, max_len)]: image i and caption i are a positive pair, every other
    image and caption of the batch a negative; nothing is augmented (the two mechanisms are the views)."""

    requires: ClassVar[tuple[str, ...]] = ("images", "text")
    data_needs: ClassVar[frozenset[str]] = frozenset({"text"})
    changes = ()  # two mechanisms of the same latents: which latents a caption states is the store's caption spec

    def bind(self, dataset: StoreBatches, objective: Objective, seed: int) -> None:
        """Tokenise each batch's captions with the objective's vocabulary (in the loader, before tensors)."""
        tokens = getattr(objective, "tokens", None)
        if tokens is None:
            raise UserError(f"--views image_text pairs images with captions; objective "
                            f"{getattr(objective, 'registry_name', type(objective).__name__)} has no text encoder "
                            "(use multimodal_infonce or clip)")
        dataset.tokenize = tokens

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        return [self.normalize(to_float(batch["images"])), batch["tokens"]]
