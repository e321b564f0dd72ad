"""Encoders of paper 004's generative models, registered in ENCODERS: the MLP for 28x28 images and the
ResNet-style conv net for 32/64 px. Both record ``image_size`` and ``channels``, from which each gives its mirror
decoder (``mirror_decoder``: the MLP's reversed, the conv decoder for the ResNet)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from ident3d.causal.errors import UserError
from ident3d.training.decoders import MLPDecoder
from ident3d.training.encoder_base import Encoder
from ident3d.training.hparams import Counts
from ident3d.training.registry import ENCODERS


def to_channels(x: torch.Tensor, channels: int) -> torch.Tensor:
    """(B, 3, H, W) -> (B, channels, H, W): the channel mean for 1 (grey data stored as RGB), unchanged for 3."""
    return x.mean(dim=1, keepdim=True) if channels == 1 else x


Channels = Literal[1, 3]  # 1: grey (the channel mean of RGB images), 3: RGB


@ENCODERS.register("mlp_vae")
class MLPImageEncoder(Encoder):
    """Paper 004's MLP for 28x28: flatten -> 500 -> 500 -> 2000 (ReLU) -> Linear(out_dim); channels=1 reads grey."""

    def __init__(self, out_dim: int, constraint: str = "none", image_size: int = 28, channels: Channels = 3,
                 hidden: Counts = (500, 500, 2000)):
        super().__init__(out_dim, constraint)
        self.image_size, self.channels, self.hidden = image_size, channels, tuple(hidden)
        self.feature_dim = self.hidden[-1]
        sizes = [channels * image_size * image_size, *self.hidden]
        layers: list[nn.Module] = [nn.Flatten()]
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.body, self.fc = nn.Sequential(*layers), nn.Linear(sizes[-1], out_dim)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(to_channels(x, self.channels))

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc(h)

    def mirror_decoder(self, z_dim: int, width: int = 256) -> nn.Module:
        """The mirror MLP: Z -> the hidden sizes reversed -> channels x H x W (``width`` is unused)."""
        return MLPDecoder(z_dim, self.mirrored_image_size(), self.channels, hidden=tuple(reversed(self.hidden)))


class ResBlock(nn.Module):
    """Two 3x3 convs with BatchNorm and ReLU and a (strided 1x1 when the shape changes) shortcut."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Identity() if stride == 1 and cin == cout
                     else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


@ENCODERS.register("resnet_vae")
class ResNetImageEncoder(Encoder):
    """Paper 004's ResNet-style encoder for 32/64 px: conv 4x4 + pool, 4 residual stages (32-256) -> Linear."""

    def __init__(self, out_dim: int, constraint: str = "none", image_size: int = 64, channels: Channels = 3,
                 widths: Counts = (16, 32, 64, 128, 256)):
        super().__init__(out_dim, constraint)
        if image_size % 16:
            raise UserError(f"encoder resnet_vae needs an image size divisible by 16, got {image_size}")
        self.image_size, self.channels, self.widths = image_size, channels, tuple(widths)
        w = self.widths
        stages = [ResBlock(w[i], w[i + 1], 1 if i == 0 else 2) for i in range(len(w) - 1)]
        self.conv = nn.Sequential(
            nn.ZeroPad2d((1, 2, 1, 2)), nn.Conv2d(channels, w[0], 4, 1, bias=False), nn.BatchNorm2d(w[0]), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1), *stages, nn.Flatten())
        side = image_size // 2 // 2 ** (len(w) - 2)
        self.feature_dim = w[-1] * side * side
        self.fc = nn.Linear(self.feature_dim, out_dim)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(to_channels(x, self.channels))

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc(h)
