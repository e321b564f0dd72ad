"""The iVAE-style baseline of CITRIS's benchmarks as an objective of ``ident3d train``: a VAE on x_{t+1} whose prior
is conditioned on the step's intervention targets (``ident3d.training.temporal.ivae.TemporalIVAE``)."""

from __future__ import annotations

from typing import Any

from torch import nn

from ident3d.training.hparams import Count, NonNegative, Positive
from ident3d.training.objective_parts.transition import TransitionObjective
from ident3d.training.registry import OBJECTIVES


@OBJECTIVES.register("ivae_temporal")
class TemporalIVAEObjective(TransitionObjective):
    """Negative ELBO of x_{t+1} under the prior p(z_{t+1} | I_{t+1}) (x_t is not used).

    Hyperparameters:
        n_vars: causal variables of the store's dynamic SCM (7 for temporal_causal3dident; the views check it).
        lik_var: Gaussian likelihood variance of the decoder. beta: weight of the KL term.
        prior_hidden: width of the prior MLP.
    """

    def __init__(self, encoder: nn.Module, *, n_vars: Count = 7, lik_var: Positive = 0.05,
                 beta: NonNegative = 1.0, prior_hidden: Count = 64):
        super().__init__(encoder, n_vars=n_vars, lik_var=lik_var, beta=beta, prior_hidden=prior_hidden)

    def build(self, encoder: nn.Module, n_vars: int, hparams: dict[str, Any]) -> nn.Module:
        from ident3d.training.temporal.ivae import TemporalIVAE

        return TemporalIVAE(encoder, n_vars, **hparams)
