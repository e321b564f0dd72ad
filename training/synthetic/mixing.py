"""Synthetic pairs (papers 000/001): latents from a causal SCM, their latent transformation, both
pushed through a frozen random invertible MLP (leaky ReLU 0.2, well-conditioned square layers).

Batch b is a pure function of (seed, b): fresh samples every step, as in the papers' synthetic runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import nn
from torch.utils.data import IterableDataset

from causal import SCM
from causal.rng import stream_key


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


class SyntheticPairs(IterableDataset):
    """Endless batches {x, x_view, latents, latents_view} from an SCM, a change set and a mixing."""

    def __init__(self, scm: SCM, change: str | Sequence[str], mixing: InvertibleMixing, batch_size: int,
                 seed: int = 0, start_batch: int = 0):
        super().__init__()
        self.scm, self.change, self.mixing = scm, scm.resolve(change), mixing
        self.batch_size, self.seed, self.start_batch = batch_size, seed, start_batch

    def batch(self, b: int) -> dict[str, torch.Tensor]:
        s = self.scm.sample(self.batch_size, seed=self.seed, start=b * self.batch_size)
        t = self.scm.transform(s, self.change, seed=stream_key(self.seed, "synthetic-pairs") % 2**31)
        z, zt = torch.from_numpy(s.latents), torch.from_numpy(t.latents)
        with torch.no_grad():
            return {"x": self.mixing(z), "x_view": self.mixing(zt), "latents": z, "latents_view": zt}

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        b = self.start_batch
        while True:
            yield self.batch(b)
            b += 1
