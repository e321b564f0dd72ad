"""The spatial broadcast decoder of Slot Attention (Locatello et al. 2020; Watters et al. 2019): each slot is decoded
on its own, so the decoder never mixes slots; the objectives combine the per-slot outputs (alpha compositing in
``slot_attention``, a plain sum in ``additive_ae``)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ident3d.training.slot_encoder import SoftPositionEmbed


class SpatialBroadcastDecoder(nn.Module):
    """(M, slot_dim) -> (M, out_channels, image_size, image_size): broadcast to start x start + position embedding,
    5x5 stride-2 transposed convs (ReLU) up to the image size, a 5x5 conv (ReLU), a 3x3 conv to the outputs."""

    def __init__(self, slot_dim: int, out_channels: int, image_size: int, width: int = 32, start: int = 8):
        super().__init__()
        self.start, self.image_size = start, image_size
        n_up = max(0, round(math.log2(max(image_size, 1) / start)))
        self.position = SoftPositionEmbed(slot_dim, start, start)
        layers: list[nn.Module] = []
        for i in range(n_up):
            layers += [nn.ConvTranspose2d(slot_dim if i == 0 else width, width, 5, stride=2, padding=2,
                                          output_padding=1), nn.ReLU()]
        layers += [nn.Conv2d(width if n_up else slot_dim, width, 5, padding=2), nn.ReLU(),
                   nn.Conv2d(width, out_channels, 3, padding=1)]
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Decode each row of ``z`` alone (rows never mix); a size that is not start * 2^k is reached by a final
        bilinear resize."""
        x = self.net(self.position(z[:, :, None, None].expand(-1, -1, self.start, self.start)))
        if x.shape[-1] != self.image_size:
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False)
        return x
