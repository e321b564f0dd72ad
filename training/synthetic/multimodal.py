"""Paper 005's numerical simulation (Daunhawer et al., ICLR 2023): pairs of two modalities made by two distinct
mechanisms, for ``multimodal_lp_infonce`` (see ``ident3d.training.synthetic.base`` for the source protocol).

Latents: content c, style s and the modality-specific m1, m2, each block Gaussian. Modality 1 observes
x1 = f1(c, s, m1); modality 2 observes x2 = f2(c, s~, m2), where s~ = s + mask * eps changes each style latent of
each pair with probability ``p_change`` (eps ~ N(0, sigma_change^2), or N(0, Sigma_a) under statistical dependence).
f1 and f2 are two frozen invertible MLPs drawn from different seeds (one shared map with ``shared_mixing``: the
multi-view special case): paper 001's ``InvertibleMixing`` (singular values in [0.5, 1.5]), where the paper's code
draws column-normalised uniform matrices below a condition-number threshold. As in the paper's code, every batch
also holds a fresh, independent pair whose two sides are the negatives of each modality.
"""

from __future__ import annotations

from typing import Annotated, Any

import torch

from ident3d.causal.rng import stream_key
from ident3d.training.hparams import Count, Positive, Range, Unit, checked_init
from ident3d.training.synthetic.base import SOURCES, VectorSource
from ident3d.training.synthetic.sources import make_mixing

Size = Annotated[int, Range(ge=0)]
BLOCKS = ("content", "style", "style~", "m1", "m2")  # the latent groups, in the order of the latents' columns


@SOURCES.register("multimodal")
class MultimodalPairs(VectorSource):
    """Paper 005: views [x1, x2, x1', x2'] with x1 = f1(c, s, m1), x2 = f2(c, s~, m2) and (x1', x2') a fresh pair
    (the negatives); latents (c, s, s~, m1, m2) of the anchors.

    Options (the paper's code's flags in brackets): ``content``, ``style``, ``specific`` latents per block
    [--content-n, --style-n, --modality-n]; ``p_change`` [--style-change-prob] and ``sigma_change`` [--c-param];
    ``statistical``: each block ~ N(0, Sigma), Sigma ~ Wishart(n, I), and the style's change eps ~ N(0, Sigma)
    [--statistical-dependence];
    ``causal``: s += B c + a with B, a ~ N(0, 1) [--content-dependent-style]; ``mixing_layers``
    [--n-mixing-layer]; ``shared_mixing`` [--shared-mixing]. Sigma, B, a and both mixings are fixed per run seed;
    as in the paper's code, whose every Sigma is drawn from the run seed alone, blocks of one size share one Sigma
    (so the style's change has the style's own covariance)."""

    n_views = 4
    modalities = 2

    def __init__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu", *,
                 content: Count = 5, style: Size = 5, specific: Size = 5, p_change: Unit = 1.0,
                 sigma_change: Positive = 1.0, statistical: bool = False, causal: bool = False,
                 mixing_layers: Count = 3, shared_mixing: bool = False):
        super().__init__(batch_size, seed, device)
        self.sizes = {"content": content, "style": style, "style~": style, "m1": specific, "m2": specific}
        self.p_change, self.sigma_change = p_change, sigma_change
        self.statistical, self.causal, self.shared_mixing = statistical, causal, shared_mixing
        self.obs_dim = content + style + specific
        names = {"content": "c", "style": "s", "style~": "s~", "m1": "m1_", "m2": "m2_"}
        self.latent_groups = {b: [f"{names[b]}{i + 1}" for i in range(n)] for b, n in self.sizes.items() if n}
        self.latent_names = [name for members in self.latent_groups.values() for name in members]
        g = self.generator("causal")
        self.b = torch.randn(style, content, generator=g, device=self.device)
        self.a = torch.randn(style, generator=g, device=self.device)
        blocks = {"content": content, "style": style, "change": style, "m1": specific, "m2": specific}
        self.chol = {b: self._wishart_chol(n) for b, n in blocks.items()} if statistical else {}
        seeds = [stream_key(seed, "mixing", k) % 2**31 for k in (1, 2)]
        self.mixing_seeds = seeds[:1] * 2 if self.shared_mixing else seeds
        self.f1, self.f2 = (make_mixing("mlp", self.obs_dim, s, mixing_layers).to(self.device).requires_grad_(False)
                            for s in self.mixing_seeds)
        self.mixing_layers = mixing_layers

    def _wishart_chol(self, n: int) -> torch.Tensor:
        """The Cholesky factor of the run's Sigma ~ Wishart(df = n, I_n) (the sum of n outer products of N(0, I)
        draws): one per block size, drawn from (seed, n) alone, as the paper's code draws each from its run seed."""
        x = torch.randn(n, n, generator=self.generator("wishart", n), device=self.device, dtype=torch.float64)
        return torch.linalg.cholesky(x.T @ x).float()

    def _gauss(self, block: str, n: int, dim: int, gen: torch.Generator) -> torch.Tensor:
        """n draws of N(0, Sigma_block) (statistical dependence) or N(0, I)."""
        eps = torch.randn(n, dim, generator=gen, device=self.device)
        return eps @ self.chol[block].T if self.statistical else eps

    def latents(self, n: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        """n anchors' blocks {content, style, style~, m1, m2}, each (n, size), drawn in one fixed order from ``gen``."""
        nc, ns, nm = self.sizes["content"], self.sizes["style"], self.sizes["m1"]
        c = self._gauss("content", n, nc, gen)
        s = self._gauss("style", n, ns, gen)
        if self.causal:
            s = s + c @ self.b.T + self.a
        change = torch.rand(n, ns, generator=gen, device=self.device) < self.p_change
        eps = self._gauss("change", n, ns, gen) if self.statistical else self.sigma_change * torch.randn(
            n, ns, generator=gen, device=self.device)
        m1, m2 = self._gauss("m1", n, nm, gen), self._gauss("m2", n, nm, gen)
        return {"content": c, "style": s, "style~": s + change * eps, "m1": m1, "m2": m2}

    @torch.no_grad()
    def observe(self, z: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(x1, x2) = (f1(c, s, m1), f2(c, s~, m2)) of latent blocks ``z``."""
        return (self.f1(torch.cat([z["content"], z["style"], z["m1"]], 1)),
                self.f2(torch.cat([z["content"], z["style~"], z["m2"]], 1)))

    def stacked(self, z: dict[str, torch.Tensor]) -> torch.Tensor:
        """The latents as one (n, L) matrix, columns in ``latent_names`` order."""
        return torch.cat([z[b] for b in BLOCKS], 1)

    def batch(self, b: int) -> dict[str, torch.Tensor]:
        """Batch b: the anchors' pair (x0 = x1, x1 = x2), a fresh pair (x2, x3: the negatives), the anchors' latents."""
        gen = self.generator("batch", b)
        z = self.latents(self.batch_size, gen)
        x1, x2 = self.observe(z)
        n1, n2 = self.observe(self.latents(self.batch_size, gen))
        return {"x0": x1, "x1": x2, "x2": n1, "x3": n2, "latents": self.stacked(z)}

    def eval_modalities(self, n: int, seed: int = 0) -> tuple[list[torch.Tensor], torch.Tensor]:
        """n held-out pairs: ([x1, x2], latents (c, s, s~, m1, m2))."""
        z = self.latents(n, self.generator("eval", seed))
        return list(self.observe(z)), self.stacked(z)

    def eval_set(self, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Modality 1 of ``eval_modalities``' pairs, with all latents."""
        (x1, _), z = self.eval_modalities(n, seed)
        return x1, z

    def describe(self) -> dict[str, Any]:
        """The base description with the perturbation, dependence and mixing settings."""
        return {**super().describe(), "p_change": self.p_change, "sigma_change": self.sigma_change,
                "statistical": self.statistical, "causal": self.causal, "mixing_layers": self.mixing_layers,
                "shared_mixing": self.shared_mixing, "mixing_seeds": self.mixing_seeds}


# its options are checked (and converted) on construction, each bad one a one-line error naming it
checked_init(MultimodalPairs, lambda _: "synthetic source multimodal", "option", {"batch_size", "seed", "device"})
