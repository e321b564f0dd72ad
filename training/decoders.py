"""Decoders of paper 004's generative models: the mirror of the 28x28 MLP and a ResNet-style conv decoder
for 32/64 px, and the vector decoder for synthetic data. Which one mirrors an encoder is the encoder's answer
(``Encoder.mirror_decoder``, ``ident3d.training.encoder_base``); ``build_decoder`` asks it."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from ident3d.causal.errors import UserError


class MLPDecoder(nn.Module):
    """Z -> 2000 -> 500 -> 500 (ReLU) -> channels*H*W: the mirror of paper 004's 784-500-500-2000-Z encoder."""

    def __init__(self, z_dim: int, image_size: int, channels: int, hidden: Sequence[int] = (2000, 500, 500)):
        super().__init__()
        self.shape = (channels, image_size, image_size)
        sizes = [z_dim, *hidden]
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(sizes[-1], channels * image_size * image_size))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z).view(-1, *self.shape)


class VectorDecoder(nn.Module):
    """Z -> the mirrored hidden sizes (LeakyReLU) -> the observation vector: the mirror of the ``mlp`` encoder,
    for generative objectives on synthetic (vector) data."""

    def __init__(self, z_dim: int, sizes: Sequence[int]):
        super().__init__()
        out, *hidden = sizes
        dims = [z_dim, *reversed(hidden)]
        layers: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:], strict=True):
            layers += [nn.Linear(a, b), nn.LeakyReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(dims[-1], out))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


class UpBlock(nn.Module):
    """Residual up-sampling block: a stride-2 transposed 3x3 conv then a 3x3 conv, with an upsampled 1x1 shortcut."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.ConvTranspose2d(cin, cout, 3, 2, 1, output_padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(cin, cout, 1, bias=False),
                                  nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


class ConvDecoder(nn.Module):
    """Z -> Linear -> 256 x 4 x 4 -> residual up-sampling blocks (halving widths) -> 5x5 conv (paper 004, Table 4b).

    The number of blocks doubles 4 px up to the image size; a size that is not 4 * 2^k is reached by a final
    bilinear resize.
    """

    def __init__(self, z_dim: int, image_size: int, channels: int, width: int = 256, start: int = 4):
        super().__init__()
        n_up = max(1, round(torch.log2(torch.tensor(image_size / start)).item()))
        widths = [max(16, width // 2**i) for i in range(n_up + 1)]
        self.image_size, self.start, self.width = image_size, start, width
        self.fc = nn.Linear(z_dim, width * start * start)
        self.blocks = nn.Sequential(*(UpBlock(a, b) for a, b in zip(widths[:-1], widths[1:], strict=True)))
        self.out = nn.Conv2d(widths[-1], channels, 5, 1, 2)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.out(self.blocks(self.fc(z).view(-1, self.width, self.start, self.start)))
        if x.shape[-1] != self.image_size:
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False)
        return x


def no_decoder_error(encoder: nn.Module) -> UserError:
    """The one-line error for an encoder that cannot be mirrored (it records no image size, or is no Encoder)."""
    # getattr: a bare nn.Module (a test's stand-in encoder) has no registry name
    name = getattr(encoder, "registry_name", type(encoder).__name__)
    return UserError(f"encoder {name} does not record its image size, so no decoder can be built for it; use "
                     "--encoder mlp_vae (28 px), resnet_vae (32/64 px), cnn or resnet18 with the generative objectives")


def build_decoder(encoder: nn.Module, z_dim: int | None = None, width: int = 256) -> nn.Module:
    """The decoder mirroring ``encoder``, as the encoder gives it (``Encoder.mirror_decoder``).

    ``z_dim`` defaults to the encoder's output size; ``width`` is the conv decoder's first width (paper: 256).
    An encoder that cannot be mirrored (the objective never sees the store) raises a one-line UserError naming
    the ones that can.
    """
    # getattr, not isinstance(Encoder): any nn.Module may reach an objective (tests pass bare modules), and this
    # module sits below training.encoder_base, whose encoders build the decoder classes above
    mirror = getattr(encoder, "mirror_decoder", None)
    if mirror is None:
        raise no_decoder_error(encoder)
    return mirror(int(z_dim or encoder.out_dim), width=width)
