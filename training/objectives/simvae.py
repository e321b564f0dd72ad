"""SimVAE (paper 004): the J views of an anchor share a latent cluster; their posteriors are pulled towards
the views' mean under a Gaussian prior of variance prior_var, with a fixed-variance Gaussian likelihood."""

from __future__ import annotations

import torch
from torch import nn

from ident3d.training.hparams import Positive
from ident3d.training.losses.gaussian import simvae_terms
from ident3d.training.objective_parts.generative import DecoderWidth, GenerativeObjective
from ident3d.training.registry import OBJECTIVES


@OBJECTIVES.register("simvae")
class SimVAE(GenerativeObjective):
    """SimVAE: rec / (2 lik_var) - posterior entropy + sum_j ||z_j - mean z||^2 / (2 prior_var) + ||mean z||^2 / 2.

    Hyperparameters:
        lik_var: likelihood variance per (normalised) pixel (default 0.02, paper 004).
        decoder_width: first width of the conv decoder, halved per up-sampling block (default 256, paper 004).
        prior_var: variance of each view's latent around the views' mean (default 0.15, paper 004).
    The entropy is the exact Gaussian entropy 0.5 sum log(2 pi e var) (paper 004's official code scales it by
    2 pi). Takes any J >= 2 views per anchor (``--n-views J`` with a DA view maker; default 2, the paper uses 10).
    """

    any_views = True  # simvae_terms sums over the J stacked views

    def __init__(self, encoder: nn.Module, *, lik_var: Positive = 0.02, prior_var: Positive = 0.15,
                 decoder_width: DecoderWidth = 256):
        super().__init__(encoder, lik_var=lik_var, prior_var=prior_var, decoder_width=decoder_width)
        self.lik_var, self.prior_var = float(lik_var), float(prior_var)

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """The batch mean of SimVAE's negative ELBO over the J views; logs its parts and pixel MSE."""
        drawn = [self.encode_sample(v) for v in views]
        x = torch.stack([self.target(v) for v in views])
        x_hat = torch.stack([d[3] for d in drawn])
        terms = simvae_terms(x, x_hat, torch.stack([d[2] for d in drawn]), torch.stack([d[1] for d in drawn]),
                             self.lik_var, self.prior_var)
        out = {k: v.mean() if k == "loss" else v.mean().detach() for k, v in terms.items()}
        out["mse"] = (x - x_hat).pow(2).mean().detach()
        return out
