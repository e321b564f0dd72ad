"""Base of the image/text objectives (Daunhawer et al., ICLR 2023; CLIP): the run's encoder encodes the images,
a text encoder the objective owns encodes the captions, and a loss compares the pairs.

Views are ``[images (B, 3, H, W), tokens (B, max_len) int64]`` (view maker ``image_text``, which tokenises a
batch's captions with ``tokens``): image i and caption i are a pair. The text encoder's width comes from the
captions: ``vocabulary`` (the training captions' ``ident3d.training.text.Vocabulary``, as its JSON record) and
``max_len`` are data arguments, filled in by ``caption_args`` when a run is built and saved with the run, so
evaluation tokenises other captions as training did. Evaluation encodes images (``representation``);
``text_representation`` encodes token ids, ``caption_representation`` captions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar

import torch
from torch import nn

from ident3d.training.hparams import Range
from ident3d.training.objective_parts.base import Objective
from ident3d.training.text import PAD, UNK, Vocabulary, longest
from ident3d.training.text_encoder import MIN_SIDE, TextEncoder

Side = Annotated[int, Range(ge=MIN_SIDE)]  # max_len and text_embed: the text encoder halves each three times


class ImageTextObjective(Objective):
    """Shared parts of multimodal_infonce and clip (not registered itself)."""

    n_views: ClassVar[int] = 2
    view_maker: ClassVar[str | None] = "image_text"
    data_args: ClassVar[tuple[str, ...]] = ("vocabulary", "max_len")

    def __init__(self, encoder: nn.Module, *, vocabulary: dict[str, Any] | None, max_len: int | None,
                 text_embed: int, text_width: int):
        super().__init__(encoder)
        # None: a stand-in (no words, the shortest length), as a config is checked before its store is read; a run
        # fills both in from its training captions (caption_args)
        self.vocabulary = Vocabulary.from_dict(vocabulary) if vocabulary is not None else Vocabulary((PAD, UNK))
        self.max_len = MIN_SIDE if max_len is None else int(max_len)
        self.text_encoder = TextEncoder(len(self.vocabulary), self.max_len, encoder.out_dim, embed_dim=text_embed,
                                        width=text_width)

    @staticmethod
    def caption_args(captions: Sequence[str]) -> dict[str, Any]:
        """The hyperparameters a run takes from its training captions: their vocabulary (its JSON record) and the
        padded length, ``max_len`` (the longest caption's tokens, ``ident3d.training.text.longest``, or
        ``MIN_SIDE`` if more)."""
        return {"vocabulary": Vocabulary.build(captions).to_dict(), "max_len": max(longest(captions), MIN_SIDE)}

    def tokens(self, captions: Sequence[str]) -> torch.Tensor:
        """(N, max_len) token ids of captions, with the training vocabulary (unknown words as ``<unk>``)."""
        return self.vocabulary.encode(list(captions), self.max_len)

    def caption_representation(self, captions: Sequence[str]) -> torch.Tensor:
        """The text encoder's output for captions (tokenised as in training), on the encoder's device."""
        device = next(self.text_encoder.parameters()).device
        return self.text_representation(self.tokens(captions).to(device))

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """``loss`` of [image encodings, text encodings] of the views [images, tokens]."""
        if len(views) != 2:
            raise ValueError(f"expected [images, tokens], got {len(views)} views")
        images, tokens = views
        return self.loss([self.encoder(images), self.text_encoder(tokens)])

    def text_representation(self, tokens: torch.Tensor) -> torch.Tensor:
        """The text encoder's output for (B, max_len) token ids."""
        return self.text_encoder(tokens)

    def modality_representation(self, x: torch.Tensor, modality: int) -> torch.Tensor:
        """Modality 0 (images) by the image encoder, modality 1 (token ids) by the text encoder."""
        if modality not in (0, 1):
            raise ValueError(f"an image/text objective has modalities 0 (images) and 1 (text), not {modality}")
        return self.text_representation(x) if modality else self.representation(x)
