"""The synthetic data-source interface: batch b of a synthetic experiment, generated on the training device.

A source is a pure function of (seed, b): ``batch(b)`` returns ``{"x0": (B, D), "x1": (B, D), ...,
"latents": (B, L)}`` with ``n_views`` observed views of the same anchors (x0 is the anchor), all on
``device``; ``eval_set(n, seed)`` returns held-out anchors ``(x (n, D), latents (n, L))`` for scoring, and
``eval_modalities(n, seed)`` the same anchors as each of its ``modalities`` observes them (one unless a source says
otherwise; evaluation scores each modality's encoding). No Python loop runs per sample and nothing goes through
the host per step.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from ident3d.causal.rng import stream_key
from ident3d.training.registry import Registry

# every synthetic source by its config name (``source: {kind: NAME}``); a module of training/synthetic registers
# its sources with ``@SOURCES.register("NAME")``, and ``make_source`` imports those modules before it looks one up
SOURCES = Registry("synthetic source", hint="docs/experiments.md")


class VectorSource:
    """Base class of synthetic sources (see the module docstring)."""

    n_views: ClassVar[int] = 2
    modalities: ClassVar[int] = 1  # observed modalities of an anchor, each scored on its own (paper 005: 2)
    obs_dim: int
    latent_names: list[str]
    latent_groups: dict[str, list[str]]  # e.g. {"content": [...], "style": [...]}; {} when not grouped

    def __init__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu"):
        self.batch_size, self.seed, self.device = batch_size, seed, torch.device(device)

    def generator(self, *key: Any) -> torch.Generator:
        """A generator on the source's device seeded from (seed, *key): the same draws for the same key."""
        return torch.Generator(device=self.device).manual_seed(stream_key(self.seed, *key) % 2**63)

    def batch(self, b: int) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def eval_set(self, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def eval_modalities(self, n: int, seed: int = 0) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Held-out anchors as each modality observes them, ([x_1, ...], latents (n, L)): ``eval_set``'s one by
        default."""
        x, z = self.eval_set(n, seed)
        return [x], z

    def describe(self) -> dict[str, Any]:
        """What the run's config.json and the table record about the data."""
        return {"source": type(self).__name__, "obs_dim": self.obs_dim, "latent_names": self.latent_names,
                "latent_groups": self.latent_groups}
