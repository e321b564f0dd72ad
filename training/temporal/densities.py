"""Log-densities and KL terms of the temporal learners' priors: pure tensor functions, per sample and dimension.

Gaussians are diagonal and given by (mean, log-variance), as in ``ident3d.training.losses.gaussian`` (whose summed
``kl_gaussians`` these reuse per dimension). The CITRIS-style KL marginalises the latent-to-variable assignment
exactly: its softmax probabilities weight the KL to each candidate prior, as the CITRIS authors' perfect-
intervention prior does, instead of sampling one assignment.
"""

from __future__ import annotations

import torch

from ident3d.training.losses.gaussian import LOG_2PI, kl_gaussians


def gaussian_log_density(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """log N(z; mu, exp(logvar)) per element, constants included (what a prior assigns to one latent value)."""
    return -0.5 * (LOG_2PI + logvar + (z - mu).pow(2) / logvar.exp())


def kl_per_dim(mu_q: torch.Tensor, logvar_q: torch.Tensor, mu_p: torch.Tensor,
               logvar_p: torch.Tensor) -> torch.Tensor:
    """KL(q || p) of univariate Gaussians per element (broadcast), the closed form of ``kl_gaussians``."""
    mu_q, logvar_q, mu_p, logvar_p = torch.broadcast_tensors(mu_q, logvar_q, mu_p, logvar_p)
    return kl_gaussians(mu_q[..., None], logvar_q[..., None], mu_p[..., None], logvar_p[..., None])


def citris_kl(mu_q: torch.Tensor, logvar_q: torch.Tensor, mu_obs: torch.Tensor, logvar_obs: torch.Tensor,
              mu_int: torch.Tensor, logvar_int: torch.Tensor, assign_probs: torch.Tensor, targets: torch.Tensor,
              lambda_reg: float = 0.0) -> torch.Tensor:
    """E_psi[KL(q(z^{t+1} | x^{t+1}) || p(z^{t+1} | z^t, I^{t+1}, psi))] per sample (B,), psi marginalised.

    Shapes: q and the observational prior (B, M) (the latter a function of z^t); the interventional prior (M, K),
    a learned Gaussian per (latent dimension, variable) that ignores z^t; ``assign_probs`` (M, K + 1), the
    probability that dimension i belongs to variable k, the last column the group psi_0 of dimensions no
    intervention touches; ``targets`` (B, K) in {0, 1}. Dimension i assigned to variable k uses the interventional
    prior when I_k = 1 and the observational one otherwise; a psi_0 dimension always uses the observational one,
    with its KL scaled by (1 - lambda_reg) (CITRIS's regulariser pushing intervention-independent information
    into psi_0).
    """
    k = targets.shape[-1]
    p_var, p_none = assign_probs[:, :k], assign_probs[:, k]
    kl_obs = kl_per_dim(mu_q, logvar_q, mu_obs, logvar_obs)  # (B, M)
    kl_int = kl_per_dim(mu_q[..., None], logvar_q[..., None], mu_int, logvar_int)  # (B, M, K)
    w_int = p_var * targets[:, None, :]  # (B, M, K): assigned to k and k intervened
    w_obs = 1.0 - w_int.sum(-1) - p_none + (1.0 - lambda_reg) * p_none
    return ((w_int * kl_int).sum(-1) + w_obs * kl_obs).sum(-1)


def hard_prior(mu_obs: torch.Tensor, logvar_obs: torch.Tensor, mu_int: torch.Tensor, logvar_int: torch.Tensor,
               assignment: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, log-variance) (B, M) of p(z^{t+1} | z^t, I^{t+1}) under a hard assignment (M,) (values 0..K-1, or K
    for psi_0): the interventional prior of dimension i's variable where it is intervened, else the
    observational one."""
    k = targets.shape[-1]
    var = assignment.clamp(max=k - 1)
    hit = (targets[:, var] > 0.5) & (assignment < k)[None]  # (B, M)
    idx = torch.arange(len(assignment), device=assignment.device)
    return (torch.where(hit, mu_int[idx, var][None], mu_obs), torch.where(hit, logvar_int[idx, var][None], logvar_obs))
