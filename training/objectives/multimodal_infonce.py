"""Daunhawer et al.'s image/text InfoNCE (ICLR 2023, Multimodal3DIdent): NT-Xent over all 2B encodings of B pairs."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ident3d.training.hparams import Count, Positive
from ident3d.training.losses.functional import global_two_views
from ident3d.training.losses.multimodal import pair_similarity, two_modality_infonce
from ident3d.training.objective_parts.image_text import ImageTextObjective, Side
from ident3d.training.registry import OBJECTIVES


@OBJECTIVES.register("multimodal_infonce")
class MultimodalInfoNCE(ImageTextObjective):
    """Image/text InfoNCE (Daunhawer et al. 2023): cosine similarity / tau over all 2B encodings, same-modality
    negatives included.

    Hyperparameters:
        tau: fixed temperature dividing the cosine similarities (default 1.0, the paper's).
        text_embed, text_width: the text encoder's token embedding width (128) and first convolution's channels (25).
        vocabulary, max_len: filled in from the training captions when a run is built (``caption_args``).
    Views: [images, token ids] (``--views image_text``); under DDP the negatives are the whole global batch.
    """

    def __init__(self, encoder: nn.Module, *, tau: Positive = 1.0, vocabulary: dict[str, Any] | None = None,
                 max_len: Side | None = None, text_embed: Side = 128, text_width: Count = 25):
        super().__init__(encoder, vocabulary=vocabulary, max_len=max_len, text_embed=text_embed,
                         text_width=text_width)
        self.tau = float(tau)

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """InfoNCE of the (globally gathered) image and text encodings; logs the pairs' cosine similarity."""
        z_image, z_text = global_two_views(embeddings)
        return {"loss": two_modality_infonce(z_image, z_text, self.tau),
                "pos_sim": pair_similarity(z_image, z_text).detach()}
