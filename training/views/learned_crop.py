"""The view maker of CRL-TAC (paper 002): the crops are picked inside the objective by its trainable channel
P(T|X), so this maker hands over the whole normalised images and the uniform draws the objective samples crops
with (from the trainer's seeded generator: a run is reproducible and resumes exactly)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from training.registry import VIEWS
from training.views.base import Normalize, ViewMaker, to_float


@VIEWS.register("learned_crop")
class LearnedCrop(ViewMaker):
    """[whole images (B, 3, H, W), uniforms (B, draws)] for ``--objective crl_tac``, which owns the channel."""

    objective: ClassVar[str] = "crl_tac"

    def __init__(self, normalize: Normalize, draws: int = 16, **options: Any):
        super().__init__(normalize, **options)
        self.draws = draws  # set to the objective's draws_per_image when a run is built

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        x = self.normalize(to_float(batch["images"]))
        u = torch.rand(x.shape[0], self.draws, generator=generator).to(x.device)
        return [x, u]
