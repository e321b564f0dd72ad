"""An iVAE-style baseline (after Khemakhem et al., AISTATS 2020) for interventional sequences: a VAE on x^{t+1}
whose Gaussian prior is conditioned on the intervention targets I^{t+1} alone (an MLP of I^{t+1} to each latent
dimension's mean and log-variance), with no previous latent and no assignment of dimensions to variables.

Loss per transition: ||x^{t+1} - g(z)||^2 / (2 lik_var) + beta * KL(q(z | x^{t+1}) || N(m(I^{t+1}), v(I^{t+1}))).
Simplifications: the MLP encoder/decoder of our VAEs on vector observations; iVAE's general exponential-family
prior is a diagonal Gaussian; x^t is unused.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ident3d.training.encoder_base import Encoder
from ident3d.training.losses.gaussian import gaussian_nll, kl_gaussians
from ident3d.training.objective_parts.generative import GenerativeObjective
from ident3d.training.temporal.citris_vae import PRIOR_LOGVAR


class TargetPrior(nn.Module):
    """p(z | I): a diagonal Gaussian whose parameters are an MLP of the target vector."""

    def __init__(self, n_latents: int, n_vars: int, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_vars, hidden), nn.SiLU(), nn.Linear(hidden, 2 * n_latents))

    def forward(self, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log-variance) (B, M) of the prior for targets (B, K)."""
        mu, logvar = self.net(targets).chunk(2, dim=-1)
        return mu, logvar.clamp(*PRIOR_LOGVAR)


class TemporalIVAE(nn.Module):
    """iVAE-style baseline: VAE on x^{t+1} with the prior p(z^{t+1} | I^{t+1})."""

    def __init__(self, encoder: Encoder, n_vars: int, *, lik_var: float = 0.05, beta: float = 1.0,
                 prior_hidden: int = 64):
        super().__init__()
        self.vae = GenerativeObjective(encoder)  # posterior (encoder + log-variance head), mirrored decoder
        self.prior = TargetPrior(encoder.out_dim, n_vars, prior_hidden)
        self.lik_var, self.beta = float(lik_var), float(beta)

    def loss(self, x_t: torch.Tensor, x_t1: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
        """Mean negative ELBO of x^{t+1} under the target-conditioned prior (x^t is not used)."""
        mu, logvar, _, x_hat = self.vae.encode_sample(x_t1)
        rec = gaussian_nll(x_t1, x_hat, self.lik_var).mean()
        kl = kl_gaussians(mu, logvar, *self.prior(targets)).mean()
        return {"loss": rec + self.beta * kl, "rec": rec.detach(), "kl": kl.detach()}

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        """The posterior mean."""
        return self.vae.encoder(x)

    def assignment(self) -> np.ndarray | None:
        """None: the model learns no grouping (evaluation assigns dimensions post hoc)."""
        return None
