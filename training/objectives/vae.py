"""VAE and beta-VAE: Gaussian posterior, N(0, I) prior, fixed-variance Gaussian likelihood; each view is
its own data point (with the ``none`` view maker: the plain VAE on the store's images)."""

from __future__ import annotations

import torch
from torch import nn

from ident3d.training.hparams import NonNegative, Positive
from ident3d.training.losses.gaussian import gaussian_nll, kl_standard_normal
from ident3d.training.objective_parts.generative import DecoderWidth, GenerativeObjective
from ident3d.training.registry import OBJECTIVES


@OBJECTIVES.register("vae")
class VAE(GenerativeObjective):
    """VAE: negative ELBO = ||x - g(z)||^2 / (2 lik_var) + beta KL(q(z|x) || N(0, I)), averaged over the views.

    Hyperparameters:
        lik_var: likelihood variance per (normalised) pixel (default 0.02, paper 004).
        decoder_width: first width of the conv decoder, halved per up-sampling block (default 256, paper 004).
        beta: weight of the KL term (default 1: the plain VAE).
    Needs an encoder that records its image size (mlp_vae, resnet_vae); the encoder's output is the posterior mean.
    Takes any J >= 2 views (``--n-views J``): each is its own data point.
    """

    any_views = True  # the loss averages over however many views come

    def __init__(self, encoder: nn.Module, *, lik_var: Positive = 0.02, beta: NonNegative = 1.0,
                 decoder_width: DecoderWidth = 256):
        super().__init__(encoder, lik_var=lik_var, beta=beta, decoder_width=decoder_width)
        self.lik_var, self.beta = float(lik_var), float(beta)

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """Mean negative ELBO over the views and the batch; logs reconstruction NLL, KL and pixel MSE."""
        rec, kl, mse = [], [], []
        for v in views:
            mu, logvar, _, x_hat = self.encode_sample(v)
            target = self.target(v)
            rec.append(gaussian_nll(target, x_hat, self.lik_var).mean())
            kl.append(kl_standard_normal(mu, logvar).mean())
            mse.append((target - x_hat).pow(2).mean().detach())
        r, k = torch.stack(rec).mean(), torch.stack(kl).mean()
        return {"loss": r + self.beta * k, "rec": r.detach(), "kl": k.detach(), "mse": torch.stack(mse).mean()}


@OBJECTIVES.register("beta_vae")
class BetaVAE(VAE):
    """beta-VAE: the VAE with the KL term weighted by beta (default 4; paper 004 does not state its beta).

    Hyperparameters: lik_var (default 0.02, paper 004), beta (default 4.0), decoder_width (default 256).
    """

    def __init__(self, encoder: nn.Module, *, lik_var: Positive = 0.02, beta: NonNegative = 4.0,
                 decoder_width: DecoderWidth = 256):
        super().__init__(encoder, lik_var=lik_var, beta=beta, decoder_width=decoder_width)
