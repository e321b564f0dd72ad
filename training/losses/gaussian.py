"""Per-sample terms of Gaussian latent-variable objectives (VAE, CR-VAE, SimVAE): pure tensor functions.

Every function returns one value per sample, shape (B,), summed over pixels or latent dimensions; the
objectives average over the batch. Constants that do not depend on the parameters are noted where dropped.
"""

from __future__ import annotations

import math

import torch

LOG_2PI_E = math.log(2 * math.pi * math.e)
LOG_2PI = math.log(2 * math.pi)


def sample_posterior(mu: torch.Tensor, logvar: torch.Tensor,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """One reparameterised draw z = mu + sigma * eps from N(mu, diag(exp(logvar)))."""
    eps = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
    return mu + torch.exp(0.5 * logvar) * eps


def gaussian_nll(x: torch.Tensor, x_hat: torch.Tensor, var: float) -> torch.Tensor:
    """-log N(x; x_hat, var I) per sample without its constant D/2 log(2 pi var): sum ||x - x_hat||^2 / (2 var)."""
    return (x - x_hat).pow(2).flatten(1).sum(1) / (2.0 * var)


def gaussian_entropy(logvar: torch.Tensor) -> torch.Tensor:
    """Differential entropy of N(mu, diag(exp(logvar))): 0.5 * sum(log(2 pi e var)) (the correct value)."""
    return 0.5 * (LOG_2PI_E + logvar).sum(-1)


def kl_standard_normal(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, diag var) || N(0, I)) = 0.5 * sum(mu^2 + var - 1 - log var)."""
    return 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(-1)


def kl_gaussians(mu_q: torch.Tensor, logvar_q: torch.Tensor, mu_p: torch.Tensor,
                 logvar_p: torch.Tensor) -> torch.Tensor:
    """KL(q || p) of diagonal Gaussians: 0.5 * sum(log var_p/var_q + (var_q + (mu_q - mu_p)^2) / var_p - 1)."""
    return 0.5 * (logvar_p - logvar_q + (logvar_q.exp() + (mu_q - mu_p).pow(2)) / logvar_p.exp() - 1.0).sum(-1)


def negative_elbo(x: torch.Tensor, x_hat: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, lik_var: float,
                  beta: float = 1.0) -> torch.Tensor:
    """(beta-)VAE loss per sample: reconstruction NLL (x_hat decoded from a posterior draw) + beta * KL to N(0, I)."""
    return gaussian_nll(x, x_hat, lik_var) + beta * kl_standard_normal(mu, logvar)


def simvae_terms(x: torch.Tensor, x_hat: torch.Tensor, z: torch.Tensor, logvar: torch.Tensor, lik_var: float,
                 prior_var: float) -> dict[str, torch.Tensor]:
    """SimVAE's negative ELBO per sample and its parts, for J views stacked on the first axis.

    Shapes: x, x_hat (J, B, ...) views and their reconstructions; z, logvar (J, B, L) posterior draws and
    log-variances. With m = mean_j z_j:
        loss = sum_j ||x_j - x_hat_j||^2 / (2 lik_var)                      (reconstruction)
             - sum_j H[q(z|x_j)]                                              (entropy, 0.5 sum log(2 pi e var))
             + sum_j ||z_j - m||^2 / (2 prior_var)                            (views around their mean)
             + 0.5 ||m||^2 + L/2 log(2 pi)                                    (-log N(m; 0, I))
    The view term drops its normaliser J L/2 log(2 pi prior_var), a constant. Paper 004's official code scales
    the entropy term by 2 pi; here the entropy is the exact Gaussian entropy. With J = 1 the view term vanishes
    and the expectation of the loss equals the VAE's negative ELBO (``negative_elbo`` with beta = 1).
    """
    m = z.mean(0)
    rec = torch.stack([gaussian_nll(xj, xh, lik_var) for xj, xh in zip(x, x_hat, strict=True)]).sum(0)
    entropy = gaussian_entropy(logvar).sum(0)
    spread = (z - m).pow(2).sum(-1).sum(0) / (2.0 * prior_var)
    centre = 0.5 * m.pow(2).sum(-1) + 0.5 * z.shape[-1] * LOG_2PI
    return {"loss": rec - entropy + spread + centre, "rec": rec, "entropy": entropy, "spread": spread,
            "centre": centre}
