"""CRL-TAC (paper 002): contrastive learning with a trainable augmentation channel P(T|X) over a grid of crops.

Each training step has two phases (the trainer runs them in turn, one optimiser step each, as the paper's
Algorithm 1 alternates): the *encoder* phase draws m crops per image from P(T|X) and minimises the multi-view
InfoNCE bound below; the *channel* phase draws m crops uniformly, evaluates objective (2) (by default; or that
bound) with the crops weighted by P(T|X) (encoder frozen; every image, the anchor's own included, weighs the same
in the denominator, as in the paper's eq. (19)) and subtracts lambda * H(T|X). With the channel frozen
at its uniform start (``train_channel=False``) this is the SimCLR baseline of the paper, the same code.

The choices the paper leaves open are hyperparameters whose defaults are the behaviour before they existed (the
levers of the issue "CRL-TAC goes the wrong way with training"): the channel's optimiser and rate
(``crl_tac_optim``), how often it steps, its start (``crl_tac_start``; the start on the digit only as a named
control), entropy annealing, 1-channel [0, 1] input (``crl_tac_input``) and objective (2) over all crops
(``crl_tac_exact``).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

import torch
from torch import nn
from torch.nn import functional as F

from ident3d.causal.errors import UserError
from ident3d.training.channel import ChannelNet, crop_grid, cut, sample_crops
from ident3d.training.encoder_base import Encoder
from ident3d.training.hparams import Count, NonNegative, Positive, Range
from ident3d.training.losses.crl_tac_exact import all_crops_loss
from ident3d.training.objective_parts.base import Objective
from ident3d.training.objective_parts.crl_tac_input import UnitGray, one_input_channel
from ident3d.training.objective_parts.crl_tac_optim import OwnOptimiser
from ident3d.training.objective_parts.crl_tac_start import init_last_layer, ink_crops, shaped_log_probs
from ident3d.training.registry import OBJECTIVES

CROPS_PER_PASS = 1024  # crops encoded at once when a representation averages over every crop of an image


def weighted_views_nce(z: torch.Tensor, log_weights: torch.Tensor | None, beta: float,
                       jensen: bool = True, anchor_in_denominator: bool = False) -> torch.Tensor:
    """The Jensen bound of paper 002's objective (2) as a loss, for m >= 2 unit-norm views per image z (B, m, D).

    Views of image i carry weights w_ij = exp(log_weights) (None: all 1), rescaled to mean 1 per image
    (self-normalised importance weights of crops drawn uniformly, so uniform weights give the unweighted loss;
    taken as logs so a vanishing probability stays finite). For view a = (i, j):
    pos_a = sum_{j' != j} w_ij' beta <z_a, z_ij'> / sum_{j' != j} w_ij' and
    neg_a = log sum_{b != a} w_b exp(beta <z_a, z_b>) over all other views of the batch;
    loss = sum_a w_a (neg_a - pos_a) / (B m). With m = 2 and no weights it is SimCLR's NT-Xent at tau = 1 / beta.
    ``jensen=False`` takes objective (2) itself: pos_a = log of the weighted mean of exp(beta <z_a, z_ij'>).
    ``anchor_in_denominator`` sums neg_a over every view b, a included: the paper's eq. (19), a mean over all
    images of the batch with each image's draws, so every image weighs m there whatever its weights. Without it a
    view's own weight w_a takes m - w_a off its image's share, and concentrating an image's weight on one view
    lowers the loss even when every view is encoded alike (log(B m - 1) -> log((B - 1) m)): what the channel phase
    must not be rewarded for.
    """
    b, m, _ = z.shape
    if m < 2:
        raise ValueError(f"need at least 2 views per image, got {m}")
    if log_weights is None:
        log_w = torch.zeros(b * m, device=z.device)
    else:
        lw = log_weights.float()
        log_w = (lw - torch.logsumexp(lw, dim=1, keepdim=True) + math.log(m)).reshape(-1)
    w = log_w.exp()
    flat = z.float().reshape(b * m, -1)
    s = beta * flat @ flat.T
    image = torch.arange(b, device=z.device).repeat_interleave(m)
    eye = torch.eye(b * m, dtype=torch.bool, device=z.device)
    same = (image.unsqueeze(0) == image.unsqueeze(1)) & ~eye  # the other views of the same image
    pos_w = w.unsqueeze(0) * same
    if jensen:
        pos = (pos_w * s).sum(dim=1) / pos_w.sum(dim=1).clamp_min(1e-30)
    else:
        pos = torch.logsumexp((s + log_w.unsqueeze(0)).masked_fill(~same, float("-inf")), dim=1) - torch.log(
            pos_w.sum(dim=1).clamp_min(1e-30))
    shown = s + log_w.unsqueeze(0)
    neg = torch.logsumexp(shown if anchor_in_denominator else shown.masked_fill(eye, float("-inf")), dim=1)
    return (w * (neg - pos)).sum() / (b * m)


def annealed(step: int, start: float | None, end: float, steps: int) -> float:
    """A weight moved linearly from ``start`` at step 0 to ``end`` at step ``steps`` and kept there (``start``
    None: ``end`` throughout)."""
    if start is None:
        return end
    return start + (end - start) * min(1.0, step / steps)


def channel_entropy(log_probs: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of H(T|X=x) = -sum_t P(t|x) log P(t|x), in nats, from log-probabilities (B, T)."""
    p = log_probs.exp()
    return -(p * log_probs.masked_fill(p == 0, 0.0)).sum(dim=1).mean()


@OBJECTIVES.register("crl_tac")
class CRLTAC(Objective):
    """CRL-TAC (paper 002): an encoder trained with crops drawn from a learned P(T|X), alternating with the channel.

    Hyperparameters:
        beta: similarity scale (inverse temperature) on unit-norm outputs (default 0.5, the paper's).
        m: crops drawn per image in each phase (default 8, the paper's; 2 with a frozen channel is SimCLR).
        entropy_weight: lambda of the channel's entropy bonus H(T|X) (default 0.0025, the paper's).
        train_channel: false freezes P(T|X) at uniform: the paper's SimCLR baseline (default true).
        crop, stride: the crop grid in px (default: the paper's 20 px at stride 4 on 84 px, scaled to the image).
        top: crops of highest P(T|X) averaged by the "top-n" representation (default 8, the paper's).
        channel_bound: the channel phase's objective: "exact" (objective (2) itself, a log-mean-exp over the
            other views of the image; default) or "jensen" (the lower bound the encoder phase uses). On the
            canvas, exact gave the channel more mass on the digit and f higher accuracy
            (results/archive/crl_tac_canvas*, made before the channel phase counted the anchor in its denominator;
            results/crl_tac_mnist5k after).
        channel_net: P(T|X)'s network, "fast" (default) or "paper" (Fig. 5 as drawn;
        ``ident3d.training.channel.ChannelNet``).
        channel_anchor: count the anchor view in the channel phase's denominator, as the paper's eq. (19) does
            (default true; false is the code before that fix, an ablation of results/crl_tac_mnist5k).
        channel_warmup: hold the channel at its start for this many first steps (default 0).
        channel_draws: uniform crops per image in the channel phase (default: m).
    The levers (each default is the behaviour before it existed):
        channel_optimizer, channel_lr: the channel's own optimiser, "adam" or "sgd" (plain p - lr * grad), at its
            own constant rate channel_lr (default: none, the channel is in the trainer's Adam at the shared rate and
            schedule; "sgd" needs channel_lr). ``ident3d.training.objective_parts.crl_tac_optim``.
        encoder_steps_per_channel_step: the channel steps once per this many steps, after the encoder's (default 1:
            every step); on the other steps its phase moves nothing (no gradient, no optimiser moment).
        channel_init: "uniform" (default: the zero last layer), "random" (its weights and bias N(0,
            channel_init_std^2)) or "control_digit", a CONTROL, not a reproduction: control_nats (default 5) added to
            the logits of every crop holding ink, so P(T|X) starts on the digit (and keeps that offset).
        channel_temperature: P(T|X) = softmax(logits / T) (default 1).
        entropy_start, entropy_anneal_steps: lambda moves linearly from entropy_start at step 0 to entropy_weight at
            step entropy_anneal_steps (default: no annealing).
        input_format: "normalised" (default: 3 channels standardised with the store's statistics) or "gray01"
            (1 channel in [0, 1], as the paper feeds MNIST; both networks' first convolutions take 1 channel).
            ``ident3d.training.objective_parts.crl_tac_input``.
        channel_crops: "sampled" (default: objective (2) estimated from channel_draws uniform crops per image) or
            "all" (objective (2), or its Jensen bound with channel_bound jensen, over every crop of every image of
            the batch, the anchor in the denominator as eq. (19); ``crl_tac_exact``). channel_bound exact is
            objective (2) on the sampled crops, not this.
    Needs ``--views learned_crop``; the encoder sees crops (e.g. ``--encoder tac_cnn --out-dim 50``), the
    representation of an image is E_{P(T|X)}[h(T(X))] over every crop, normalised (``features``: E[f(T(X))]).
    """

    view_maker: ClassVar[str] = "learned_crop"

    def __init__(self, encoder: nn.Module, *, beta: Positive = 0.5, m: Annotated[int, Range(ge=2)] = 8,
                 entropy_weight: NonNegative = 0.0025, train_channel: bool = True, crop: Count | None = None,
                 stride: Count | None = None, top: Count = 8, channel_bound: Literal["jensen", "exact"] = "exact",
                 channel_net: Literal["fast", "paper"] = "fast", channel_anchor: bool = True,
                 channel_warmup: Annotated[int, Range(ge=0)] = 0,
                 channel_draws: Annotated[int, Range(ge=2)] | None = None,
                 channel_optimizer: Literal["adam", "sgd"] = "adam", channel_lr: Positive | None = None,
                 encoder_steps_per_channel_step: Count = 1,
                 channel_init: Literal["uniform", "random", "control_digit"] = "uniform",
                 channel_init_std: NonNegative = 0.01, control_nats: Positive = 5.0,
                 channel_temperature: Positive = 1.0, entropy_start: NonNegative | None = None,
                 entropy_anneal_steps: Annotated[int, Range(ge=0)] = 0,
                 input_format: Literal["normalised", "gray01"] = "normalised",
                 channel_crops: Literal["sampled", "all"] = "sampled"):
        super().__init__(encoder)
        if channel_optimizer == "sgd" and channel_lr is None:
            raise UserError("crl_tac: channel_optimizer sgd needs its own rate, channel_lr")
        if entropy_start is not None and entropy_anneal_steps == 0:
            raise UserError("crl_tac: entropy_start needs entropy_anneal_steps >= 1 (the steps to reach "
                            "entropy_weight)")
        self.jensen = channel_bound == "jensen"
        if not isinstance(encoder, Encoder) or not encoder.image_size:
            raise UserError("crl_tac needs an image encoder (e.g. --encoder tac_cnn)")
        self.grid = crop_grid(int(encoder.image_size), crop, stride)
        self.beta, self.m, self.entropy_weight, self.top = float(beta), m, float(entropy_weight), max(1, int(top))
        self.train_channel = bool(train_channel)
        self.channel = ChannelNet(self.grid.n, layout=channel_net, image_size=int(encoder.image_size))
        init_last_layer(self.channel, channel_init, float(channel_init_std))
        if input_format == "gray01":
            self.gray = UnitGray()
            one_input_channel(self.encoder)
            one_input_channel(self.channel)
        self.channel.requires_grad_(self.train_channel)
        self.phases = ("encoder", "channel") if self.train_channel else ("encoder",)
        self.anchor, self.warmup = bool(channel_anchor), int(channel_warmup)
        self.draws = m if channel_draws is None else int(channel_draws)  # crops per image in the channel phase
        self.draws_per_image = m + self.draws  # uniforms the view maker supplies: m, then the channel phase's
        self.every = int(encoder_steps_per_channel_step)
        self.control = float(control_nats) if channel_init == "control_digit" else None
        self.temperature = float(channel_temperature)
        self.shaped = self.control is not None or self.temperature != 1.0  # else P(T|X) is the network's own
        self.entropy_start = None if entropy_start is None else float(entropy_start)
        self.anneal_steps = int(entropy_anneal_steps)
        self.all_crops = channel_crops == "all"
        if self.train_channel and channel_lr is not None:  # left out of the trainer's Adam (``param_groups``)
            self.channel_optimiser = OwnOptimiser(self.channel.parameters(), channel_optimizer, channel_lr)

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        """The input both networks see: the standardised images, or with input_format gray01 1 channel in [0, 1]."""
        return self.gray(x) if hasattr(self, "gray") else x

    def set_input_normalisation(self, mean: list[float], std: list[float]) -> None:
        """The store's statistics the view maker standardises with (``learned_crop``'s ``bind``): kept, with the
        weights, where input_format gray01 undoes them; nothing otherwise."""
        if hasattr(self, "gray"):
            self.gray.set_normalisation(mean, std)

    def log_probs(self, x: torch.Tensor) -> torch.Tensor:
        """log P(T|X) (B, T) of prepared images: the channel network's, or shaped by the control start's prior on
        crops with ink and the temperature."""
        if not self.shaped:
            return self.channel(x)
        prior = self.control * ink_crops(x, self.grid) if self.control is not None else None
        return shaped_log_probs(self.channel.net(x), prior, self.temperature)

    def entropy_weight_at(self, step: int) -> float:
        """lambda at ``step`` (annealed from entropy_start when given)."""
        return annealed(step, self.entropy_start, self.entropy_weight, self.anneal_steps)

    def param_groups(self) -> list[dict[str, Any]]:
        """Every parameter in the trainer's optimiser, but a channel on its own optimiser."""
        if not hasattr(self, "channel_optimiser"):
            return super().param_groups()
        own = {id(p) for p in self.channel.parameters()}
        return [{"params": [p for p in self.parameters() if id(p) not in own]}]

    @torch.no_grad()
    def after_step(self, step: int, total_steps: int) -> None:
        """Step a channel on its own optimiser (the channel phase, the last, has left its gradients)."""
        if hasattr(self, "channel_optimiser"):
            self.channel_optimiser.step()

    def embed(self, crops: torch.Tensor) -> torch.Tensor:
        """h(T(X)) on the unit sphere, for a batch of crops (the same path as evaluation's ``crop_outputs``)."""
        return self.embed_features(self.encoder.features(crops))

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1,
                phase: str = "encoder") -> dict[str, torch.Tensor]:
        """One phase's loss from [whole images (B, C, H, W), uniforms (B, m + channel_draws)]
        (``ident3d.training.views.learned_crop``)."""
        x, u = views
        x = self.prepare(x)
        b = x.shape[0]
        if phase == "encoder":
            with torch.no_grad():
                log_p = self.log_probs(x)
                idx = sample_crops(log_p.exp(), u[:, :self.m])
            z = self.embed(cut(x, idx, self.grid)).view(b, self.m, -1)
            pos_sim = (z[:, 0] * z[:, 1]).sum(dim=1).mean()
            return {"loss": weighted_views_nce(z, None, self.beta), "pos_sim": pos_sim.detach(),
                    "channel_entropy": channel_entropy(log_p), "channel_max": log_p.exp().max(dim=1).values.mean()}
        if phase != "channel":
            raise ValueError(f"unknown phase {phase!r}")
        log_p = self.log_probs(x)
        if step < self.warmup:  # the channel is held at its start for the first channel_warmup steps
            return {"loss": 0.0 * log_p.sum(), "bound": log_p.new_zeros(()), "entropy": channel_entropy(log_p).detach()}
        if (step + 1) % self.every:  # not a channel step: a loss that reaches no parameter, so nothing moves
            return {"loss": torch.zeros((), device=x.device, requires_grad=True), "bound": log_p.new_zeros(()),
                    "entropy": channel_entropy(log_p).detach()}
        entropy = channel_entropy(log_p)
        if self.all_crops:
            with torch.no_grad():
                _, h = self._crop_outputs(x)
            bound = all_crops_loss(h, log_p, self.beta, jensen=self.jensen)
        else:
            idx = (u[:, self.m:] * self.grid.n).long().clamp_(max=self.grid.n - 1)
            with torch.no_grad():
                z = self.embed(cut(x, idx, self.grid)).view(b, self.draws, -1)
            bound = weighted_views_nce(z, log_p.gather(1, idx), self.beta, jensen=self.jensen,
                                       anchor_in_denominator=self.anchor)
        loss = bound - self.entropy_weight_at(step) * entropy
        return {"loss": loss, "bound": bound.detach(), "entropy": entropy.detach()}

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """P(T|X) (B, T) over the crop grid."""
        return self.log_probs(self.prepare(x)).exp()

    def crop_outputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(f, h) of every crop of every image: (B, T, F) inner features and (B, T, D) unit-norm outputs."""
        return self._crop_outputs(self.prepare(x))

    def _crop_outputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``crop_outputs`` of prepared images."""
        t = self.grid.n
        per = max(1, CROPS_PER_PASS // t)
        fs, hs = [], []
        for i in range(0, x.shape[0], per):
            xi = x[i:i + per]
            idx = torch.arange(t, device=x.device).expand(xi.shape[0], t)
            f = self.encoder.features(cut(xi, idx, self.grid))
            hs.append(self.embed_features(f).view(xi.shape[0], t, -1))
            fs.append(f.float().view(xi.shape[0], t, -1))
        return torch.cat(fs), torch.cat(hs)

    def embed_features(self, f: torch.Tensor) -> torch.Tensor:
        """h from the encoder's inner features (its head, then the sphere)."""
        return F.normalize(self.encoder.head(f).float(), dim=1)

    def representations(self, x: torch.Tensor, probs: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Paper 002's test-time representations: E_P[h(T(X))] normalised ("output") and E_P[f(T(X))] ("inner"),
        and with a trained channel the plain average over the ``top`` most probable crops ("*_top"). ``probs``
        (B, T) replaces the channel's P(T|X), e.g. by the paper's oracle."""
        p = self.probabilities(x) if probs is None else probs.to(x.device, torch.float32)
        f, h = self.crop_outputs(x)
        return self.average_crops(p, f, h, top=self.train_channel and probs is None)

    def average_crops(self, p: torch.Tensor, f: torch.Tensor, h: torch.Tensor,
                      top: bool = False) -> dict[str, torch.Tensor]:
        """``representations`` from crop outputs (f, h) already computed and weights p (B, T), so one encoding
        pass serves several channels (the trained one, the oracle)."""
        out = {"inner": torch.einsum("bt,btf->bf", p, f),
               "output": F.normalize(torch.einsum("bt,btd->bd", p, h), dim=1)}
        if top:
            best = p.topk(min(self.top, p.shape[1]), dim=1).indices
            out["inner_top"] = f.gather(1, best.unsqueeze(-1).expand(-1, -1, f.shape[2])).mean(dim=1)
            out["output_top"] = F.normalize(h.gather(1, best.unsqueeze(-1).expand(-1, -1, h.shape[2])).mean(dim=1),
                                            dim=1)
        return out

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        """E_{P(T|X)}[h(T(X))], normalised: what evaluation encodes as the output."""
        return self.representations(x)["output"]

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """E_{P(T|X)}[f(T(X))]: the inner layer averaged over the channel."""
        return self.representations(x)["inner"]
