"""The view maker of CRL-TAC (paper 002): the crops are picked inside the objective by its trainable channel
P(T|X), so this maker hands over the whole normalised images and the uniform draws the objective samples crops
with (from the trainer's seeded generator: a run is reproducible and resumes exactly).

Its style is the crops' (``changes``): a crop picks which part of the scene fills the frame, so it changes where
things are in the image (positions), not their colours or orientation; paper 000 maps crops to positions too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch

from ident3d.training.registry import VIEWS
from ident3d.training.views.base import Normalize, ViewMaker, to_float

if TYPE_CHECKING:
    from ident3d.training.data import StoreBatches
    from ident3d.training.objective_parts.base import Objective


@VIEWS.register("learned_crop")
class LearnedCrop(ViewMaker):
    """[whole images (B, 3, H, W), uniforms (B, draws)] for ``--objective crl_tac``, which owns the channel."""

    objective: ClassVar[str] = "crl_tac"
    changes = ("positions",)  # the objective's crops

    def __init__(self, normalize: Normalize, draws: int = 16, **options: Any):
        super().__init__(normalize, **options)
        self.draws = draws  # set to the objective's draws_per_image by ``bind``

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        x = self.normalize(to_float(batch["images"]))
        u = torch.rand(x.shape[0], self.draws, generator=generator).to(x.device)
        return [x, u]

    def bind(self, dataset: StoreBatches, objective: Objective, seed: int) -> None:
        """Hand over as many uniforms per image as the objective samples crops with, and tell it the statistics
        the images are standardised with (crl_tac's input_format gray01 undoes them)."""
        self.draws = objective.draws_per_image
        set_input = getattr(objective, "set_input_normalisation", None)
        if set_input is not None:
            set_input(list(self.normalize.mean), list(self.normalize.std))
