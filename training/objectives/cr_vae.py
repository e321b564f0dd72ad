"""CR-VAE (consistency-regularised VAE): the ELBOs of an image and of its augmentation plus a KL term that
pulls the augmentation's posterior towards the image's."""

from __future__ import annotations

import torch
from torch import nn

from ident3d.training.hparams import NonNegative, Positive
from ident3d.training.losses.gaussian import kl_gaussians, negative_elbo
from ident3d.training.objective_parts.generative import DecoderWidth, GenerativeObjective
from ident3d.training.registry import OBJECTIVES


def cr_vae_loss(x: torch.Tensor, x_hat: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, tx: torch.Tensor,
                tx_hat: torch.Tensor, mu_t: torch.Tensor, logvar_t: torch.Tensor, lik_var: float, gamma: float,
                beta: float = 1.0) -> torch.Tensor:
    """Per sample: -ELBO(x) - ELBO(t(x)) + gamma * KL(q(z|t(x)) || q(z|x))."""
    return (negative_elbo(x, x_hat, mu, logvar, lik_var, beta)
            + negative_elbo(tx, tx_hat, mu_t, logvar_t, lik_var, beta)
            + gamma * kl_gaussians(mu_t, logvar_t, mu, logvar))


@OBJECTIVES.register("cr_vae")
class CRVAE(GenerativeObjective):
    """CR-VAE: -ELBO(x) - ELBO(t(x)) + gamma KL(q(z|t(x)) || q(z|x)); view 0 plays x, view 1 plays t(x).

    Hyperparameters:
        gamma: weight of the consistency KL (default 1e-3, SPEC; paper 004's appendix lists 0.1 for its runs).
        lik_var: likelihood variance per (normalised) pixel (default 0.02, paper 004).
        beta: weight of each ELBO's prior KL (default 1).
        decoder_width: first width of the conv decoder (default 256, paper 004).
    """

    def __init__(self, encoder: nn.Module, *, gamma: NonNegative = 1e-3, lik_var: Positive = 0.02,
                 beta: NonNegative = 1.0, decoder_width: DecoderWidth = 256):
        super().__init__(encoder, gamma=gamma, lik_var=lik_var, beta=beta, decoder_width=decoder_width)
        self.gamma, self.lik_var, self.beta = float(gamma), float(lik_var), float(beta)

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """The batch mean of ``cr_vae_loss``; logs the consistency KL and pixel MSE."""
        x, tx = views
        mu, logvar, _, x_hat = self.encode_sample(x)
        mu_t, logvar_t, _, tx_hat = self.encode_sample(tx)
        x, tx = self.target(x), self.target(tx)
        loss = cr_vae_loss(x, x_hat, mu, logvar, tx, tx_hat, mu_t, logvar_t, self.lik_var, self.gamma, self.beta)
        consistency = kl_gaussians(mu_t, logvar_t, mu, logvar).mean()
        mse = 0.5 * ((x - x_hat).pow(2).mean() + (tx - tx_hat).pow(2).mean())
        return {"loss": loss.mean(), "consistency_kl": consistency.detach(), "mse": mse.detach()}
