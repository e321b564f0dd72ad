"""Pair sources of papers 001 and 000 (see ``ident3d.training.synthetic.base`` for the protocol).

``latent_pairs`` (paper 001): z uniform on the box or sphere, z~ from a normal / Laplace / vMF conditional,
both mixed by the same frozen invertible map. ``scm_pairs`` (paper 000 and any user SCM): z from a
``causal`` SCM, z~ by its latent transformation of a change set (content kept, each style latent changed
with probability p), mixed the same way. Sources are built by name from a config mapping with
``make_source``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from ident3d.causal.errors import UserError
from ident3d.causal.rng import stream_key
from ident3d.training.synthetic import spaces
from ident3d.training.synthetic.base import SOURCES, VectorSource
from ident3d.training.synthetic.mixing import InvertibleMixing

MIXINGS = ("mlp", "realnvp", "identity")


def make_mixing(kind: str, dim: int, seed: int, layers: int = 3) -> nn.Module:
    """The frozen mixing g by name: paper 001's invertible MLP, a random RealNVP (paper 003), or the identity."""
    if kind == "mlp":
        return InvertibleMixing(dim, layers=layers, seed=seed)
    if kind == "realnvp":
        from ident3d.training.flows import RealNVPMixing

        return RealNVPMixing(dim, seed=seed)
    if kind == "identity":
        return nn.Identity()
    raise UserError(f"unknown mixing {kind!r}; choose one of: {', '.join(MIXINGS)}")


class _MixedPairs(VectorSource):
    """Shared part: a frozen mixing on the device, applied to anchors and positives without gradients."""

    def __init__(self, batch_size: int, seed: int, device: torch.device | str, dim: int, mixing: str,
                 mixing_layers: int, mixing_seed: int | None):
        super().__init__(batch_size, seed, device)
        self.obs_dim = dim
        self.mixing_name = mixing
        mseed = stream_key(seed, "mixing") % 2**31 if mixing_seed is None else int(mixing_seed)
        self.mixing = make_mixing(mixing, dim, mseed, mixing_layers).to(self.device).requires_grad_(False)

    @torch.no_grad()
    def mix(self, z: torch.Tensor) -> torch.Tensor:
        return self.mixing(z)


@SOURCES.register("latent_pairs")
class LatentPairs(_MixedPairs):
    """Paper 001: z ~ U(box or sphere), z~ ~ p(z~ | z) (normal / laplace / vmf with ``scale``), x = g(z)."""

    def __init__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu", dim: int = 10,
                 space: str = "box", conditional: str = "normal", scale: float = 0.05, mixing: str = "mlp",
                 mixing_layers: int = 3, mixing_seed: int | None = None):
        spaces.check(space, conditional, scale, dim)
        super().__init__(batch_size, seed, device, dim, mixing, mixing_layers, mixing_seed)
        self.space, self.conditional, self.scale = space, conditional, float(scale)
        self.latent_names = [f"z{i + 1}" for i in range(dim)]
        self.latent_groups = {}

    def _pairs(self, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        z = spaces.sample_marginal(self.space, n, self.obs_dim, gen)
        return z, spaces.sample_conditional(self.space, self.conditional, z, self.scale, gen)

    def batch(self, b: int) -> dict[str, torch.Tensor]:
        z, zt = self._pairs(self.batch_size, self.generator("batch", b))
        return {"x0": self.mix(z), "x1": self.mix(zt), "latents": z}

    def eval_set(self, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        z = spaces.sample_marginal(self.space, n, self.obs_dim, self.generator("eval", seed))
        return self.mix(z), z


@SOURCES.register("scm_pairs")
class SCMPairs(_MixedPairs):
    """Paper 000 (and any SCM): z from a causal SCM, z~ its latent transformation of ``change``, x = g(z).

    The SCM samples on the host (numpy, counter-based, so batch b is the same however runs are split) and the
    two (B, n) latent batches are copied to the device once per step; mixing runs on the device.
    """

    def __init__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu",
                 scm: str = "content_style", change: str = "style", p_change: float | None = None,
                 sigma: float | None = None, mixing: str = "mlp", mixing_layers: int = 3,
                 mixing_seed: int | None = None, scm_args: Mapping[str, Any] | None = None):
        from ident3d.causal import SCM, content_style_spec, load_scm

        if scm == "content_style":  # paper 000's model, drawn per run seed (Sigma, B, a), with its options
            from ident3d.training.hparams import check_keywords

            args = {"seed": seed, **dict(scm_args or {})}
            check_keywords("scm", scm, content_style_spec, args, "scm_args key", fixed={"self"})
            self.scm = SCM(content_style_spec(**args))
        elif scm_args:
            raise UserError(f"scm_args apply to scm: content_style only; {scm} is a fixed spec")
        else:
            self.scm = load_scm(scm)
        if self.scm.class_node is not None:
            raise UserError(f"scm {scm}: synthetic pairs need continuous latents; it has the class node "
                            f"{self.scm.class_node!r}")
        self.change = self.scm.resolve(change)
        if p_change is not None and not (isinstance(p_change, (int, float)) and 0.0 <= p_change <= 1.0):
            raise UserError(f"p_change must be a number in [0, 1], got {p_change!r}; e.g. p_change: 0.75")
        self.p_change, self.sigma = p_change, sigma
        names = list(self.scm.names)
        super().__init__(batch_size, seed, device, len(names), mixing, mixing_layers, mixing_seed)
        self.latent_names = names
        self.latent_groups = self.scm.groups

    def _latents(self, n: int, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.scm.sample(n, seed=self.seed, start=start)
        t = self.scm.transform(s, self.change, seed=stream_key(self.seed, "synthetic-pairs") % 2**31,
                               sigma=self.sigma, p_change=self.p_change)
        to = {"device": self.device, "dtype": torch.float32}
        return torch.as_tensor(s.latents, **to), torch.as_tensor(t.latents, **to)

    def batch(self, b: int) -> dict[str, torch.Tensor]:
        z, zt = self._latents(self.batch_size, b * self.batch_size)
        return {"x0": self.mix(z), "x1": self.mix(zt), "latents": z}

    def eval_set(self, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.scm.sample(n, seed=stream_key(self.seed, "eval", seed) % 2**31)
        z = torch.as_tensor(s.latents, device=self.device, dtype=torch.float32)
        return self.mix(z), z


# the other modules of training/synthetic that register sources
SOURCE_MODULES = ("gin_data", "temporal_source", "multimodal")


def make_source(spec: Mapping[str, Any], batch_size: int, seed: int, device: torch.device | str) -> VectorSource:
    """A source from its config mapping {kind: NAME, ...options}; unknown kinds/options are one-line errors."""
    if not isinstance(spec, Mapping) or "kind" not in spec:
        raise UserError(f"a synthetic source needs a kind ({', '.join(source_names())}), got {spec!r}")
    opts = {k: v for k, v in spec.items() if k != "kind"}
    kind = spec["kind"]
    source_names()
    cls = SOURCES.get(kind)
    from ident3d.training.hparams import check_keywords

    check_keywords("source", kind, cls, opts, "option", fixed={"self", "batch_size", "seed", "device"})
    return cls(batch_size=batch_size, seed=seed, device=device, **opts)


def source_names() -> list[str]:
    """Every registered source, after importing the modules that register them (paper 003's set sources pull in
    torchvision for EMNIST, so they are imported on first use, not with this module)."""
    import importlib

    for module in SOURCE_MODULES:
        importlib.import_module(f"ident3d.training.synthetic.{module}")
    return SOURCES.names()
