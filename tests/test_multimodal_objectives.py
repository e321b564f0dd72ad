"""The image/text learners: the text encoder, multimodal_infonce (Daunhawer et al. 2023) and clip, each loss against
a plain loop of its formula, and a short training run on toy pairs."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ident3d.training.losses.multimodal import clip_loss, two_modality_infonce
from ident3d.training.objectives import OBJECTIVES
from ident3d.training.text import Vocabulary
from ident3d.training.text_encoder import TextEncoder


class Flat(nn.Module):
    """A linear image encoder on flattened pixels, (B, 3, H, W) -> (B, out_dim)."""

    def __init__(self, pixels: int, out_dim: int):
        super().__init__()
        self.fc, self.out_dim = nn.Linear(pixels, out_dim), out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1))


def make(name: str, out_dim: int = 4, **hp) -> nn.Module:
    """A registered image/text objective on a small linear image encoder (8 px images) and a small text encoder."""
    args = {"vocabulary": Vocabulary(("<pad>", "<unk>", *"abcdefgh")).to_dict(), "max_len": 8, "text_embed": 16,
            "text_width": 4, **hp}
    return OBJECTIVES.get(name)(Flat(3 * 8 * 8, out_dim), **args)


def cos(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two vectors, by the formula."""
    return float((a * b).sum() / (a.norm() * b.norm()))


def neg_log_softmax(logits: list[float], target: int) -> float:
    """-log(exp(logits[target]) / sum_k exp(logits[k]))."""
    return -logits[target] + math.log(sum(math.exp(v) for v in logits))


def reference_infonce(z1: torch.Tensor, z2: torch.Tensor, tau: float, same_modality: bool = True) -> float:
    """The reference's symmetrised loss, by loops: the mean over both orders (a, b) = (z1, z2), (z2, z1) of the
    cross-entropy over the 2B anchors; anchor a_i scores cos(a_i, b_j) / tau for all j and, with ``same_modality``,
    cos(a_i, a_j) / tau for j != i, target b_i (and anchor b_i likewise with a and b swapped)."""
    def one_order(a: torch.Tensor, b: torch.Tensor) -> float:
        n, total = len(a), 0.0
        for first, second in ((a, b), (b, a)):
            for i in range(n):
                row = [cos(first[i], second[j]) / tau for j in range(n)]
                if same_modality:
                    row += [cos(first[i], first[j]) / tau for j in range(n) if j != i]
                total += neg_log_softmax(row, i)
        return total / (2 * n)
    return 0.5 * (one_order(z1, z2) + one_order(z2, z1))


def reference_clip(z1: torch.Tensor, z2: torch.Tensor, scale: float, both_ways: bool = True) -> float:
    """CLIP by loops: logits[i][j] = scale cos(z1_i, z2_j); the mean of the rows' cross-entropy (target i) and of the
    columns' (target j), averaged (``both_ways``) or the rows' alone."""
    n = len(z1)
    logits = [[scale * cos(z1[i], z2[j]) for j in range(n)] for i in range(n)]
    rows = sum(neg_log_softmax(logits[i], i) for i in range(n)) / n
    cols = sum(neg_log_softmax([logits[i][j] for i in range(n)], j) for j in range(n)) / n
    return 0.5 * (rows + cols) if both_ways else rows


def pairs(b: int = 6, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two float64 (b, d) encodings, the second correlated with the first."""
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(b, d, generator=g, dtype=torch.float64)
    return z1, z1 + 0.8 * torch.randn(b, d, generator=g, dtype=torch.float64)


# ---------------------------------------------------------------- text encoder


@pytest.mark.parametrize("max_len", [8, 24, 31])
def test_text_encoder_shapes(max_len):
    enc = TextEncoder(vocab_size=30, max_len=max_len, out_dim=5)
    out = enc(torch.randint(0, 30, (3, max_len)))
    assert out.shape == (3, 5)
    assert enc.fc.in_features == 100 * (max_len // 8) * 16  # 4 x 25 channels on (L // 8) x (128 // 8)


def test_text_encoder_at_the_references_lengths_flattens_100_x_3_x_16():
    assert {TextEncoder(10, n, 4).fc.in_features for n in range(24, 32)} == {4800}


def test_text_encoder_is_one_hot_tokens_through_its_linear_layer():
    enc = TextEncoder(vocab_size=12, max_len=9, out_dim=4, embed_dim=16, width=3).double().eval()
    tokens = torch.randint(0, 12, (5, 9), generator=torch.Generator().manual_seed(1))
    one_hot = F.one_hot(tokens, 12).double()
    expected = enc.fc(enc.conv(enc.embed(one_hot).unsqueeze(1)))
    assert torch.allclose(enc(tokens), expected, atol=1e-12)


def test_text_encoder_gradient_reaches_every_parameter():
    enc = TextEncoder(vocab_size=12, max_len=8, out_dim=4, embed_dim=16, width=3)
    tokens = torch.arange(12).repeat(2)[:16].view(2, 8)  # every id used
    enc(tokens).pow(2).sum().backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_text_encoder_refuses_other_inputs_and_sizes():
    enc = TextEncoder(vocab_size=12, max_len=8, out_dim=4, embed_dim=16, width=3)
    with pytest.raises(ValueError, match=r"\(B, 8\) int64"):
        enc(torch.zeros(2, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(B, 8\) int64"):
        enc(torch.zeros(2, 8))
    with pytest.raises(ValueError, match="max_len and embed_dim >= 8"):
        TextEncoder(vocab_size=12, max_len=7, out_dim=4)


# ---------------------------------------------------------------- multimodal_infonce


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_multimodal_infonce_equals_the_reference_formula(tau):
    z1, z2 = pairs()
    value = make("multimodal_infonce", tau=tau).loss([z1, z2])["loss"].item()
    assert value == pytest.approx(reference_infonce(z1, z2, tau), abs=1e-6)
    assert two_modality_infonce(z1, z2, tau).item() == pytest.approx(value, abs=1e-12)


def test_multimodal_infonce_counts_the_same_modality_negatives_and_its_temperature():
    z1, z2 = pairs()
    value = two_modality_infonce(z1, z2, 1.0).item()
    assert abs(value - reference_infonce(z1, z2, 1.0, same_modality=False)) > 1e-2
    assert abs(value - two_modality_infonce(z1, z2, 0.5).item()) > 1e-2


def test_multimodal_infonce_equals_nt_xent_of_the_two_modalities():
    from ident3d.training.objectives.infonce import nt_xent

    z1, z2 = pairs(seed=3)
    assert two_modality_infonce(z1, z2, 0.7).item() == pytest.approx(nt_xent(z1, z2, 0.7)[0].item(), abs=1e-12)


def test_multimodal_infonce_logs_the_pairs_similarity():
    z1, z2 = pairs()
    out = make("multimodal_infonce").loss([z1, z2])
    assert out["pos_sim"].item() == pytest.approx(sum(cos(z1[i], z2[i]) for i in range(6)) / 6, abs=1e-12)


# ---------------------------------------------------------------- clip


def test_clip_equals_the_formula_at_its_initial_temperature():
    z1, z2 = pairs()
    obj = make("clip").double()
    out = obj.loss([z1, z2])
    assert out["scale"].item() == pytest.approx(1 / 0.07)
    assert out["loss"].item() == pytest.approx(reference_clip(z1, z2, 1 / 0.07), abs=1e-6)
    assert clip_loss(z1, z2, torch.tensor(3.0, dtype=torch.float64)).item() == pytest.approx(
        reference_clip(z1, z2, 3.0), abs=1e-6)


def test_clip_depends_on_its_temperature_and_both_directions():
    z1, z2 = pairs()
    value = make("clip").double().loss([z1, z2])["loss"].item()
    assert abs(value - reference_clip(z1, z2, 1.0)) > 1e-2  # a fixed temperature 1 instead of 0.07
    assert abs(value - reference_clip(z1, z2, 1 / 0.07, both_ways=False)) > 1e-2
    assert make("clip", tau_init=0.5).double().loss([z1, z2])["loss"].item() == pytest.approx(
        reference_clip(z1, z2, 2.0), abs=1e-6)


def test_clip_temperature_gets_a_gradient_and_is_clamped():
    z1, z2 = pairs()
    obj = make("clip").double()
    obj.loss([z1, z2])["loss"].backward()
    assert obj.log_scale.grad is not None and obj.log_scale.grad.abs().item() > 1e-6
    with torch.no_grad():
        obj.log_scale.fill_(math.log(1000.0))
    out = obj.loss([z1, z2])
    assert out["scale"].item() == pytest.approx(100.0)
    assert out["loss"].item() == pytest.approx(reference_clip(z1, z2, 100.0), abs=1e-6)
    obj.after_step(0, 1)
    assert obj.log_scale.item() == pytest.approx(math.log(100.0))


# ---------------------------------------------------------------- both


@pytest.mark.parametrize("name", ["multimodal_infonce", "clip"])
def test_forward_encodes_images_and_tokens_and_every_parameter_learns(name):
    obj = make(name)
    images, tokens = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4, 8))
    out = obj([images, tokens])
    out["loss"].backward()
    assert out["loss"].dim() == 0 and torch.isfinite(out["loss"])
    for pname, p in obj.named_parameters():
        assert p.grad is not None, pname
    obj.eval()
    assert obj.representation(images).shape == (4, 4) and obj.text_representation(tokens).shape == (4, 4)
    assert torch.equal(obj.representation(images), obj.encoder(images))
    assert torch.equal(obj.modality_representation(images, 0), obj.representation(images))
    assert torch.equal(obj.modality_representation(tokens, 1), obj.text_representation(tokens))
    with pytest.raises(ValueError, match="modalities 0"):
        obj.modality_representation(tokens, 2)


@pytest.mark.parametrize("name", ["multimodal_infonce", "clip"])
def test_declares_its_views_and_data_arguments(name):
    cls = OBJECTIVES.get(name)
    assert (cls.n_views, cls.view_maker, cls.data_args) == (2, "image_text", ("vocabulary", "max_len"))
    captions = ["a red cow .", "a blue hare ."]
    args = cls.caption_args(captions)  # padded to the encoder's 8 at least
    assert args == {"vocabulary": Vocabulary.build(captions).to_dict(), "max_len": 8}
    assert cls.caption_args([" ".join(["cow"] * 27)])["max_len"] == 27
    obj = make(name, vocabulary=args["vocabulary"])
    assert len(obj.vocabulary) == 8 and obj.tokens(["a red hare"]).tolist() == [
        [Vocabulary.build(captions).ids[w] for w in ("a", "red", "hare")] + [0] * 5]
    assert cls(Flat(12, 4)).max_len == 8  # a stand-in without data: a config is checked before its store is read
    with pytest.raises(ValueError, match=r"\[images, tokens\]"):
        make(name)([torch.randn(2, 3, 8, 8)])


COLOURS = ("red", "green", "blue", "yellow")
RGB = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])


def toy_pairs(n: int, g: torch.Generator) -> tuple[torch.Tensor, list[str], torch.Tensor]:
    """n (image, caption) pairs of random classes: an 8 px patch of the class's colour plus noise, and the
    caption 'a COLOUR patch .'; also the classes."""
    classes = torch.randint(0, len(COLOURS), (n,), generator=g)
    images = RGB[classes].view(n, 3, 1, 1).expand(n, 3, 8, 8) + 0.3 * torch.randn(n, 3, 8, 8, generator=g)
    return images, [f"a {COLOURS[c]} patch ." for c in classes.tolist()], classes


def similarity_gap(obj: nn.Module, images: torch.Tensor, tokens: torch.Tensor, classes: torch.Tensor) -> float:
    """Mean cosine similarity of the image/text pairs of one class minus that of pairs of different classes."""
    obj.eval()
    with torch.no_grad():
        sim = F.normalize(obj.representation(images), dim=1) @ F.normalize(obj.text_representation(tokens), dim=1).T
    same = classes[:, None] == classes[None, :]
    return float(sim[same].mean() - sim[~same].mean())


def retrieval(obj: nn.Module, images: torch.Tensor, classes: torch.Tensor, vocab: Vocabulary) -> float:
    """The share of images whose most similar of the four class captions is their own class's."""
    obj.eval()
    with torch.no_grad():
        text = obj.text_representation(vocab.encode([f"a {c} patch ." for c in COLOURS], 8))
        sim = F.normalize(obj.representation(images), dim=1) @ F.normalize(text, dim=1).T
    return float((sim.argmax(1) == classes).float().mean())


@pytest.mark.parametrize("name", ["multimodal_infonce", "clip"])
def test_training_on_toy_pairs_makes_matched_pairs_more_similar(name):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    images, captions, classes = toy_pairs(64, g)
    vocab = Vocabulary.build(captions)
    tokens = vocab.encode(captions, 8)
    obj = make(name, vocabulary=vocab.to_dict())
    before = similarity_gap(obj, images, tokens, classes), retrieval(obj, images, classes, vocab)
    optimizer = torch.optim.Adam(obj.parameters(), lr=3e-3)
    obj.train()
    for step in range(60):
        x, text, _ = toy_pairs(16, g)
        loss = obj([x, vocab.encode(text, 8)])["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        obj.after_step(step, 60)
        obj.train()
    after = similarity_gap(obj, images, tokens, classes), retrieval(obj, images, classes, vocab)
    assert before[1] < 0.5 and after[1] == 1.0, (before, after)  # untrained: at chance; trained: every image
    assert after[0] > before[0] + 0.3, (before, after)
