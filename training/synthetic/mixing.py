"""Paper 001's mixing: a frozen random invertible MLP (leaky ReLU 0.2, well-conditioned square layers), with its
exact inverse."""

from __future__ import annotations

import torch
from torch import nn


class InvertibleMixing(nn.Module):
    """x = g(z): square linear layers with singular values in [0.5, 1.5] and leaky ReLU 0.2 between them."""

    def __init__(self, dim: int, layers: int = 3, seed: int = 0, slope: float = 0.2):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.slope = slope
        mats = []
        for _ in range(layers):
            q1, _ = torch.linalg.qr(torch.randn(dim, dim, generator=gen))
            q2, _ = torch.linalg.qr(torch.randn(dim, dim, generator=gen))
            s = 0.5 + torch.rand(dim, generator=gen)
            mats.append(q1 @ torch.diag(s) @ q2)
        self.register_buffer("weights", torch.stack(mats))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = z
        for i, w in enumerate(self.weights):
            x = x @ w.T
            if i < len(self.weights) - 1:
                x = nn.functional.leaky_relu(x, self.slope)
        return x

    def inverse(self, x: torch.Tensor) -> torch.Tensor:
        z = x
        for i in reversed(range(len(self.weights))):
            if i < len(self.weights) - 1:
                z = torch.where(z >= 0, z, z / self.slope)
            z = torch.linalg.solve(self.weights[i], z.T).T
        return z
