"""The Slot Attention autoencoder (Locatello et al. 2020): CNN features per position -> Slot Attention -> each slot
decoded by a spatial broadcast decoder to RGB and an alpha logit; the alphas are softmaxed over the slots and the
reconstruction is sum_k alpha_k * rgb_k; loss: pixel MSE."""

from __future__ import annotations

import torch
from torch import nn

from ident3d.training.hparams import Count
from ident3d.training.objective_parts.slot_base import SlotObjective
from ident3d.training.registry import OBJECTIVES
from ident3d.training.slot_attention import SlotAttention
from ident3d.training.slot_decoder import SpatialBroadcastDecoder


@OBJECTIVES.register("slot_attention")
class SlotAttentionAE(SlotObjective):
    """Slot Attention autoencoder (Locatello et al. 2020): slots by iterative attention, alpha-composited decoding.

    Hyperparameters:
        n_slots: slots per image (default 5: up to 4 objects + the background).
        slot_dim: size of a slot (default 16).
        iterations: Slot Attention rounds (default 3, the paper's).
        mlp_hidden: hidden width of the slot update MLP (default 128, the paper's).
        decoder_width: channels of the broadcast decoder's convs (default 32, the paper's at 64 px).
    Needs ``--encoder slot_cnn`` (its ``width`` and ``strides`` set the CNN) and the ``none`` view maker.
    """

    def __init__(self, encoder: nn.Module, *, n_slots: Count = 5, slot_dim: Count = 16, iterations: Count = 3,
                 mlp_hidden: Count = 128, decoder_width: Count = 32):
        super().__init__(encoder, n_slots, slot_dim)
        self.slot_attention = SlotAttention(encoder.width, n_slots, slot_dim, iterations, mlp_hidden)
        self.decoder = SpatialBroadcastDecoder(slot_dim, 4, encoder.image_size, width=decoder_width)

    def decompose(self, x: torch.Tensor, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """Slots, their alpha masks (softmax over the slots) and the composite sum_k alpha_k * rgb_k."""
        tokens = self.encoder.tokens(x)
        slots, _ = self.slot_attention(tokens, generator=generator)
        out = self.decoder(slots.flatten(0, 1)).unflatten(0, slots.shape[:2])  # (B, K, 4, H, W)
        rgb, alphas = out[:, :, :3], torch.softmax(out[:, :, 3], dim=1)
        return {"slots": slots, "recon": (alphas.unsqueeze(2) * rgb).sum(dim=1), "masks": alphas,
                "features": tokens.mean(dim=1)}
