"""Affine coupling flows for paper 003: a frozen random RealNVP (the synthetic mixing) and GIN, the
volume-preserving flow (Sorrenson et al. 2020) used as encoder, registered as the "gin" encoder.

A coupling block splits x into halves (a, b) and transforms both in turn, GLOW style:
b' = b * exp(s2(a)) + t2(a), then a' = a * exp(s1(b')) + t1(b'). Log-scales are soft-clamped to
(-clamp, clamp) with tanh so every block stays well conditioned. In GIN each half's log-scales are
centred per sample, so they sum to zero and the Jacobian determinant is exactly 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ident3d.causal.errors import UserError
from ident3d.training.encoder_base import Encoder
from ident3d.training.hparams import Count, Counts
from ident3d.training.registry import ENCODERS

GIN_HIDDEN = (10, 10)  # GIN's artificial-data subnetworks: two hidden layers of 10 ReLU units


def _subnet(c_in: int, c_out: int, hidden: Sequence[int]) -> nn.Sequential:
    """Fully connected ReLU net c_in -> hidden... -> c_out predicting [log-scale, shift]."""
    sizes, layers = [c_in, *hidden], []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(sizes[-1], c_out))


class AffineCoupling(nn.Module):
    """Both-halves affine coupling with tanh-clamped log-scales; volume-preserving when asked (GIN)."""

    def __init__(self, dim: int, hidden: Sequence[int], clamp: float = 2.0, volume_preserving: bool = False):
        super().__init__()
        if dim < 2:
            raise UserError(f"a coupling flow needs at least 2 dimensions, got {dim}")
        self.d1, self.d2 = dim // 2, dim - dim // 2
        self.clamp, self.volume_preserving = clamp, volume_preserving
        self.net2 = _subnet(self.d1, 2 * self.d2, hidden)  # conditions the second half on the first
        self.net1 = _subnet(self.d2, 2 * self.d1, hidden)  # conditions the first half on the new second

    def _scale_shift(self, net: nn.Module, cond: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-scale (clamped, centred if volume-preserving) and shift predicted from ``cond``."""
        raw_s, t = net(cond).chunk(2, dim=1)
        s = self.clamp * torch.tanh(raw_s / self.clamp)
        if self.volume_preserving:
            s = s - s.mean(dim=1, keepdim=True)
        return s, t

    def forward_with_log_det(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(y, log|det dy/dx| per sample)."""
        a, b = x[:, : self.d1], x[:, self.d1 :]
        s2, t2 = self._scale_shift(self.net2, a)
        b = b * torch.exp(s2) + t2
        s1, t1 = self._scale_shift(self.net1, b)
        a = a * torch.exp(s1) + t1
        return torch.cat([a, b], dim=1), s1.sum(dim=1) + s2.sum(dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_with_log_det(x)[0]

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """x with forward(x) = y, undoing the two half-steps in reverse order."""
        a, b = y[:, : self.d1], y[:, self.d1 :]
        s1, t1 = self._scale_shift(self.net1, b)
        a = (a - t1) * torch.exp(-s1)
        s2, t2 = self._scale_shift(self.net2, a)
        b = (b - t2) * torch.exp(-s2)
        return torch.cat([a, b], dim=1)


class GINCoupling(AffineCoupling):
    """Volume-preserving affine coupling (GIN): each half's log-scales are centred, so log|det J| = 0."""

    def __init__(self, dim: int, hidden: Sequence[int] = GIN_HIDDEN, clamp: float = 2.0):
        super().__init__(dim, hidden, clamp, volume_preserving=True)


class _CouplingStack(nn.Module):
    """Coupling blocks with a fixed permutation of the dimensions after each (stored as buffers)."""

    def __init__(self, blocks: list[AffineCoupling], perms: list[torch.Tensor]):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.register_buffer("perms", torch.stack(perms))
        self.register_buffer("unperms", torch.argsort(self.perms, dim=1))

    def forward_with_log_det(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(output, summed log|det J| per sample; permutations add nothing)."""
        log_det = x.new_zeros(x.shape[0])
        for block, perm in zip(self.blocks, self.perms, strict=True):
            x, ld = block.forward_with_log_det(x)
            x, log_det = x[:, perm], log_det + ld
        return x, log_det

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_with_log_det(x)[0]

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        for block, unperm in zip(reversed(self.blocks), reversed(self.unperms), strict=True):
            y = block.inverse(y[:, unperm])
        return y


class RealNVPMixing(_CouplingStack):
    """Frozen random RealNVP x = g(z) (paper 003's mixing): torch's default-scale random init, from ``seed``.

    Log-scales are bounded by ``clamp`` = 1 (GIN's code uses 2 for its mixing; at 2 some seeds amplify the
    latents a thousandfold and the inverse loses 1e-3; at 1 it stays within 1e-4).
    """

    def __init__(self, dim: int, blocks: int = 8, seed: int = 0, hidden: Sequence[int] = GIN_HIDDEN,
                 clamp: float = 1.0):
        gen = torch.Generator().manual_seed(seed)
        couplings = [AffineCoupling(dim, hidden, clamp) for _ in range(blocks)]
        with torch.no_grad():
            for block in couplings:
                for layer in block.modules():
                    if isinstance(layer, nn.Linear):  # U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as torch's default scale
                        bound = 1.0 / math.sqrt(layer.in_features)
                        layer.weight.copy_(torch.rand(layer.weight.shape, generator=gen) * 2 * bound - bound)
                        layer.bias.copy_(torch.rand(layer.bias.shape, generator=gen) * 2 * bound - bound)
        super().__init__(couplings, [torch.randperm(dim, generator=gen) for _ in range(blocks)])
        self.requires_grad_(False)


class GIN(_CouplingStack):
    """GIN: volume-preserving couplings with fixed random permutations; identity at init (zeroed last layers)."""

    def __init__(self, dim: int, blocks: int = 8, hidden: Sequence[int] = GIN_HIDDEN, clamp: float = 2.0):
        couplings = [GINCoupling(dim, hidden, clamp) for _ in range(blocks)]
        for block in couplings:
            for net in (block.net1, block.net2):
                nn.init.zeros_(net[-1].weight)
                nn.init.zeros_(net[-1].bias)
        super().__init__(couplings, [torch.randperm(dim) for _ in range(blocks)])

    def log_det(self, x: torch.Tensor) -> torch.Tensor:
        """log|det J| per sample: exactly 0 for a volume-preserving flow."""
        return x.new_zeros(x.shape[0])


@ENCODERS.register("gin")
class GINEncoder(Encoder):
    """GIN volume-preserving flow for vectors (paper 003): out_dim = in_dim, log|det J| = 0."""

    input_kind = "vector"

    def __init__(self, out_dim: int, constraint: str = "none", in_dim: Count = 10, blocks: Count = 8,
                 hidden: Counts = GIN_HIDDEN, image_size: int = 0):
        super().__init__(out_dim, constraint)
        if out_dim != in_dim:
            raise UserError(f"encoder gin is invertible: out_dim must equal in_dim ({in_dim}), got {out_dim}")
        if constraint != "none":
            raise UserError(f"encoder gin takes no output constraint (it would break volume preservation), "
                            f"got {constraint!r}")
        self.flow, self.feature_dim = GIN(in_dim, blocks, hidden), in_dim

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.flow(x)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return h

    def inverse(self, h: torch.Tensor) -> torch.Tensor:
        """x from its encoding (the flow's inverse)."""
        return self.flow.inverse(h)

    def log_det(self, x: torch.Tensor) -> torch.Tensor:
        """log|det J| of the encoder at x: zeros (volume-preserving)."""
        return self.flow.log_det(x)
