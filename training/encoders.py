"""Encoders, registered by name: ResNet-18 with the papers' head, small CNNs (paper 002's for crops) and an MLP.

Every encoder maps its input to (B, out_dim) through ``features`` (the inner representation the
papers also score, e.g. ResNet-18's 100-d output) and ``head``, then applies an output
constraint: none, the unit sphere, or the box (0, 1) via a sigmoid.
"""

from __future__ import annotations

import torch
import torchvision
from torch import nn

from ident3d.causal.errors import UserError
from ident3d.training.decoders import VectorDecoder
from ident3d.training.encoder_base import Encoder
from ident3d.training.hparams import Count, Counts
from ident3d.training.registry import ENCODERS


class _PaperHead(nn.Module):
    """LeakyReLU -> Linear(hidden, out_dim): the head of papers 000/001 on top of the backbone."""

    def __init__(self, hidden: int, out_dim: int):
        super().__init__()
        self.act, self.fc = nn.LeakyReLU(), nn.Linear(hidden, out_dim)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc(self.act(h))


@ENCODERS.register("resnet18")
class ResNet18(Encoder):
    """torchvision ResNet-18 (random init) -> hidden (100) -> LeakyReLU -> Linear(out_dim); small-image stem < 96 px."""

    def __init__(self, out_dim: int, constraint: str = "none", hidden: Count = 100, image_size: int = 224):
        super().__init__(out_dim, constraint)
        self.image_size, self.channels, self.feature_dim = image_size, 3, hidden
        net = torchvision.models.resnet18(weights=None, num_classes=hidden)
        if image_size < 96:  # CIFAR-style stem: keep resolution for small images
            net.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
            net.maxpool = nn.Identity()
        self.backbone, self._head = net, _PaperHead(hidden, out_dim)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return self._head(h)


@ENCODERS.register("cnn")
class SmallCNN(Encoder):
    """4 conv blocks (32-64-128-256, stride 2) + global pool -> hidden -> LeakyReLU -> Linear(out_dim); fast on CPU."""

    def __init__(self, out_dim: int, constraint: str = "none", hidden: Count = 100, width: Count = 32,
                 image_size: int = 64):
        super().__init__(out_dim, constraint)
        self.image_size, self.channels, self.feature_dim = image_size, 3, hidden
        chans, layers = [3, width, 2 * width, 4 * width, 8 * width], []
        for cin, cout in zip(chans[:-1], chans[1:], strict=True):
            layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1), nn.BatchNorm2d(cout), nn.LeakyReLU()]
        self.conv = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(chans[-1], hidden))
        self._head = _PaperHead(hidden, out_dim)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return self._head(h)


@ENCODERS.register("tac_cnn")
class TacCNN(Encoder):
    """Paper 002's encoder for crops: f = 3 conv layers (32-64-64) -> 5x5 pool -> Linear(hidden), then a head g.

    f: the last two convolutions have stride 2, hidden is 200-d; the projection head g is a 2-layer MLP,
    Linear(hidden) - ReLU - Linear(out_dim) (50-d in the paper)."""

    def __init__(self, out_dim: int, constraint: str = "none", hidden: Count = 200, image_size: int = 84):
        super().__init__(out_dim, constraint)
        self.image_size, self.channels, self.feature_dim = image_size, 3, hidden
        self.conv = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(5), nn.Flatten(),
            nn.Linear(64 * 25, hidden))
        self._head = nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return self._head(h)


@ENCODERS.register("mlp")
class MLP(Encoder):
    """MLP for latent vectors: in -> hidden... -> out with LeakyReLU (paper 001: n-10n-50n-50n-50n-50n-10n-n)."""

    input_kind = "vector"

    def __init__(self, out_dim: int, constraint: str = "none", in_dim: Count = 10, hidden: Counts | None = None,
                 image_size: int = 0):
        super().__init__(out_dim, constraint)
        sizes = [in_dim, *(hidden or [10 * in_dim, 50 * in_dim, 50 * in_dim, 50 * in_dim, 50 * in_dim, 10 * in_dim])]
        self.sizes, self.feature_dim = sizes, sizes[-1]  # sizes: what the mirror decoder reverses
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            layers += [nn.Linear(a, b), nn.LeakyReLU()]
        self.body, self.fc = nn.Sequential(*layers), nn.Linear(sizes[-1], out_dim)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc(h)

    def mirror_decoder(self, z_dim: int, width: int = 256) -> nn.Module:
        """The vector decoder through the hidden sizes reversed, back to the input (``width`` is unused)."""
        return VectorDecoder(z_dim, self.sizes)


def build_encoder(name: str, out_dim: int, image_size: int, constraint: str = "none", **options: object) -> Encoder:
    """An encoder by registered name (see ``ident3d train --list``)."""
    cls = ENCODERS.get(name)
    try:
        return cls(out_dim=out_dim, constraint=constraint, image_size=image_size, **options)
    except TypeError as exc:
        raise UserError(f"encoder {name}: {exc}") from None


from ident3d.training import flows, gen_encoders, slot_encoder  # noqa: E402,F401  (gin, mlp_vae, resnet_vae, slot_cnn)
