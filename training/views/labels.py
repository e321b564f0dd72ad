"""The view maker of the supervised ceiling: the images, unaugmented, with the labels the objective regresses."""

from __future__ import annotations

from typing import ClassVar

import torch

from ident3d.training.registry import VIEWS
from ident3d.training.views.base import ViewMaker, to_float


def labels_of(batch: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """[latents (B, D), classes (B,)]; classes are zeros where the data has none (the objective then ignores them)."""
    latents = batch["latents"]
    classes = batch.get("classes")
    return [latents, classes if classes is not None else torch.zeros(latents.shape[0], dtype=torch.long,
                                                                     device=latents.device)]


@VIEWS.register("labels")
class Labels(ViewMaker):
    """[normalised images, latents, classes] for ``--objective supervised`` (no augmentation: the ceiling)."""

    n_views: ClassVar[int] = 3
    objective: ClassVar[str] = "supervised"
    changes = ()  # one unaugmented view: nothing is style (the ceiling is trained on every latent)

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        return [self.normalize(to_float(batch["images"])), *labels_of(batch)]
