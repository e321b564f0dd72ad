"""CLIP's image/text objective (Radford et al. 2021): symmetric cross-entropy of the B x B cross-modal logits."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ident3d.training.hparams import Count, Positive
from ident3d.training.losses.functional import global_two_views
from ident3d.training.losses.multimodal import clip_loss, pair_similarity
from ident3d.training.objective_parts.image_text import ImageTextObjective, Side
from ident3d.training.registry import OBJECTIVES

MAX_SCALE = 100.0  # CLIP's bound on exp(t), the inverse temperature


@OBJECTIVES.register("clip")
class CLIP(ImageTextObjective):
    """CLIP: logits exp(t) cos(image_i, text_j) over the B x B pairs, cross-entropy both ways, t learned, exp(t) <= 100.

    Hyperparameters:
        tau_init: the initial temperature, exp(-t) at the start (default 0.07, CLIP's).
        text_embed, text_width: the text encoder's token embedding width (128) and first convolution's channels (25).
        vocabulary, max_len: filled in from the training captions when a run is built (``caption_args``).
    Views: [images, token ids] (``--views image_text``); under DDP the logits span the whole global batch. After each
    step t is clamped to at most log 100, so its gradient can bring it back down.
    """

    def __init__(self, encoder: nn.Module, *, tau_init: Positive = 0.07, vocabulary: dict[str, Any] | None = None,
                 max_len: Side | None = None, text_embed: Side = 128, text_width: Count = 25):
        super().__init__(encoder, vocabulary=vocabulary, max_len=max_len, text_embed=text_embed,
                         text_width=text_width)
        self.log_scale = nn.Parameter(torch.tensor(math.log(1.0 / tau_init)))

    def scale(self) -> torch.Tensor:
        """exp(t), clamped at ``MAX_SCALE``."""
        return self.log_scale.exp().clamp(max=MAX_SCALE)

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """CLIP's loss of the (globally gathered) image and text encodings; logs the pairs' cosine similarity and
        exp(t)."""
        z_image, z_text = global_two_views(embeddings)
        scale = self.scale()
        return {"loss": clip_loss(z_image, z_text, scale), "pos_sim": pair_similarity(z_image, z_text).detach(),
                "scale": scale.detach()}

    @torch.no_grad()
    def after_step(self, step: int, total_steps: int) -> None:
        """Clamp t to at most log ``MAX_SCALE`` (as CLIP does after each update)."""
        self.log_scale.clamp_(max=math.log(MAX_SCALE))
