"""Tests of the self-supervised objectives: hand-computed values, invariances, EMA/queue updates, training."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import digamma, gammaln
from torch import nn

from ident3d.training.losses.functional import SUBNORMAL_EXP, cosine_momentum, kl_entropy, row_logsumexp
from ident3d.training.objective_parts.generative import GenerativeObjective
from ident3d.training.objectives import OBJECTIVES, Objective


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: one intra-op thread is faster and avoids contention on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)




class IdentityLinear(nn.Linear):
    """A D -> D linear encoder initialised to the identity, so embeddings equal the inputs."""

    def __init__(self, dim: int):
        super().__init__(dim, dim)
        self.out_dim = dim
        with torch.no_grad():
            self.weight.copy_(torch.eye(dim))
            self.bias.zero_()


class TinyMLP(nn.Sequential):
    """A small MLP encoder for the training tests."""

    def __init__(self, d_in: int = 8, hidden: int = 64, d_out: int = 8):
        super().__init__(nn.Linear(d_in, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, d_out))
        self.out_dim = d_out


@OBJECTIVES.register("test_align_uniform")
class AlignUniform(Objective):
    """Test only: alignment + uniformity of normalised embeddings, registered here to show that the generic tests
    below pick up a new objective from the registry (unregistered when this module's tests end)."""

    def loss(self, embeddings: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        a, b = (torch.nn.functional.normalize(e, dim=1) for e in embeddings)
        align = (a - b).pow(2).sum(1).mean()
        uniform = torch.pdist(torch.cat([a, b])).pow(2).mul(-2).exp().mean().log()
        return {"loss": align + uniform, "pos_sim": (a * b).sum(1).mean().detach()}


@pytest.fixture(autouse=True, scope="module")
def _unregister_test_objective():
    yield
    OBJECTIVES.unregister("test_align_uniform")


def takes_two_embeddings(cls: type) -> bool:
    """An objective the generic tests can run: a loss on two views' embeddings from the encoder alone (no decoder,
    labels, own view maker or set of views)."""
    return (cls.n_views == 2 and cls.view_maker is None and not cls.phases and not cls.any_views
            and not issubclass(cls, GenerativeObjective))


NAMES = [n for n in OBJECTIVES.names() if takes_two_embeddings(OBJECTIVES.get(n))]


def t(x) -> torch.Tensor:
    """float64 tensor from a nested list, so hand-computed values compare tightly."""
    return torch.tensor(x, dtype=torch.float64)


def make(name: str, encoder: nn.Module | None = None, **hp):
    """Instantiate a registered objective (float64 identity encoder by default)."""
    enc = encoder if encoder is not None else IdentityLinear(2).double()
    return OBJECTIVES.get(name)(enc, **hp)


# ---------------------------------------------------------------- registry


def test_generic_tests_run_every_registered_two_view_objective_including_a_new_one():
    assert {"align_maxent", "barlow_twins", "byol", "infonce", "lp_infonce", "moco_v2", "vicreg"} < set(NAMES)
    assert "test_align_uniform" in NAMES  # registered in this module: no list to edit
    assert not {"simvae", "supervised", "crl_tac", "gin_nll"} & set(NAMES)  # need a decoder, labels, crops, sets


def test_registry_describes_each_objective_by_its_docstring_summary():
    """The docstring's first paragraph on one line (a summary that wraps is not cut after its first line)."""
    described = dict(OBJECTIVES.describe())
    assert set(described) == set(OBJECTIVES.names())
    for name, line in described.items():
        cls = OBJECTIVES.get(name)
        summary = " ".join(cls.__doc__.strip().split("\n\n")[0].split())
        assert cls.registry_name == name and line and line == summary, name
    assert described["test_align_uniform"].endswith("(unregistered when this module's tests end).")


# ---------------------------------------------------------------- infonce


def numpy_nt_xent(za: np.ndarray, zb: np.ndarray, tau: float) -> float:
    """Loop-based NT-Xent: mean over the 2B anchors of -log softmax of the partner among the 2B-1 others."""
    z = np.concatenate([za, zb])
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    n, b = len(z), len(za)
    total = 0.0
    for i in range(n):
        partner = (i + b) % n
        sims = {j: float(z[i] @ z[j]) / tau for j in range(n) if j != i}
        total += -sims[partner] + math.log(sum(math.exp(s) for s in sims.values()))
    return total / n


def test_infonce_hand_computed():
    # views e1, e2 | e1, e2: each anchor sees its positive at cos 1 and two negatives at cos 0
    eye = t([[1.0, 0.0], [0.0, 1.0]])
    for tau in (1.0, 0.5):
        out = make("infonce", tau=tau).loss([eye, eye.clone()])
        expected = -1.0 / tau + math.log(math.exp(1.0 / tau) + 2.0)
        assert out["loss"].item() == pytest.approx(expected, abs=1e-10)
        assert out["pos_sim"].item() == pytest.approx(1.0)
    za, zb = t([[1.0, 2.0], [-1.0, 0.5], [0.3, -2.0]]), t([[0.5, 1.0], [2.0, 1.0], [-1.0, -1.0]])
    out = make("infonce", tau=0.7).loss([za, zb])
    assert out["loss"].item() == pytest.approx(numpy_nt_xent(za.numpy(), zb.numpy(), 0.7), abs=1e-10)


def test_infonce_is_scale_invariant():
    g = torch.Generator().manual_seed(0)
    za, zb = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    obj = make("infonce", encoder=IdentityLinear(3), tau=0.3)
    base = obj.loss([za, zb])["loss"]
    scaled = obj.loss([3.7 * za, 0.2 * zb])["loss"]
    assert torch.allclose(base, scaled, atol=1e-6)


# ---------------------------------------------------------------- lp_infonce


def test_lp_infonce_batch_hand_computed():
    # p = 2: d = [[1, 1], [2, 0]] (rows f1, columns f2)
    f1, f2 = t([[0.0, 0.0], [1.0, 0.0]]), t([[0.0, 1.0], [1.0, 0.0]])
    rows = math.log(2.0) + math.log(1.0 + math.exp(-2.0))
    cols = (1.0 + math.log(math.exp(-1.0) + math.exp(-2.0))) + math.log(math.exp(-1.0) + 1.0)
    out = make("lp_infonce").loss([f1, f2])
    assert out["loss"].item() == pytest.approx((rows + cols) / 4.0, abs=1e-10)
    one_way = make("lp_infonce", symmetric=False).loss([f1, f2])
    assert one_way["loss"].item() == pytest.approx(rows / 2.0, abs=1e-10)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_infonce_matches_manual_computation(p):
    rng = np.random.default_rng(p)
    f1, f2, tau = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), 0.8
    d = np.array([[np.sum(np.abs(a - b) ** p) for b in f2] for a in f1])
    logits = -d / tau
    row = np.mean([np.log(np.exp(logits[i]).sum()) - logits[i, i] for i in range(4)])
    col = np.mean([np.log(np.exp(logits[:, j]).sum()) - logits[j, j] for j in range(4)])
    obj = make("lp_infonce", encoder=IdentityLinear(3).double(), p=p, tau=tau)
    assert obj.loss([t(f1), t(f2)])["loss"].item() == pytest.approx((row + col) / 2, abs=1e-8)


def lp_dist(u: list[float], v: list[float], p: float) -> float:
    """||u - v||_p^p of two plain float lists."""
    return sum(abs(a - b) ** p for a, b in zip(u, v, strict=True))


def test_row_logsumexp_is_the_formula_and_torch_bit_for_bit():
    """Rows spread over ~1000 nats (most weights subnormal, as paper 001's p-norm logits get) and narrow rows:
    the value is log sum_j exp(x_ij) from plain floats and torch.logsumexp's bit for bit; the gradient is the
    row's softmax, with weights under 1e-38 floored at exp(SUBNORMAL_EXP) instead of kept subnormal."""
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([-1000.0 * torch.rand(3, 40, generator=gen), 5.0 * torch.randn(3, 40, generator=gen)])
    x = x.requires_grad_()
    out = row_logsumexp(x)
    (out * torch.arange(1.0, 7.0)).sum().backward()
    rows = x.detach().double().tolist()
    plain = [max(r) + math.log(sum(math.exp(v - max(r)) for v in r)) for r in rows]
    assert np.allclose(out.detach().numpy(), plain, rtol=1e-6, atol=0)
    assert torch.equal(out, torch.logsumexp(x.detach(), dim=1))
    scale = torch.arange(1.0, 7.0, dtype=torch.float64).unsqueeze(1)
    softmax = torch.tensor([[math.exp(v - lse) for v in r] for r, lse in zip(rows, plain, strict=True)])
    expected = scale * softmax.clamp_min(math.exp(SUBNORMAL_EXP))
    assert torch.allclose(x.grad.double(), expected, rtol=1e-5, atol=0)
    assert (softmax < 1e-38).sum() > 50  # the wide rows do reach the floored range


def plain_rolled_lp_infonce(f1, f2, p: float, tau: float, simclr_compat: bool, alpha: float = 0.5) -> float:
    """Paper 001's rolled loss straight from its formula, with Python loops over i and k on floats.

    f3 = roll(f1, 1) (f3[k] = f1[k - 1]), pos_i = ||f1_i - f2_i||_p^p, neg_ik = ||f1_i - f3_k||_p^p for all k;
    per anchor 2 [a pos_i / tau + (1 - a) S_i] with S_i = log(sum_k exp(-neg_ik / tau) + exp(-pos_i / tau))
    (simclr_compat) or S_i = log((1 / B) sum_k exp(-neg_ik / tau)); the loss is the mean over i.
    """
    b = len(f1)
    f3 = [f1[(k - 1) % b] for k in range(b)]
    total = 0.0
    for i in range(b):
        pos = lp_dist(f1[i], f2[i], p)
        acc = 0.0
        for k in range(b):
            acc += math.exp(-lp_dist(f1[i], f3[k], p) / tau)
        second = math.log(acc + math.exp(-pos / tau)) if simclr_compat else math.log(acc / b)
        total += 2.0 * (alpha * pos / tau + (1.0 - alpha) * second)
    return total / b


def plain_one_negative_lp_infonce(f1, f2, p: float, tau: float, alpha: float = 0.5) -> float:
    """The OLD (wrong) rolled form: one negative per anchor, f3 = roll(f2, 1), logsumexp over {-d13, -d12}."""
    b = len(f1)
    total = 0.0
    for i in range(b):
        d12, d13 = lp_dist(f1[i], f2[i], p), lp_dist(f1[i], f2[(i - 1) % b], p)
        total += 2.0 * (alpha * d12 / tau + (1.0 - alpha) * math.log(math.exp(-d13 / tau) + math.exp(-d12 / tau)))
    return total / b


def test_lp_infonce_rolled_hand_computed():
    # B = 2, D = 1, p = 1, tau = 1: f1 = [0, 1], f2 = [0.5, 1], f3 = roll(f1) = [1, 0]
    # pos = [0.5, 0]; neg row 0 = [|0-1|, |0-0|] = [1, 0]; neg row 1 = [|1-1|, |1-0|] = [0, 1]
    # compat: anchor 0: 2[0.25 + 0.5 log(e^-1 + e^0 + e^-0.5)] = 0.5 + log(1.974410) = 1.180270
    #         anchor 1: 2[0    + 0.5 log(e^0 + e^-1 + e^0)]    = log(2.367879)       = 0.861994
    #         loss = (1.180270 + 0.861994) / 2 = 1.021132
    # logmeanexp: anchor 0: 0.5 + log((e^-1 + 1) / 2) = 0.5 - 0.379885 = 0.120115; anchor 1: log((1 + e^-1) / 2)
    #         = -0.379885; loss = -0.129885
    # old one-negative form (f3 = roll(f2) = [1, 0.5]): both anchors 0.474077 -> 0.474077
    f1, f2 = t([[0.0], [1.0]]), t([[0.5], [1.0]])
    e1, e5 = math.exp(-1.0), math.exp(-0.5)
    compat = 0.5 * ((0.5 + math.log(e1 + 1.0 + e5)) + math.log(2.0 + e1))
    lme = 0.5 * ((0.5 + math.log((e1 + 1.0) / 2.0)) + math.log((1.0 + e1) / 2.0))
    assert compat == pytest.approx(1.021132, abs=1e-6) and lme == pytest.approx(-0.129885, abs=1e-6)
    enc = IdentityLinear(1).double()
    out = make("lp_infonce", encoder=enc, conditional="laplace", negatives="rolled").loss([f1, f2])
    assert out["loss"].item() == pytest.approx(compat, abs=1e-12)
    assert out["pos_dist"].item() == pytest.approx(0.25)
    assert out["neg_dist"].item() == pytest.approx(1.0)  # ||f1_0 - f1_1||_1, the only pair of different anchors
    out = make("lp_infonce", encoder=enc, conditional="laplace", negatives="rolled", simclr_compat=False).loss([f1, f2])
    assert out["loss"].item() == pytest.approx(lme, abs=1e-12)
    assert abs(plain_one_negative_lp_infonce([[0.0], [1.0]], [[0.5], [1.0]], 1, 1.0) - 0.474077) < 1e-6


@pytest.mark.parametrize("simclr_compat", [True, False])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_infonce_rolled_matches_plain_loops(p, simclr_compat):
    """The rolled (paper 001) loss equals the loop implementation of its formula, on random inputs."""
    rng = np.random.default_rng(10 * p + simclr_compat)
    worst, worst_old = 0.0, math.inf
    for b, d in ((2, 1), (3, 2), (5, 3), (8, 4), (16, 6)):
        for tau in (0.5, 1.0):
            f1, f2 = rng.normal(size=(b, d)), rng.normal(size=(b, d)) * 0.7
            obj = make("lp_infonce", encoder=IdentityLinear(d).double(), p=p, tau=tau, negatives="rolled",
                       simclr_compat=simclr_compat)
            got = obj.loss([t(f1), t(f2)])["loss"].item()
            ref = plain_rolled_lp_infonce(f1.tolist(), f2.tolist(), p, tau, simclr_compat)
            worst = max(worst, abs(got - ref))
            old = plain_one_negative_lp_infonce(f1.tolist(), f2.tolist(), p, tau)
            worst_old = min(worst_old, abs(got - old))
    assert worst < 1e-5, worst
    # the old one-negative implementation is clearly different on the same inputs (the test would catch it)
    assert worst_old > 1e-2, worst_old


def test_lp_infonce_conditional_sets_p():
    assert make("lp_infonce").p == 2
    assert make("lp_infonce", conditional="laplace").p == 1
    assert make("lp_infonce", conditional="laplace", p=3).p == 3
    with pytest.raises(ValueError):
        make("lp_infonce", conditional="cauchy")


# ---------------------------------------------------------------- align_maxent


def logit(u):
    return [[math.log(v / (1 - v)) for v in row] for row in u]


def test_align_maxent_kl_hand_computed():
    ga = [[0.2, 0.2], [0.5, 0.6], [0.9, 0.1]]
    gb = [[0.3, 0.2], [0.5, 0.5], [0.7, 0.4]]
    out = make("align_maxent").loss([t(logit(ga)), t(logit(gb))])
    a, b = np.array(ga), np.array(gb)
    align = np.mean(np.sum((a - b) ** 2, axis=1))

    def kl(x):  # Kozachenko-Leonenko, k = 1, Euclidean radius, unit-ball volume pi^(d/2)/Gamma(d/2+1)
        n, d = x.shape
        r = [min(np.linalg.norm(x[i] - x[j]) for j in range(n) if j != i) for i in range(n)]
        return digamma(n) - digamma(1) + d / 2 * np.log(np.pi) - gammaln(d / 2 + 1) + d * np.mean(np.log(r))

    ent = (kl(a) + kl(b)) / 2
    assert out["alignment"].item() == pytest.approx(align, abs=1e-10)
    assert out["entropy"].item() == pytest.approx(ent, abs=1e-8)
    assert out["loss"].item() == pytest.approx(align - ent, abs=1e-8)
    out2 = make("align_maxent", lam=0.5).loss([t(logit(ga)), t(logit(gb))])
    assert out2["loss"].item() == pytest.approx(align - 0.5 * ent, abs=1e-8)


def test_kl_entropy_matches_known_distributions():
    g = torch.Generator().manual_seed(0)
    uniform = torch.rand(3000, 2, generator=g, dtype=torch.float64)  # H = 0 on the unit square
    assert kl_entropy(uniform).item() == pytest.approx(0.0, abs=0.08)
    s = 0.3
    gauss = s * torch.randn(3000, 2, generator=g, dtype=torch.float64)  # H = log(2 pi e s^2)
    assert kl_entropy(gauss).item() == pytest.approx(math.log(2 * math.pi * math.e * s**2), abs=0.08)


def test_align_maxent_uniformity_hand_computed():
    # normalised views: a = e1, e2; b = e1, (1,1)/sqrt2
    za, zb = t([[2.0, 0.0], [0.0, 3.0]]), t([[1.0, 0.0], [1.0, 1.0]])
    align = (0.0 + (2.0 - 2.0 / math.sqrt(2.0))) / 2.0
    unif_a = -2.0 * 2.0  # one pair, ||e1 - e2||^2 = 2
    unif_b = -2.0 * (2.0 - 2.0 / math.sqrt(2.0))
    ent = -(unif_a + unif_b) / 2.0
    out = make("align_maxent", entropy="uniformity").loss([za, zb])
    assert out["alignment"].item() == pytest.approx(align, abs=1e-10)
    assert out["entropy"].item() == pytest.approx(ent, abs=1e-10)
    assert out["loss"].item() == pytest.approx(align - ent, abs=1e-10)


# ---------------------------------------------------------------- barlow twins


def test_barlow_twins_hand_computed():
    # standardised columns: za -> [-1, 1], [-1, 1]; zb -> [-1, 1], [1, -1]; C = [[1, -1], [1, -1]]
    za, zb = t([[1.0, 2.0], [3.0, 4.0]]), t([[0.0, 1.0], [1.0, 0.0]])
    out = make("barlow_twins").loss([za, zb])
    assert out["loss"].item() == pytest.approx(4.0 + 2.0 * 0.0051, abs=1e-3)
    assert out["on_diag"].item() == pytest.approx(4.0, abs=1e-3)
    assert out["off_diag"].item() == pytest.approx(2.0, abs=1e-3)
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    sa, sb = (a - a.mean(0)) / a.std(0), (b - b.mean(0)) / b.std(0)
    c = sa.T @ sb / 5
    ref = sum((1 - c[i, i]) ** 2 for i in range(3)) + 0.1 * sum(
        c[i, j] ** 2 for i in range(3) for j in range(3) if i != j
    )
    got = make("barlow_twins", encoder=IdentityLinear(3).double(), lambd=0.1, eps=0.0).loss([t(a), t(b)])
    assert got["loss"].item() == pytest.approx(ref, abs=1e-10)


def test_barlow_twins_zero_for_identical_decorrelated_batch():
    hadamard = t([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]])
    z = hadamard[:, 1:]  # zero-mean, unit-std, mutually orthogonal columns
    obj = make("barlow_twins", encoder=IdentityLinear(3).double())
    assert obj.loss([3.0 * z + 5.0, z.clone()])["loss"].item() == pytest.approx(0.0, abs=1e-8)


# ---------------------------------------------------------------- vicreg


def test_vicreg_hand_computed():
    # column 0: +-1 -> unbiased std sqrt(2) > 1 (no hinge); column 1: constant -> std 0.01, hinge 0.99
    z = t([[1.0, 0.0], [-1.0, 0.0]])
    out = make("vicreg").loss([z, z.clone()])
    assert out["invariance"].item() == pytest.approx(0.0)
    assert out["variance"].item() == pytest.approx(0.99 / 2, abs=1e-12)
    assert out["covariance"].item() == pytest.approx(0.0)
    assert out["loss"].item() == pytest.approx(25 * 0.495, abs=1e-10)
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(4, 3)) * 0.5, rng.normal(size=(4, 3)) * 2.0

    def var(x):
        return np.mean(np.maximum(0.0, 1.0 - np.sqrt(x.var(axis=0, ddof=1) + 1e-4)))

    def cov(x):
        c = np.cov(x, rowvar=False)
        return (np.sum(c**2) - np.sum(np.diag(c) ** 2)) / x.shape[1]

    ref = 25 * np.mean((a - b) ** 2) + 25 * (var(a) + var(b)) / 2 + cov(a) + cov(b)
    got = make("vicreg", encoder=IdentityLinear(3).double()).loss([t(a), t(b)])
    assert got["loss"].item() == pytest.approx(ref, abs=1e-10)


# ---------------------------------------------------------------- moco v2


def test_moco_hand_computed():
    obj = make("moco_v2", queue_size=2)
    obj.queue.copy_(t([[-1.0, 0.0], [0.0, -1.0]]))
    eye = t([[1.0, 0.0], [0.0, 1.0]])
    out = obj([eye, eye.clone()])
    # each query: positive cos 1, negatives -1 and 0, tau = 0.2
    expected = math.log(math.exp(5.0) + math.exp(-5.0) + 1.0) - 5.0
    assert out["loss"].item() == pytest.approx(expected, abs=1e-10)
    x1, x2 = t([[1.0, 2.0], [-1.0, 0.5]]), t([[0.5, 1.0], [2.0, 1.0]])
    queue = np.array([[0.6, 0.8], [-0.8, 0.6]])
    obj.queue.copy_(t(queue))

    def direction(a, b):
        q = a / np.linalg.norm(a, axis=1, keepdims=True)
        k = b / np.linalg.norm(b, axis=1, keepdims=True)
        loss = 0.0
        for i in range(len(q)):
            logits = np.array([q[i] @ k[i], *(q[i] @ queue.T)]) / 0.2
            loss += -logits[0] + np.log(np.exp(logits).sum())
        return loss / len(q)

    expected = (direction(x1.numpy(), x2.numpy()) + direction(x2.numpy(), x1.numpy())) / 2
    assert obj([x1, x2])["loss"].item() == pytest.approx(expected, abs=1e-10)


def test_moco_ema_and_queue():
    obj = make("moco_v2", queue_size=6)
    with torch.no_grad():
        obj.encoder.weight.add_(1.0)
    key_before = obj.key_encoder.weight.clone()
    online = obj.encoder.weight.clone()
    views = [t([[1.0, 2.0], [3.0, -1.0]]), t([[0.0, 1.0], [1.0, 1.0]])]
    out = obj(views)
    out["loss"].backward()
    assert obj.key_encoder.weight.grad is None and obj.encoder.weight.grad is not None
    keys = torch.nn.functional.normalize(torch.cat([views[0] @ key_before.T, views[1] @ key_before.T]), dim=1)
    obj.after_step(step=50, total_steps=100)
    m = (0.99 + 0.999) / 2  # cosine schedule at half-way
    assert torch.allclose(obj.key_encoder.weight, m * key_before + (1 - m) * online, atol=1e-12)
    assert torch.allclose(obj.queue[:4], keys, atol=1e-12)
    assert int(obj.queue_ptr) == 4
    # wrap-around: the next 4 keys go to slots 4, 5, 0, 1
    obj.eval()
    obj(views)
    assert obj._pending_keys is None  # evaluation forwards do not enqueue
    obj.train()
    obj(views)
    obj.after_step(step=0, total_steps=100)
    assert int(obj.queue_ptr) == 2
    assert obj.queue.norm(dim=1).allclose(torch.ones(6, dtype=torch.float64))
    state = obj.state_dict()
    assert "queue" in state and "queue_ptr" in state and "key_encoder.weight" in state


def test_cosine_momentum_schedule():
    assert cosine_momentum(0, 100, 0.99, 0.999) == pytest.approx(0.99)
    assert cosine_momentum(100, 100, 0.99, 0.999) == pytest.approx(0.999)
    assert cosine_momentum(25, 100, 0.99, 1.0) == pytest.approx(1.0 - 0.01 * (math.cos(math.pi / 4) + 1) / 2)


# ---------------------------------------------------------------- byol


def identity_predictor(obj) -> None:
    """Set BYOL's predictor to x -> relu(x) - relu(-x) = x (eval-mode BatchNorm is ~identity)."""
    pred = obj.predictor
    d = obj.encoder.out_dim
    hidden = pred[0].out_features
    with torch.no_grad():
        w1 = torch.zeros(hidden, d, dtype=pred[0].weight.dtype)
        w1[:d], w1[d : 2 * d] = torch.eye(d), -torch.eye(d)
        pred[0].weight.copy_(w1)
        pred[0].bias.zero_()
        pred[3].weight.copy_(w1.T)
        pred[3].bias.zero_()
        pred[1].eps = 0.0


def test_byol_hand_computed():
    obj = make("byol").double()
    identity_predictor(obj)
    obj.eval()
    x1, x2 = t([[1.0, 0.0], [1.0, 1.0]]), t([[0.0, 1.0], [2.0, 2.0]])
    out = obj([x1, x2])
    # cos per pair = [0, 1] -> each direction mean(2 - 2cos) = 1, summed over both = 2
    assert out["loss"].item() == pytest.approx(2.0, abs=1e-10)
    assert out["pos_sim"].item() == pytest.approx(0.5, abs=1e-10)
    x1, x2 = t([[1.0, 2.0], [-1.0, 0.5], [3.0, 1.0]]), t([[0.5, 1.0], [2.0, 1.0], [-1.0, 2.0]])

    def cos(a, b):
        return np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)

    a, b = x1.numpy(), x2.numpy()
    expected = np.mean(2 - 2 * cos(a, b)) * 2  # identity predictor: both directions equal
    assert obj([x1, x2])["loss"].item() == pytest.approx(expected, abs=1e-10)


def test_byol_ema_and_stop_gradient():
    obj = make("byol")
    with torch.no_grad():
        obj.encoder.weight.mul_(3.0)
    target_before, online = obj.target_encoder.weight.clone(), obj.encoder.weight.clone()
    x = [t([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]]), t([[0.0, 1.0], [1.0, 1.0], [2.0, 0.0]])]
    obj(x)["loss"].backward()
    assert obj.target_encoder.weight.grad is None and obj.predictor[0].weight.grad is not None
    obj.after_step(step=0, total_steps=10)
    assert torch.allclose(obj.target_encoder.weight, 0.99 * target_before + 0.01 * online, atol=1e-12)
    moved = obj.target_encoder.weight.clone()
    obj.after_step(step=10, total_steps=10)  # momentum 1.0 at the end: the target stays
    assert torch.equal(obj.target_encoder.weight, moved)


# ---------------------------------------------------------------- all objectives


@pytest.mark.parametrize("name", NAMES)
def test_finite_for_batch_of_two(name):
    torch.manual_seed(0)
    obj = OBJECTIVES.get(name)(TinyMLP(), **({"queue_size": 16} if name == "moco_v2" else {}))
    x = torch.randn(2, 8)
    out = obj([x, x + 0.01 * torch.randn(2, 8)])
    assert set(out) >= {"loss"}
    for key, value in out.items():
        assert value.dim() == 0 and torch.isfinite(value), (key, value)
    out["loss"].backward()
    obj.after_step(0, 10)


TRAIN_HP = {"moco_v2": {"queue_size": 256}, "infonce": {"tau": 0.5}}


@pytest.mark.parametrize("name", NAMES)
def test_training_lowers_loss_without_collapse(name):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    obj = OBJECTIVES.get(name)(TinyMLP(), **TRAIN_HP.get(name, {}))
    opt = torch.optim.Adam(obj.parameters(), lr=3e-3)
    steps, losses = 100, []
    for step in range(steps):
        x = torch.randn(64, 8, generator=g)
        views = [x + 0.1 * torch.randn(64, 8, generator=g), x + 0.1 * torch.randn(64, 8, generator=g)]
        loss = obj(views, step, steps)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        obj.after_step(step, steps)
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    # MoCo's random initial queue is easier than one of real keys: start once it has been replaced (2 steps)
    start = 2 if name == "moco_v2" else 0
    first, last = np.mean(losses[start : start + 5]), np.mean(losses[-10:])
    assert last < first - 0.03 * abs(first) - 1e-3, (first, last)
    with torch.no_grad():
        obj.eval()
        z = obj.representation(torch.randn(512, 8, generator=g))
    # collapse check on the scale-free direction of the codes (sigmoid codes for align_maxent's KL mode)
    codes = torch.sigmoid(z) if name == "align_maxent" else torch.nn.functional.normalize(z, dim=1)
    stds = codes.std(dim=0)
    assert stds.mean() > 0.1, stds
    # and the codes span more than one direction: the second singular value is not negligible
    sv = torch.linalg.svdvals(codes - codes.mean(0))
    assert sv[1] > 0.05 * sv[0], sv
