"""The additive autoencoder (Brady et al. 2023; Lachapelle et al. 2023): an encoder to n_slots latent blocks z_k and
a decoder that is a sum of per-slot decodings, x_hat = sum_k f(z_k), with one broadcast decoder f shared by the
slots (no masks, no softmax over slots); loss: pixel MSE."""

from __future__ import annotations

import torch
from torch import nn

from ident3d.training.hparams import Count
from ident3d.training.objective_parts.slot_base import SlotObjective
from ident3d.training.registry import OBJECTIVES
from ident3d.training.slot_decoder import SpatialBroadcastDecoder


@OBJECTIVES.register("additive_ae")
class AdditiveAE(SlotObjective):
    """Additive autoencoder (Brady et al. 2023, Lachapelle et al. 2023): x_hat = sum_k f(z_k), slots in fixed order.

    Hyperparameters:
        n_slots: latent blocks (default 5: up to 4 objects + the background).
        slot_dim: size of a block (default 16).
        pool: the encoder's feature map is average-pooled to pool x pool before the MLP (default 8).
        mlp_hidden: hidden width of the MLP from the pooled map to the n_slots * slot_dim latents (default 256).
        decoder_width: channels of the broadcast decoder's convs (default 32).
    A pixel's slot (``slot_masks``) is the slot whose decoding has the largest magnitude (L2 norm over RGB, in
    normalised units) there. Needs ``--encoder slot_cnn`` and the ``none`` view maker.
    """

    def __init__(self, encoder: nn.Module, *, n_slots: Count = 5, slot_dim: Count = 16, pool: Count = 8,
                 mlp_hidden: Count = 256, decoder_width: Count = 32):
        super().__init__(encoder, n_slots, slot_dim)
        self.to_latents = nn.Sequential(
            nn.AdaptiveAvgPool2d(pool), nn.Flatten(), nn.Linear(encoder.width * pool * pool, mlp_hidden), nn.ReLU(),
            nn.Linear(mlp_hidden, n_slots * slot_dim))
        self.decoder = SpatialBroadcastDecoder(slot_dim, 3, encoder.image_size, width=decoder_width)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(latents (B, K, D), the encoder's pooled features (B, width))."""
        grid = self.encoder.token_grid(x)
        return self.to_latents(grid).view(-1, self.n_slots, self.slot_dim), grid.mean(dim=(2, 3))

    def decode_slots(self, z: torch.Tensor) -> torch.Tensor:
        """(B, K, 3, H, W): f(z_k) for every slot, each decoded alone."""
        return self.decoder(z.flatten(0, 1)).unflatten(0, z.shape[:2])

    def decompose(self, x: torch.Tensor, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """The latents, their decodings' sum and each decoding's magnitude per pixel (nothing random here)."""
        z, features = self.encode(x)
        parts = self.decode_slots(z)
        return {"slots": z, "recon": parts.sum(dim=1), "masks": parts.norm(dim=2), "features": features}
