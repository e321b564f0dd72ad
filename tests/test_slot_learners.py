"""The object-centric learners of issue 35 §3: Slot Attention (one iteration against a plain numpy Algorithm 1 of
Locatello et al. 2020, permutation equivariance), the additive autoencoder's decoder (a sum of single-slot
decodings), and both objectives trained and encoded through ``ident3d train`` on a real 32 px multi3dident store
(rendered by the real renderer in a few seconds), including the untrained baseline run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import zarr
from helpers import run_cli

from ident3d.evaluation.encode import encode_store
from ident3d.evaluation.object_metrics import fg_ari
from ident3d.store.info import store_info
from ident3d.training.encoders import build_encoder
from ident3d.training.objectives import OBJECTIVES
from ident3d.training.parts import check_components
from ident3d.training.run_dir import RunDir
from ident3d.training.slot_attention import SlotAttention

SIZE = 32
SLOT_OBJECTIVES = ("slot_attention", "additive_ae")


# ----- Slot Attention against Algorithm 1 -------------------------------------------------------------------------
def np_layer_norm(x: np.ndarray, norm: torch.nn.LayerNorm) -> np.ndarray:
    """LayerNorm over the last axis (population variance), then the module's scale and shift."""
    w, b = norm.weight.detach().numpy(), norm.bias.detach().numpy()
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + norm.eps) * w + b


def np_gru(x: np.ndarray, h: np.ndarray, gru: torch.nn.GRUCell) -> np.ndarray:
    """The GRU cell (Cho et al. 2014) with the reset gate on the hidden state's linear map, as torch lays out its
    weights (reset, update, new)."""
    w_i, w_h = gru.weight_ih.detach().numpy(), gru.weight_hh.detach().numpy()
    b_i, b_h = gru.bias_ih.detach().numpy(), gru.bias_hh.detach().numpy()
    gi, gh = x @ w_i.T + b_i, h @ w_h.T + b_h
    d = h.shape[-1]
    sig = lambda a: 1.0 / (1.0 + np.exp(-a))  # noqa: E731
    r, z = sig(gi[:, :d] + gh[:, :d]), sig(gi[:, d:2 * d] + gh[:, d:2 * d])
    n = np.tanh(gi[:, 2 * d:] + r * gh[:, 2 * d:])
    return (1.0 - z) * n + z * h


def np_slot_attention(sa: SlotAttention, inputs: np.ndarray, slots: np.ndarray, iterations: int,
                      softmax_axis: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1, one image at a time, in numpy: (slots (B, K, D), last attention (B, N, K)). ``softmax_axis`` 1
    normalises over the slots (the paper); 0, over the inputs (a wrong variant, to show the test can fail)."""
    wq, wk, wv = (lin.weight.detach().numpy() for lin in (sa.to_q, sa.to_k, sa.to_v))
    m1, m2 = sa.mlp[0], sa.mlp[2]
    out_slots, out_attn = [], []
    for x, s in zip(inputs, slots, strict=True):
        x = np_layer_norm(x, sa.norm_inputs)
        k, v = x @ wk.T, x @ wv.T
        for _ in range(iterations):
            previous = s
            q = np_layer_norm(s, sa.norm_slots) @ wq.T
            logits = k @ q.T / math.sqrt(s.shape[1])  # (N, K)
            e = np.exp(logits - logits.max(axis=softmax_axis, keepdims=True))
            attn = e / e.sum(axis=softmax_axis, keepdims=True)
            w = (attn + 1e-8) / (attn + 1e-8).sum(axis=0, keepdims=True)
            s = np_gru(w.T @ v, previous, sa.gru)
            hidden = np.maximum(np_layer_norm(s, sa.norm_mlp) @ m1.weight.detach().numpy().T + m1.bias.detach().numpy(),
                                0.0)
            s = s + hidden @ m2.weight.detach().numpy().T + m2.bias.detach().numpy()
        out_slots.append(s)
        out_attn.append(attn)
    return np.stack(out_slots), np.stack(out_attn)


def slot_module(iterations: int) -> SlotAttention:
    """A small float64 Slot Attention with non-trivial LayerNorm scales and shifts."""
    torch.manual_seed(0)
    sa = SlotAttention(in_dim=6, n_slots=3, slot_dim=4, iterations=iterations, mlp_hidden=8).double()
    with torch.no_grad():
        for norm in (sa.norm_inputs, sa.norm_slots, sa.norm_mlp):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.normal_(0.0, 0.3)
    return sa


@pytest.mark.parametrize("iterations", [1, 3])
def test_slot_attention_matches_a_plain_numpy_algorithm_1(iterations):
    sa = slot_module(iterations)
    rng = np.random.default_rng(1)
    inputs, init = rng.normal(size=(2, 10, 6)), rng.normal(size=(2, 3, 4))
    with torch.no_grad():
        slots, attn = sa(torch.from_numpy(inputs), torch.from_numpy(init))
    want_slots, want_attn = np_slot_attention(sa, inputs, init, iterations)
    np.testing.assert_allclose(slots.numpy(), want_slots, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(attn.numpy(), want_attn, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(attn.sum(-1).numpy(), 1.0)  # each input's attention is a distribution over slots
    wrong, _ = np_slot_attention(sa, inputs, init, iterations, softmax_axis=0)  # normalised over the inputs instead
    assert np.abs(wrong - want_slots).max() > 1e-3


def test_permuting_the_initial_slots_permutes_the_slots_and_their_attention():
    sa = slot_module(3)
    torch.manual_seed(2)
    inputs, init = torch.randn(2, 10, 6, dtype=torch.float64), torch.randn(2, 3, 4, dtype=torch.float64)
    perm = torch.tensor([2, 0, 1])
    with torch.no_grad():
        slots, attn = sa(inputs, init)
        p_slots, p_attn = sa(inputs, init[:, perm])
        other, _ = sa(inputs, init + 0.5 * torch.randn_like(init))
    torch.testing.assert_close(p_slots, slots[:, perm], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(p_attn, attn[:, :, perm], rtol=1e-10, atol=1e-12)
    assert (other - slots).abs().max() > 1e-3  # other initial slots do give other slots


def test_initial_slots_come_from_the_learned_gaussian():
    sa = slot_module(1)
    with torch.no_grad():
        sa.mu.fill_(2.0)
        sa.log_sigma.fill_(math.log(0.5))
    draws = sa.initial_slots(4000, torch.Generator().manual_seed(0)).detach()
    assert draws.mean().item() == pytest.approx(2.0, abs=0.01) and draws.std().item() == pytest.approx(0.5, abs=0.01)
    again = sa.initial_slots(4000, torch.Generator().manual_seed(0)).detach()
    assert torch.equal(draws, again)


# ----- the additive decoder ----------------------------------------------------------------------------------------
def small(name: str, size: int = 16, **hp) -> torch.nn.Module:
    """A small objective on ``size`` px images, float64, in eval mode."""
    torch.manual_seed(0)
    encoder = build_encoder("slot_cnn", 4, size, width=8, strides=[2, 1])
    return OBJECTIVES.get(name)(encoder, n_slots=3, slot_dim=5, decoder_width=8, **hp).double().eval()


def test_the_additive_decoder_is_the_sum_of_single_slot_decodings():
    model = small("additive_ae")
    torch.manual_seed(3)
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        parts = model.decompose(x)
        z = parts["slots"]
        alone = [model.decoder(z[:, k]) for k in range(3)]  # each slot decoded in its own call
        assert z.shape == (2, 3, 5) and parts["recon"].shape == x.shape
        torch.testing.assert_close(parts["recon"], sum(alone), rtol=1e-12, atol=1e-12)
        # the contribution magnitude is each single decoding's L2 norm over RGB
        torch.testing.assert_close(parts["masks"], torch.stack([a.norm(dim=1) for a in alone], 1))
        # changing one slot changes the reconstruction by that slot's decodings' difference only
        z2 = z.clone()
        z2[:, 1] += torch.randn(2, 5, dtype=torch.float64)
        delta = model.decode_slots(z2).sum(1) - model.decode_slots(z).sum(1)
        torch.testing.assert_close(delta, model.decoder(z2[:, 1]) - model.decoder(z[:, 1]), rtol=1e-10, atol=1e-12)


def test_slot_attention_compositing_is_not_additive():
    """The same check fails for the alpha-composited decoder (a slot's alpha takes weight from the others), so
    passing it above says something."""
    model = small("slot_attention")
    torch.manual_seed(3)
    z = torch.randn(2, 3, 5, dtype=torch.float64)

    def composite(slots: torch.Tensor) -> torch.Tensor:
        out = model.decoder(slots.flatten(0, 1)).unflatten(0, slots.shape[:2])
        return (torch.softmax(out[:, :, 3], 1).unsqueeze(2) * out[:, :, :3]).sum(1)

    with torch.no_grad():
        z2 = z.clone()
        z2[:, 1] += torch.randn(2, 5, dtype=torch.float64)
        delta = composite(z2) - composite(z)
        alone = model.decoder(z2[:, 1])[:, :3] - model.decoder(z[:, 1])[:, :3]
        assert (delta - alone).abs().max() > 1e-3


def test_slot_masks_are_the_argmax_slot_as_floats_and_encoding_is_deterministic():
    for name in SLOT_OBJECTIVES:
        model = small(name)
        x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
        with torch.no_grad():
            rep, again = model.representations(x), model.representations(x)
            parts = model.decompose(x, torch.Generator().manual_seed(0))
        assert rep["slots"].shape == (2, 3, 5) and rep["output"].shape == (2, 15) and rep["inner"].shape == (2, 8)
        assert rep["slot_masks"].is_floating_point() and rep["slot_masks"].shape == (2, 16, 16)
        assert torch.equal(rep["slot_masks"], parts["masks"].argmax(1).double())
        assert all(torch.equal(rep[k], again[k]) for k in rep), name


# ----- training and encoding through ident3d train -----------------------------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """48 real 32 px multi3dident images (2-4 objects each) with their masks: about 3 s with Blender."""
    from ident3d.render import render_store

    out = tmp_path_factory.mktemp("slots") / "m32.zarr"
    assert render_store(out, scene="multi3dident", scm="multi3dident_independent", n=48, chunk_size=16, seed=0,
                        settings={"resolution": SIZE, "samples": 4}, workers=1, progress=False).ok
    return out


# a small model that learns in seconds: 16 x 16 feature positions, 3 slots of 8
TRAIN = ["--encoder", "slot_cnn", "--encoder-arg", "width=16", "strides=[2,1]", "--batch-size", "8", "--seed", "0",
         "--no-progress", "--hp", "n_slots=3", "slot_dim=8", "decoder_width=16"]


def train(store, out, objective: str, steps: int, lr: str) -> RunDir:
    """A run of ``objective`` on the store through the command line."""
    r = run_cli("train", "--data", store, "--out", out, "--objective", objective, "--steps", str(steps), "--lr", lr,
                *TRAIN)
    assert r.returncode == 0, r.stderr
    return RunDir(out)


def images(store) -> torch.Tensor:
    """The store's images as floats in [0, 1] (B, 3, H, W); ``recon_mse`` normalises them as a run does."""
    from ident3d.training.views import to_float

    return to_float(torch.from_numpy(zarr.open_group(str(store), mode="r")["images"][:]))


def recon_mse(run: RunDir, x: torch.Tensor) -> tuple[float, float]:
    """The run's reconstruction MSE on images ``x`` (normalised with the run's statistics), and the MSE when each
    image is compared with the next image's reconstruction (a shuffled pairing: what a model that reconstructs
    nothing of the image itself, e.g. the mean image, also scores)."""
    loaded = run.load()
    objective, xn = loaded.objective(image_size=SIZE), loaded.normalize()(x)
    rec = objective.reconstruct(xn)
    return float((rec - xn).pow(2).mean()), float((rec.roll(1, dims=0) - xn).pow(2).mean())


@pytest.mark.parametrize("objective", SLOT_OBJECTIVES)
def test_training_lowers_the_reconstruction_error_and_the_untrained_run_encodes(store, tmp_path, objective):
    untrained = train(store, tmp_path / "untrained", objective, 1, "1e-30")  # one step that moves no weight
    trained = train(store, tmp_path / "trained", objective, 60, "2e-3")
    loaded = untrained.load()
    torch.manual_seed(0)  # the trainer's initialisation, rebuilt: the untrained run holds exactly these weights
    _, fresh = check_components(loaded.cfg, image_size=SIZE)
    saved = loaded.state["model"]
    assert max(float((saved[k] - v).abs().max()) for k, v in fresh.state_dict().items()) < 1e-20

    x = images(store)
    (before, _), (after, shuffled) = recon_mse(untrained, x), recon_mse(trained, x)
    # measured (seed 0): slot_attention 1.002 untrained, 0.883 trained, 1.042 shuffled pairing; additive_ae 1.032,
    # 0.798, 1.040
    assert after < 0.93 * before and after < 0.93 * shuffled, (before, after, shuffled)

    info = store_info(str(store))
    rows = np.arange(info.n)
    enc = encode_store(untrained.load(), info, rows, batch_size=20)
    assert enc["slots"].shape == (48, 3, 8) and enc["output"].shape == (48, 24) and enc["inner"].shape == (48, 16)
    masks = enc["slot_masks"]
    assert masks.shape == (48, SIZE, SIZE) and np.array_equal(masks, np.rint(masks)) and masks.max() < 3
    true = zarr.open_group(str(store), mode="r")["masks"][:]
    assert np.isfinite(fg_ari(true, masks.astype(int)))


def test_both_objectives_and_the_encoder_are_listed():
    out = run_cli("train", "--list").stdout
    for name in (*SLOT_OBJECTIVES, "slot_cnn"):
        assert any(line.split()[:1] == [name] for line in out.splitlines()), name


@pytest.mark.parametrize("args, says", [
    (["--objective", "slot_attention", "--hp", "n_slots=0"],
     "objective slot_attention's hyperparameter n_slots must be a whole number >= 1, got 0"),
    (["--objective", "additive_ae", "--hp", "slot_dim=0"],
     "objective additive_ae's hyperparameter slot_dim must be a whole number >= 1, got 0"),
    (["--objective", "slot_attention", "--hp", "iterations=0"],
     "objective slot_attention's hyperparameter iterations must be a whole number >= 1, got 0"),
    (["--objective", "additive_ae", "--encoder", "cnn"],
     "objective additive_ae needs --encoder slot_cnn (features per position), not cnn"),
    (["--objective", "slot_attention", "--views", "colour"],
     "objective slot_attention picks its own views: use --views none, not colour"),
    (["--objective", "slot_attention", "--constraint", "sphere"],
     "objective slot_attention: slots are unconstrained; use --constraint none"),
])
def test_bad_settings_are_refused_in_one_line_before_a_run_is_made(store, tmp_path, args, says):
    out = tmp_path / "run"
    r = run_cli("train", "--data", store, "--out", out, "--steps", "2", "--batch-size", "8", "--no-progress",
                *(["--encoder", "slot_cnn"] if "--encoder" not in args else []), *args)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0] == f"ident3d train: error: {says}"
    assert not out.exists()
