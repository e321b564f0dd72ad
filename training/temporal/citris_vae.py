"""A CITRIS-style VAE (after Lippe et al., "CITRIS: Causal Identifiability from Temporal Intervened Sequences",
ICML 2022) for transitions (x^t, x^{t+1}, I^{t+1}) with K causal variables and M >= K latent dimensions.

Model: q(z | x) is our VAEs' Gaussian posterior (``ident3d.training.objective_parts.generative.GenerativeObjective``:
the encoder, log-variance head and mirrored decoder that ``vae`` builds on). Each latent dimension i belongs to one
of K + 1 groups, psi(i) in {variable 1..K, psi_0: no variable}, with learned probabilities softmax(theta_i). The
transition prior factorises over dimensions,
    p(z^{t+1} | z^t, I^{t+1}) = prod_i p(z^{t+1}_i | z^t, I^{t+1}_{psi(i)}),
a conditional Gaussian: N(f_i(z^t)) from an MLP f of the whole previous latent when psi(i)'s variable is not
intervened on (and for psi_0), and N(m_ik, v_ik), a learned Gaussian that ignores z^t, when it is (perfect
interventions). Per transition the loss is
    ||x^{t+1} - g(z^{t+1})||^2 / (2 lik_var) + beta * E_psi KL(q(z^{t+1} | x^{t+1}) || p(z^{t+1} | z^t, I^{t+1}))
with z^{t+1} one reparameterised posterior draw, z^t the posterior mean of x^t (gradients flow into it, as in the
authors' code) and the expectation over psi taken exactly (``densities.citris_kl``), psi_0's KL scaled by
(1 - lambda_reg). Evaluation groups dimension i under argmax_k softmax(theta_i) (psi_0 dimensions in none).

With ``beta_classifier`` > 0 (the authors' default is 2) CITRIS's target classifier is added
(``target_classifier.TargetClassifier``): beta_classifier * (classifier loss + latents' loss) on posterior draws of
z^t and z^{t+1} and one hard Gumbel-softmax draw of the assignment per sample (temperature 1); the classifier's
parameters learn at ``classifier_lr_scale`` (the authors' 4) times the learning rate (``param_groups``). At 0 the
assignment is learned from the prior's KL alone and no extra random draw is made.

Simplifications against the paper and its code (phlippe/CITRIS, CITRISVAE with perfect interventions):
- the target classifier's optimiser is Adam like the rest (theirs: AdamW with weight decay 1e-4), one hidden layer;
- the observational prior is one MLP from z^t to every dimension's mean and log-variance (theirs: a separate small
  network per latent dimension with a shared first layer); no autoregressive prior within a group, no
  normalising flow (CITRIS-NF), no imperfect-intervention variant;
- the KL's assignment is marginalised with plain softmax probabilities (theirs does the same for this KL; the
  Gumbel-softmax samples appear only in the classifier we leave out), no KL warm-up, no learning-rate schedule;
- an MLP encoder/decoder on vector observations (synthetic mixed latents) instead of the conv nets on images;
- the prior's log-variances are clamped to [-8, 4] to keep exp() finite.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ident3d.training.encoder_base import Encoder
from ident3d.training.losses.gaussian import gaussian_nll, sample_posterior
from ident3d.training.objective_parts.generative import GenerativeObjective
from ident3d.training.temporal.densities import citris_kl, gaussian_log_density, hard_prior
from ident3d.training.temporal.target_classifier import TargetClassifier

PRIOR_LOGVAR = (-8.0, 4.0)


class TransitionPrior(nn.Module):
    """p(z^{t+1} | z^t, I^{t+1}) per latent dimension, with the learned assignment of dimensions to variables."""

    def __init__(self, n_latents: int, n_vars: int, hidden: int = 64, lambda_reg: float = 0.01):
        super().__init__()
        if not 0.0 <= lambda_reg < 1.0:
            raise ValueError(f"lambda_reg must be in [0, 1), got {lambda_reg}")
        self.n_latents, self.n_vars, self.lambda_reg = n_latents, n_vars, float(lambda_reg)
        self.assign_logits = nn.Parameter(torch.zeros(n_latents, n_vars + 1))
        self.register_buffer("psi0_mask", torch.tensor(0.0 if lambda_reg > 0 else -1e9))
        self.obs_net = nn.Sequential(nn.Linear(n_latents, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                     nn.Linear(hidden, 2 * n_latents))
        self.int_params = nn.Parameter(torch.empty(n_latents, n_vars, 2).uniform_(-0.5, 0.5))

    def assign_probs(self) -> torch.Tensor:
        """(M, K + 1) softmax assignment probabilities; psi_0 (the last column) is off when lambda_reg = 0."""
        logits = torch.cat([self.assign_logits[:, :-1], self.assign_logits[:, -1:] + self.psi0_mask], dim=1)
        return torch.softmax(logits, dim=1)

    def observational(self, z_t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log-variance) (B, M) of the non-intervened prior given the previous latent z^t."""
        mu, logvar = self.obs_net(z_t).chunk(2, dim=-1)
        return mu, logvar.clamp(*PRIOR_LOGVAR)

    def interventional(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log-variance) (M, K) of each dimension's prior when variable k is intervened on."""
        return self.int_params[..., 0], self.int_params[..., 1].clamp(*PRIOR_LOGVAR)

    def kl(self, mu_q: torch.Tensor, logvar_q: torch.Tensor, z_t: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Per-sample KL of q(z^{t+1} | x^{t+1}) to this prior, the assignment marginalised (B,)."""
        mu_o, lv_o = self.observational(z_t)
        mu_i, lv_i = self.interventional()
        return citris_kl(mu_q, logvar_q, mu_o, lv_o, mu_i, lv_i, self.assign_probs(), targets, self.lambda_reg)

    def params(self, z_t: torch.Tensor, targets: torch.Tensor,
               assignment: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log-variance) (B, M) of the prior under a hard assignment (default: the argmax one)."""
        a = self.assign_probs().argmax(1) if assignment is None else assignment
        return hard_prior(*self.observational(z_t), *self.interventional(), a, targets)

    def log_prob(self, z_t1: torch.Tensor, z_t: torch.Tensor, targets: torch.Tensor,
                 assignment: torch.Tensor | None = None) -> torch.Tensor:
        """log p(z^{t+1} | z^t, I^{t+1}) per sample (B,) under a hard assignment (default: the argmax one)."""
        return gaussian_log_density(z_t1, *self.params(z_t, targets, assignment)).sum(-1)

    def assignment(self) -> np.ndarray:
        """(M,) variable index of each dimension under the argmax assignment, -1 for psi_0."""
        a = self.assign_probs().argmax(1).detach().cpu().numpy()
        return np.where(a == self.n_vars, -1, a)


class CitrisVAE(nn.Module):
    """CITRIS-style VAE: reconstruction of x^{t+1} plus beta * KL to the per-variable transition prior."""

    def __init__(self, encoder: Encoder, n_vars: int, *, lik_var: float = 0.05, beta: float = 1.0,
                 lambda_reg: float = 0.01, prior_hidden: int = 64, beta_classifier: float = 0.0,
                 classifier_lr_scale: float = 4.0):
        super().__init__()
        self.vae = GenerativeObjective(encoder)  # posterior (encoder + log-variance head), mirrored decoder
        self.prior = TransitionPrior(encoder.out_dim, n_vars, prior_hidden, lambda_reg)
        self.lik_var, self.beta = float(lik_var), float(beta)
        self.beta_classifier, self.classifier_lr_scale = float(beta_classifier), float(classifier_lr_scale)
        self.classifier = TargetClassifier(encoder.out_dim, n_vars, 2 * prior_hidden) if beta_classifier > 0 else None

    def loss(self, x_t: torch.Tensor, x_t1: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
        """Mean over the batch of the negative ELBO of x^{t+1} given z^t and I^{t+1} (plus the target classifier's
        losses when it is on); logs the parts."""
        mu_t, logvar_t = self.vae.posterior(x_t)
        mu, logvar, z_t1, x_hat = self.vae.encode_sample(x_t1)
        rec = gaussian_nll(x_t1, x_hat, self.lik_var).mean()
        kl = self.prior.kl(mu, logvar, mu_t, targets).mean()
        out = {"loss": rec + self.beta * kl, "rec": rec.detach(), "kl": kl.detach()}
        if self.classifier is not None:
            logits = torch.log(self.prior.assign_probs().clamp_min(1e-30))
            hard = torch.nn.functional.gumbel_softmax(logits.expand(len(x_t), -1, -1), tau=1.0, hard=True)
            loss_model, loss_z = self.classifier(sample_posterior(mu_t, logvar_t), z_t1, targets, hard)
            out["loss"] = out["loss"] + self.beta_classifier * (loss_model + loss_z)
            out.update(classifier=loss_model.detach(), classifier_latents=loss_z.detach())
        return out

    def param_groups(self) -> list[dict]:
        """Optimiser groups: the target classifier's parameters learn ``classifier_lr_scale`` times faster."""
        if self.classifier is None:
            return [{"params": list(self.parameters())}]
        mine = {id(p) for p in self.classifier.parameters()}
        return [{"params": [p for p in self.parameters() if id(p) not in mine]},
                {"params": list(self.classifier.net.parameters()), "lr_scale": self.classifier_lr_scale}]

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        """The posterior mean, what evaluation scores."""
        return self.vae.encoder(x)

    def assignment(self) -> np.ndarray:
        """The learned grouping of latent dimensions into variables (-1: psi_0)."""
        return self.prior.assignment()
