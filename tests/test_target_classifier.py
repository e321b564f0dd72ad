"""CITRIS's target classifier against a plain per-(sample, set, variable) loop of its rules, its exact target
statistics against counts, its EMA copy, where its gradients go, and the classifier's own learning rate."""

from __future__ import annotations

import math

import numpy as np
import torch

from ident3d.training.encoders import build_encoder
from ident3d.training.temporal.citris_vae import CitrisVAE
from ident3d.training.temporal.target_classifier import EMA_MOMENTUM, TargetClassifier

M, K, B = 6, 3, 5


def _bce(logit: float, y: float) -> float:
    p = 1.0 / (1.0 + math.exp(-logit))
    return -(y * math.log(p) + (1 - y) * math.log(1 - p))


def _setup(seed: int = 0) -> tuple[TargetClassifier, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    clf = TargetClassifier(M, K, hidden=8)
    for p in clf.net.parameters():
        torch.nn.init.normal_(p, std=0.5)
    clf.ema.load_state_dict(clf.net.state_dict())
    z_t, z_t1 = torch.randn(B, M), torch.randn(B, M)
    targets = (torch.rand(B, K) < 0.5).float()
    assignment = torch.nn.functional.one_hot(torch.randint(0, K + 1, (B, M)), K + 1).float()
    return clf, z_t, z_t1, targets, assignment


def _plain_losses(net: torch.nn.Module, z_t, z_t1, targets, assignment, seen: np.ndarray) -> tuple[float, float]:
    """Both losses by the rules in a loop; ``seen`` is every target vector counted so far (this batch included)."""
    n_sets = K + 2
    marg = seen.mean(0)
    model_terms, latent_terms = [], []
    for b in range(B):
        for s in range(n_sets):
            mask = assignment[b, :, s] if s <= K else torch.ones(M)
            with torch.no_grad():
                logits = net(torch.cat([z_t[b], z_t1[b] * mask, mask]))
            for k in range(K):
                y = float(targets[b, k])
                model_terms.append(_bce(float(logits[k]), y))
                if s == k or s == K + 1:
                    label, w = y, K
                elif s < K:  # p(I_k = 1 | I_s = observed), counted
                    rows = seen[seen[:, s] == targets[b, s].item()]
                    label, w = rows[:, k].mean(), 1
                else:  # psi_0
                    label, w = marg[k], 1
                latent_terms.append(w * _bce(float(logits[k]), float(label)))
    return n_sets * float(np.mean(model_terms)), n_sets * float(np.mean(latent_terms))


def test_losses_match_a_plain_loop_of_the_rules():
    clf, z_t, z_t1, targets, assignment = _setup()
    history = (torch.rand(40, K) < 0.3).float()
    clf.observe(history)
    loss_model, loss_z = clf(z_t, z_t1, targets, assignment)
    seen = torch.cat([history, targets]).numpy()
    want_model, want_z = _plain_losses(clf.net, z_t, z_t1, targets, assignment, seen)
    assert np.isclose(loss_model.item(), want_model, rtol=1e-5)
    assert np.isclose(loss_z.item(), want_z, rtol=1e-5)
    # the rules matter: the same inputs labelled with the true targets everywhere give another value
    assert abs(want_z - loss_model.item()) > 1e-3


def test_statistics_are_exact_counts():
    clf = TargetClassifier(M, K)
    cond, marg = clf.statistics()
    assert torch.all(cond == 0.5) and torch.all(marg == 0.5)
    rng = np.random.default_rng(1)
    seen = (rng.random((300, K)) < [0.2, 0.5, 0.7]).astype(np.float32)
    seen[:, 2] = np.maximum(seen[:, 2], seen[:, 0])  # a dependence to find: I_0 = 1 forces I_2 = 1
    for part in np.split(seen, 3):
        clf.observe(torch.from_numpy(part))
    cond, marg = clf.statistics()
    assert np.allclose(marg.numpy(), seen.mean(0))
    for s in range(K):
        for k in range(K):
            for v in (0, 1):
                assert np.isclose(float(cond[s, k, v]), seen[seen[:, s] == v, k].mean(), atol=1e-6)
    assert float(cond[0, 2, 1]) == 1.0


def test_ema_moves_by_its_momentum_and_takes_no_gradient():
    clf, z_t, z_t1, targets, assignment = _setup()
    before = [p.clone() for p in clf.ema.parameters()]
    with torch.no_grad():
        for p in clf.net.parameters():
            p.add_(1.0)
    clf.observe(targets)
    for p_ema, p_old, p in zip(clf.ema.parameters(), before, clf.net.parameters(), strict=True):
        assert torch.allclose(p_ema, EMA_MOMENTUM * p_old + (1 - EMA_MOMENTUM) * p)
    z_t.requires_grad_(True)
    z_t1.requires_grad_(True)
    assignment.requires_grad_(True)
    loss_model, loss_z = clf(z_t, z_t1, targets, assignment)
    loss_z.backward()
    assert all(p.grad is None for p in clf.net.parameters())  # the latents' loss moves the latents only
    assert z_t1.grad.abs().sum() > 0 and assignment.grad.abs().sum() > 0
    z_t1.grad = None
    loss_model.backward()
    assert z_t1.grad is None and all(p.grad is not None for p in clf.net.parameters())


def test_citris_vae_classifier_reaches_the_assignment_and_learns_faster():
    torch.manual_seed(0)
    enc = build_encoder("mlp", out_dim=M, image_size=0, in_dim=5, hidden=[16])
    model = CitrisVAE(enc, K, beta=0.0, beta_classifier=2.0, classifier_lr_scale=4.0)  # beta 0: no KL gradient
    for p in model.classifier.net.parameters():  # its last layer starts at zero: no gradient to the latents yet
        torch.nn.init.normal_(p, std=0.5)
    model.classifier.ema.load_state_dict(model.classifier.net.state_dict())
    x_t, x_t1, targets = torch.randn(8, 5), torch.randn(8, 5), (torch.rand(8, K) < 0.5).float()
    out = model.loss(x_t, x_t1, targets)
    assert {"classifier", "classifier_latents"} <= set(out)
    out["loss"].backward()
    assert model.prior.assign_logits.grad.abs().sum() > 0  # through the straight-through Gumbel draw
    groups = model.param_groups()
    ids = [id(p) for g in groups for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters() if p.requires_grad)
    assert groups[1]["lr_scale"] == 4.0 and {id(p) for p in groups[1]["params"]} == {
        id(p) for p in model.classifier.net.parameters()}
    off = CitrisVAE(build_encoder("mlp", out_dim=M, image_size=0, in_dim=5, hidden=[16]), K, beta=0.0)
    out = off.loss(x_t, x_t1, targets)
    out["loss"].backward()
    assert off.classifier is None and "classifier" not in out
    assert off.prior.assign_logits.grad is None or off.prior.assign_logits.grad.abs().sum() == 0
