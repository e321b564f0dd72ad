"""Latent spaces of paper 001 in torch, batched on any device: the marginal (uniform on the box [0, 1]^n or
on the unit sphere S^{n-1}) and the conditional of the positive z~ | z (normal, Laplace, von Mises-Fisher).

On the box the conditionals are truncated to [0, 1] per dimension (exact inverse-CDF sampling, no
rejection loop); on the sphere normal and Laplace noise is added and the result projected back, and
vMF is sampled exactly (Wood's algorithm, a fixed number of proposals per row, vectorised).
"""

from __future__ import annotations

import math

import torch

from ident3d.causal.errors import UserError

SPACES = ("box", "sphere")
CONDITIONALS = ("normal", "laplace", "vmf")


def check(space: str, conditional: str, scale: float, dim: int) -> None:
    """Refuse unknown names and scales that cannot be sampled, in one line each."""
    if space not in SPACES:
        raise UserError(f"unknown latent space {space!r}; choose one of: {', '.join(SPACES)}")
    if conditional not in CONDITIONALS:
        raise UserError(f"unknown conditional {conditional!r}; choose one of: {', '.join(CONDITIONALS)}")
    if conditional == "vmf" and space != "sphere":
        raise UserError("the vmf conditional lives on the sphere; use space: sphere, or normal/laplace on the box")
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise UserError(f"conditional scale must be a positive number, got {scale!r}; e.g. scale: 0.05")
    if not (isinstance(dim, int) and dim >= 2):
        raise UserError(f"latent dim must be a whole number >= 2, got {dim!r}")


def sample_marginal(space: str, n: int, dim: int, gen: torch.Generator) -> torch.Tensor:
    """n latents uniform on the box [0, 1]^dim or on the sphere S^(dim - 1), on ``gen``'s device."""
    if space == "box":
        return torch.rand(n, dim, generator=gen, device=gen.device)
    return _unit(torch.randn(n, dim, generator=gen, device=gen.device))


def sample_conditional(space: str, conditional: str, z: torch.Tensor, scale: float,
                       gen: torch.Generator) -> torch.Tensor:
    """Positives z~ ~ p(z~ | z): ``scale`` is the std of the normal, the Laplace scale b, or 1/sqrt(kappa) of vMF."""
    if space == "box":
        return truncated(conditional, z, scale, gen, 0.0, 1.0)
    if conditional == "vmf":
        return vmf(z, 1.0 / scale**2, gen)
    return _unit(z + scale * _noise(conditional, z.shape, gen).to(z.dtype))


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _noise(kind: str, shape: torch.Size, gen: torch.Generator) -> torch.Tensor:
    """Standard normal or standard Laplace (b = 1) noise."""
    if kind == "normal":
        return torch.randn(shape, generator=gen, device=gen.device)
    return laplace_from_uniform(torch.rand(shape, generator=gen, device=gen.device))


RAND_STEP = 2.0**-24  # torch.rand's float32 draws are multiples of this in [0, 1)


def laplace_from_uniform(v: torch.Tensor) -> torch.Tensor:
    """Standard Laplace draws by the inverse CDF of uniform draws v in [0, 1): -sign(u) log(1 - 2|u|), u = v - 1/2.

    v = 0 (a float32 draw of probability 2^-24, a few times in a long run) would give u = -1/2 and an infinite
    draw (paper 001's sphere/Laplace cells all became NaN from one); its tail term is floored at one rand step, the
    mass that draw stands for (|x| <= 16.6). Every other draw is unchanged bit for bit.
    """
    u = v - 0.5
    return -torch.sign(u) * torch.log1p((-2.0 * u.abs()).clamp_min(RAND_STEP - 1.0))


def truncated(kind: str, mu: torch.Tensor, scale: float, gen: torch.Generator, lo: float, hi: float) -> torch.Tensor:
    """Normal(mu, scale) or Laplace(mu, scale) truncated to [lo, hi] per entry, by the inverse CDF (float64 inside)."""
    m = mu.double()
    a, b = (lo - m) / scale, (hi - m) / scale
    u = torch.rand(mu.shape, generator=gen, device=gen.device, dtype=torch.float64)
    if kind == "normal":
        fa, fb = torch.special.ndtr(a), torch.special.ndtr(b)
        x = torch.special.ndtri((fa + u * (fb - fa)).clamp(1e-300, 1 - 1e-16))
    else:
        fa, fb = _laplace_cdf(a), _laplace_cdf(b)
        x = _laplace_icdf(fa + u * (fb - fa))
    return (m + scale * x).clamp(lo, hi).to(mu.dtype)


def _laplace_cdf(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x < 0, 0.5 * torch.exp(x.clamp_max(0)), 1.0 - 0.5 * torch.exp(-x.clamp_min(0)))


def _laplace_icdf(p: torch.Tensor) -> torch.Tensor:
    p = p.clamp(1e-300, 1 - 1e-16)
    return torch.where(p < 0.5, torch.log(2.0 * p), -torch.log(2.0 - 2.0 * p))


def vmf(mu: torch.Tensor, kappa: float, gen: torch.Generator, proposals: int = 16) -> torch.Tensor:
    """von Mises-Fisher(mu, kappa) samples on S^(d-1), one per row of unit vectors ``mu`` (Wood 1994).

    The cosine w to mu is drawn by rejection with ``proposals`` candidates per row at once (acceptance is above
    1/2 for every kappa and d, so all rows accept with probability 1 - 2^-16 or more; the rare rest retry).
    """
    n, d = mu.shape
    m = d - 1
    b = (-2.0 * kappa + math.sqrt(4.0 * kappa**2 + m**2)) / m
    x0 = (1.0 - b) / (1.0 + b)
    c = kappa * x0 + m * math.log(1.0 - x0**2)
    w = torch.empty(n, device=mu.device, dtype=torch.float64)
    todo = torch.arange(n, device=mu.device)
    while todo.numel():
        k = todo.numel()
        # Beta(m/2, m/2) as chi2(m) / (chi2(m) + chi2(m)), from normals: the generator stays in charge
        g = torch.randn(2, k, proposals, m, generator=gen, device=gen.device, dtype=torch.float64).pow(2).sum(-1)
        beta = g[0] / (g[0] + g[1])
        cand = (1.0 - (1.0 + b) * beta) / (1.0 - (1.0 - b) * beta)
        u = torch.rand(k, proposals, generator=gen, device=gen.device, dtype=torch.float64)
        ok = kappa * cand + m * torch.log(1.0 - x0 * cand) - c >= torch.log(u)
        hit = ok.any(1)
        first = ok.double().argmax(1)
        w[todo[hit]] = cand[hit, first[hit]]
        todo = todo[~hit]
    v = torch.randn(n, d, generator=gen, device=gen.device, dtype=torch.float64)
    mu64 = mu.double()
    v = _unit(v - (v * mu64).sum(-1, keepdim=True) * mu64)
    return (w.unsqueeze(1) * mu64 + torch.sqrt((1.0 - w**2).clamp_min(0)).unsqueeze(1) * v).to(mu.dtype)
