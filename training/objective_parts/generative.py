"""Base of the generative objectives: a Gaussian posterior (mean = the encoder's output, log-variance from
an extra head on the encoder's features) and a decoder mirroring the encoder.

The encoder's output is the posterior mean, so ``representation(x)`` (what evaluation encodes) is that mean.
Views arrive normalised with the store's statistics, so reconstructions and the likelihood variance are in
normalised pixel units; grey encoders (channels=1) reconstruct the channel mean.
"""

from __future__ import annotations

from typing import Annotated, Any

import torch
from torch import nn

from ident3d.causal.errors import UserError
from ident3d.training.decoders import build_decoder, no_decoder_error
from ident3d.training.encoder_base import Encoder
from ident3d.training.gen_encoders import to_channels
from ident3d.training.hparams import Range
from ident3d.training.losses.gaussian import sample_posterior
from ident3d.training.objective_parts.base import Objective

LOGVAR_RANGE = (-12.0, 8.0)  # clamp of the posterior log-variance: keeps exp() finite early in training


DecoderWidth = Annotated[int, Range(ge=16)]  # the mirrored decoder's first width (the vae family's hyperparameter)


class GenerativeObjective(Objective):
    """Shared parts of vae, beta_vae, cr_vae and simvae (not registered itself); the temporal learners
    (``ident3d.training.temporal``) hold one as their posterior and decoder."""

    def __init__(self, encoder: nn.Module, **hparams: Any):
        super().__init__(encoder)
        if not isinstance(encoder, Encoder):  # it declares the feature width and the mirror decoder used below
            raise no_decoder_error(encoder)
        if encoder.constraint != "none":
            raise UserError(f"{type(self).__name__}: the posterior mean must be unconstrained; use --constraint none")
        self.channels = int(encoder.channels)
        self.logvar_head = nn.Sequential(nn.ReLU(), nn.Linear(encoder.feature_dim, encoder.out_dim))
        self.decoder = build_decoder(encoder, width=int(hparams.get("decoder_width", 256)))

    def posterior(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log-variance) of q(z|x), each (B, Z)."""
        h = self.encoder.features(x)
        return self.encoder.head(h), self.logvar_head(h).clamp(*LOGVAR_RANGE)

    def target(self, x: torch.Tensor) -> torch.Tensor:
        """What the decoder reconstructs: the view itself (an image, or a vector of synthetic data), or its channel
        mean for grey encoders."""
        return x if x.dim() == 2 else to_channels(x, self.channels)

    def encode_sample(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mean, log-variance, one posterior draw z, its reconstruction) of a view."""
        mu, logvar = self.posterior(x)
        z = sample_posterior(mu, logvar)
        return mu, logvar, z, self.decoder(z)

    @torch.no_grad()
    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        """Decoder output at the posterior mean (for figures and reconstruction MSE), in target units."""
        return self.decoder(self.encoder(x))
