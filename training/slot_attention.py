"""Slot Attention (Locatello et al. 2020, Algorithm 1): ``n_slots`` slots compete for N input features through an
attention softmax over the slots, then each slot is updated from the weighted mean of the inputs it won.

One iteration, with inputs already LayerNorm-ed and projected to keys k and values v (N x D each):

    q = W_q LayerNorm(slots)                               (K x D)
    attn = softmax over the K slots of (k q^T / sqrt(D))    (N x K)
    w = (attn + eps) / sum over the N inputs of (attn + eps)
    updates = w^T v                                         (K x D)
    slots = GRU(input=updates, state=previous slots)
    slots = slots + MLP(LayerNorm(slots))

The initial slots are drawn from a learned Gaussian N(mu, diag(sigma^2)), shared by all slots, so the slots are
exchangeable: permuting the initial slots permutes the output slots and their attention.
"""

from __future__ import annotations

import math

import torch
from torch import nn

EPSILON = 1e-8  # added to the attention before the weighted mean over inputs (the paper's value)


class SlotAttention(nn.Module):
    """Slot Attention over (B, N, in_dim) features: (B, n_slots, slot_dim) slots after ``iterations`` rounds."""

    def __init__(self, in_dim: int, n_slots: int, slot_dim: int, iterations: int = 3, mlp_hidden: int = 128,
                 eps: float = EPSILON):
        super().__init__()
        self.n_slots, self.slot_dim, self.iterations, self.eps = n_slots, slot_dim, iterations, eps
        self.norm_inputs, self.norm_slots, self.norm_mlp = (nn.LayerNorm(in_dim), nn.LayerNorm(slot_dim),
                                                            nn.LayerNorm(slot_dim))
        self.to_q = nn.Linear(slot_dim, slot_dim, bias=False)
        self.to_k = nn.Linear(in_dim, slot_dim, bias=False)
        self.to_v = nn.Linear(in_dim, slot_dim, bias=False)
        self.gru = nn.GRUCell(slot_dim, slot_dim)
        self.mlp = nn.Sequential(nn.Linear(slot_dim, mlp_hidden), nn.ReLU(), nn.Linear(mlp_hidden, slot_dim))
        self.mu = nn.Parameter(torch.empty(1, 1, slot_dim))
        self.log_sigma = nn.Parameter(torch.empty(1, 1, slot_dim))
        nn.init.xavier_uniform_(self.mu)
        nn.init.xavier_uniform_(self.log_sigma)

    def initial_slots(self, batch: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """(batch, n_slots, slot_dim) draws mu + sigma * noise; ``generator`` (a CPU one) makes them reproducible."""
        noise = torch.randn(batch, self.n_slots, self.slot_dim, generator=generator)
        return self.mu + self.log_sigma.exp() * noise.to(self.mu.device, self.mu.dtype)

    def forward(self, inputs: torch.Tensor, slots: torch.Tensor | None = None,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(slots (B, K, D), attention (B, N, K) of the last iteration) from inputs (B, N, in_dim); ``slots``: the
        initial slots (B, K, D), drawn from the learned Gaussian when None."""
        if slots is None:
            slots = self.initial_slots(inputs.shape[0], generator)
        inputs = self.norm_inputs(inputs)
        k, v = self.to_k(inputs), self.to_v(inputs)
        attn = inputs.new_zeros(inputs.shape[0], inputs.shape[1], slots.shape[1])
        for _ in range(self.iterations):
            slots, attn = self.step(slots, k, v)
        return slots, attn

    def step(self, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One iteration of Algorithm 1 from slots (B, K, D), keys and values (B, N, D): (new slots, attention)."""
        b, n_slots, d = slots.shape
        q = self.to_q(self.norm_slots(slots))
        attn = torch.softmax(torch.einsum("bnd,bkd->bnk", k, q) / math.sqrt(d), dim=-1)  # over the slots
        weights = attn + self.eps
        weights = weights / weights.sum(dim=1, keepdim=True)  # a weighted mean over the inputs
        updates = torch.einsum("bnk,bnd->bkd", weights, v)
        slots = self.gru(updates.reshape(b * n_slots, d), slots.reshape(b * n_slots, d)).view(b, n_slots, d)
        return slots + self.mlp(self.norm_mlp(slots)), attn
