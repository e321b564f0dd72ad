"""Reconstructions from frozen representations: a decoder (paper 004's architecture for the image size)
trained with MSE on a discriminative model's features, so its reconstructions compare with a VAE's."""

from __future__ import annotations

import numpy as np
import torch

from ident3d.training.decoders import ConvDecoder, MLPDecoder


def make_decoder(z_dim: int, image_size: int, channels: int) -> torch.nn.Module:
    """Paper 004's decoder for the size: the MLP mirror for 28 px and smaller, the conv decoder above."""
    if image_size <= 28:
        return MLPDecoder(z_dim, image_size, channels)
    return ConvDecoder(z_dim, image_size, channels)


def fit_decoder(z: np.ndarray, x: np.ndarray, epochs: int = 30, batch_size: int = 128, lr: float = 1e-3,
                seed: int = 0) -> torch.nn.Module:
    """Train a decoder from frozen features z (N, Z) to images x (N, C, H, W) with MSE; returns it in eval mode."""
    torch.manual_seed(seed)
    zt, xt = torch.as_tensor(z, dtype=torch.float32), torch.as_tensor(x, dtype=torch.float32)
    dec = make_decoder(zt.shape[1], xt.shape[-1], xt.shape[1])
    opt = torch.optim.Adam(dec.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(zt), generator=g)
        for i in range(0, len(zt), batch_size):
            idx = order[i:i + batch_size]
            loss = (dec(zt[idx]) - xt[idx]).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return dec.eval()


@torch.no_grad()
def decode(decoder: torch.nn.Module, z: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """Decoder outputs for features z, as a numpy array (N, C, H, W)."""
    zt = torch.as_tensor(z, dtype=torch.float32)
    return torch.cat([decoder(zt[i:i + batch_size]) for i in range(0, len(zt), batch_size)]).numpy()
