"""CRL-TAC's levers (issue: CRL-TAC goes the wrong way with training): each hyperparameter changes what it should
and nothing else, at its default equals the code before it bit for bit, and the crl_tac metric's mass on the
digit per canvas cell."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from ident3d.causal.errors import UserError
from ident3d.training.channel import crop_grid, nonblank_crops
from ident3d.training.encoders import build_encoder
from ident3d.training.losses.crl_tac_exact import all_crops_loss
from ident3d.training.objective_parts.crl_tac_start import ink_crops
from ident3d.training.objectives.crl_tac import CRLTAC, annealed
from ident3d.training.views import Normalize, to_float

LEVERS_AT_DEFAULT = {"channel_optimizer": "adam", "channel_lr": None, "encoder_steps_per_channel_step": 1,
                     "channel_init": "uniform", "channel_init_std": 0.01, "control_nats": 5.0,
                     "channel_temperature": 1.0, "entropy_start": None, "entropy_anneal_steps": 0,
                     "input_format": "normalised", "channel_crops": "sampled"}


def _objective(size: int = 84, **hp) -> CRLTAC:
    torch.manual_seed(0)
    return CRLTAC(build_encoder("tac_cnn", 50, size), **hp)


def _canvases(cells: list[int], size: int = 84, seed: int = 0) -> np.ndarray:
    """uint8 (N, size, size, 3) blank canvases with a random ink blob (a third of the cell, in its middle) in the
    given cells of the 3 x 3 grid (row-major)."""
    rng = np.random.default_rng(seed)
    c = size // 3
    out = np.zeros((len(cells), size, size, 3), np.uint8)
    for i, k in enumerate(cells):
        r, col = divmod(k, 3)
        blob = rng.integers(60, 255, (c // 3, c // 3, 1), dtype=np.uint8)
        out[i, r * c + c // 3:r * c + 2 * (c // 3), col * c + c // 3:col * c + 2 * (c // 3)] = blob
    return out


def _views(obj: CRLTAC, images: np.ndarray, seed: int = 1) -> list[torch.Tensor]:
    x = Normalize((0.1, 0.1, 0.1), (0.3, 0.3, 0.3))(to_float(torch.from_numpy(images)))
    u = torch.rand(len(images), obj.draws_per_image, generator=torch.Generator().manual_seed(seed))
    return [x, u]


def test_every_lever_at_its_default_is_the_code_before_it():
    """Naming every new hyperparameter at its default builds the same weights (no new state) and gives the same
    losses, bit for bit, in both phases. (Against the code before the levers: 4 trainer steps of 5 settings gave
    identical weights and logs, checked when they were added.)"""
    plain, named = _objective(), _objective(**LEVERS_AT_DEFAULT)
    assert plain.state_dict().keys() == named.state_dict().keys()
    assert all(torch.equal(v, named.state_dict()[k]) for k, v in plain.state_dict().items())
    assert [g["params"] for g in plain.param_groups()] == [list(plain.parameters())]
    views = _views(plain, _canvases([0, 4, 8]))
    for phase in ("encoder", "channel"):
        a, b = plain(views, step=3, phase=phase), named(views, step=3, phase=phase)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), phase


def test_the_engine_keys_of_the_existing_configs_are_unchanged():
    """A row that names no lever resolves to the settings it had before the levers: the cell key of
    configs/crl_tac_mnist5k.yaml's first row, seed 0, as it was recorded before they were added."""
    from ident3d.pipelines.cells import cell_key
    from ident3d.pipelines.kinds.compare import cell_settings, load_config

    cfg = load_config("configs/crl_tac_mnist5k.yaml")
    settings = cell_settings(cfg, cfg.rows[0], 0, {"train": "T", "test": "S"})
    assert settings["train"]["objective_args"] == {"channel_bound": "exact", "channel_net": "fast",
                                                   "entropy_weight": 0.0025}
    assert cell_key(settings) == "fe32c07be1b51a74d7eb0304ae85e49c98a4237cc6a1cad0357da5412aeba8ce"


def _channel_grads(obj: CRLTAC, views: list[torch.Tensor], step: int = 0) -> list[torch.Tensor | None]:
    obj.zero_grad(set_to_none=True)
    obj(views, step=step, phase="channel")["loss"].backward()
    return [None if p.grad is None else p.grad.clone() for p in obj.channel.parameters()]


def test_sgd_moves_the_channel_by_lr_times_its_gradient_on_its_own():
    with pytest.raises(UserError, match="channel_lr"):
        _objective(channel_optimizer="sgd")
    obj = _objective(channel_optimizer="sgd", channel_lr=0.5)
    own = {id(p) for p in obj.channel.parameters()}
    groups = obj.param_groups()
    assert len(groups) == 1 and not any(id(p) in own for p in groups[0]["params"])
    assert len(groups[0]["params"]) == len(list(obj.encoder.parameters()))
    views = _views(obj, _canvases([0, 4, 8, 2]))
    before = [p.detach().clone() for p in obj.channel.parameters()]
    encoder_before = [p.detach().clone() for p in obj.encoder.parameters()]
    grads = _channel_grads(obj, views)
    obj.after_step(0, 10)
    for p, p0, g in zip(obj.channel.parameters(), before, grads, strict=True):
        assert torch.equal(p.detach(), p0 - 0.5 * g)
        assert p.grad is None
    assert any(g.abs().sum() > 0 for g in grads)
    assert all(torch.equal(p, q) for p, q in zip(obj.encoder.parameters(), encoder_before, strict=True))
    obj.after_step(1, 10)  # no gradient left: nothing moves
    assert all(torch.equal(p.detach(), p0 - 0.5 * g)
               for p, p0, g in zip(obj.channel.parameters(), before, grads, strict=True))


def test_own_adam_steps_at_its_own_rate_and_its_state_is_in_the_checkpoint():
    obj = _objective(channel_lr=1e-4)
    views = _views(obj, _canvases([1, 3, 5]))
    before = [p.detach().clone() for p in obj.channel.parameters()]
    grads = _channel_grads(obj, views)
    obj.after_step(0, 10)
    for p, p0, g in zip(obj.channel.parameters(), before, grads, strict=True):  # Adam's first step: lr sign(g)
        moved = (p.detach() - p0)[g.abs() > 1e-6]
        assert torch.allclose(moved, -1e-4 * torch.sign(g[g.abs() > 1e-6]), rtol=1e-2, atol=1e-9)
    state = obj.state_dict()
    assert "channel_optimiser._extra_state" in state
    again = _objective(channel_lr=1e-4)
    again.load_state_dict(state)
    moments = again.channel_optimiser.optimizer.state_dict()["state"]
    assert len(moments) == len(before) and torch.equal(
        moments[0]["exp_avg"], obj.channel_optimiser.optimizer.state_dict()["state"][0]["exp_avg"])


def test_encoder_steps_per_channel_step_skips_the_channel_in_between():
    obj = _objective(encoder_steps_per_channel_step=3)
    views = _views(obj, _canvases([0, 8]))
    for step, moves in ((0, False), (1, False), (2, True), (3, False), (5, True)):
        grads = _channel_grads(obj, views, step)
        assert all(g is None for g in grads) != moves, step
        assert all(p.grad is None for p in obj.encoder.parameters())
    base = _objective()  # on a channel step the loss is the plain one
    assert torch.equal(obj(views, step=2, phase="channel")["loss"], base(views, step=2, phase="channel")["loss"])


def test_channel_starts():
    images = _canvases([0, 4, 7])
    uniform = _objective()
    x = _views(uniform, images)[0]
    assert torch.allclose(uniform.probabilities(x), torch.full((3, 289), 1 / 289))
    rnd = _objective(channel_init="random", channel_init_std=0.05)
    last = rnd.channel.net[-1]
    assert 0.04 < last.weight.std().item() < 0.06 and last.bias.abs().sum() > 0
    assert not torch.allclose(rnd.probabilities(x), torch.full((3, 289), 1 / 289))
    # everything but the last layer is the uniform start's
    assert all(torch.equal(a, b) for (k, a), (_, b) in zip(uniform.state_dict().items(), rnd.state_dict().items(),
                                                           strict=True) if not k.startswith("channel.net.8"))
    hot = _objective(channel_init="random", channel_init_std=0.05, channel_temperature=0.5)
    logits = hot.channel.net(x).float()
    assert torch.allclose(hot.probabilities(x).log(), F.log_softmax(logits / 0.5, dim=1), atol=1e-6)
    # the control start on the digit: control_nats on every crop with ink, the rest of the logits zero
    control = _objective(channel_init="control_digit", control_nats=5.0)
    ink = nonblank_crops(torch.from_numpy(images), control.grid).float()
    assert torch.equal(ink_crops(x, control.grid), ink)
    k = ink.sum(dim=1)
    want = k * math.exp(5) / (k * math.exp(5) + 289 - k)
    assert torch.allclose((control.probabilities(x) * ink).sum(dim=1), want, atol=1e-5)
    assert all(torch.equal(a, b) for a, b in zip(uniform.state_dict().values(), control.state_dict().values(),
                                                 strict=True))


def test_entropy_annealing_schedules_lambda():
    assert [annealed(s, 0.08, 0.0025, 100) for s in (0, 50, 100, 400)] == pytest.approx(
        [0.08, 0.04125, 0.0025, 0.0025])
    assert annealed(7, None, 0.0025, 0) == 0.0025
    with pytest.raises(UserError, match="entropy_anneal_steps"):
        _objective(entropy_start=0.08)
    obj = _objective(entropy_start=0.08, entropy_anneal_steps=100)
    views = _views(obj, _canvases([2, 6]))
    obj.channel.net[-1].bias.data.normal_(0, 0.3)  # a channel with entropy below uniform: lambda shows
    for step, lam in ((0, 0.08), (50, 0.04125), (100, 0.0025), (300, 0.0025)):
        out = obj(views, step=step, phase="channel")
        assert out["loss"].item() == pytest.approx(out["bound"].item() - lam * out["entropy"].item(), abs=1e-6)


def test_gray01_input_is_one_channel_in_unit_range():
    from ident3d.training.views.learned_crop import LearnedCrop

    images = _canvases([0, 5], size=42)
    obj = _objective(42, input_format="gray01")
    norm = Normalize((0.1, 0.2, 0.3), (0.3, 0.4, 0.5))
    LearnedCrop(norm).bind(None, obj, 0)  # the view maker tells the objective its statistics
    assert obj.gray.stats.flatten().tolist() == pytest.approx([0.1, 0.2, 0.3, 0.3, 0.4, 0.5])
    x = norm(to_float(torch.from_numpy(images)))
    assert torch.allclose(obj.prepare(x), to_float(torch.from_numpy(images)).mean(dim=1, keepdim=True), atol=1e-6)
    assert obj.encoder.conv[0].in_channels == 1 and obj.channel.net[0].in_channels == 1
    u = torch.rand(2, obj.draws_per_image, generator=torch.Generator().manual_seed(0))
    for phase in ("encoder", "channel"):
        assert torch.isfinite(obj([x, u], phase=phase)["loss"])
    assert obj.crop_outputs(x)[1].shape == (2, 289, 50)
    again = _objective(42, input_format="gray01")
    again.load_state_dict(obj.state_dict())  # the statistics travel with the weights, to evaluation
    assert torch.equal(again.prepare(x), obj.prepare(x))
    plain = _objective(42)
    assert "gray.stats" not in plain.state_dict() and torch.equal(plain.prepare(x), x)


def _all_crops_plain(z: np.ndarray, p: np.ndarray, beta: float, jensen: bool) -> float:
    """Minus objective (2) over every crop, term by term (see ``all_crops_loss``)."""
    b, t, _ = z.shape
    total = 0.0
    for i in range(b):
        for a in range(t):
            sims = [beta * float(z[i, a] @ z[i, c]) for c in range(t)]
            pos = sum(p[i, c] * s for c, s in enumerate(sims)) if jensen else math.log(
                sum(p[i, c] * math.exp(s) for c, s in enumerate(sims)))
            neg = math.log(sum(p[j, c] * math.exp(beta * float(z[i, a] @ z[j, c])) for j in range(b)
                               for c in range(t)))
            total += p[i, a] * (neg - pos)
    return total / b


@pytest.mark.parametrize("jensen", [False, True])
def test_all_crops_objective_matches_a_plain_loop(jensen, monkeypatch):
    import ident3d.training.losses.crl_tac_exact as exact

    g = torch.Generator().manual_seed(4)
    z = F.normalize(torch.randn(3, 5, 4, generator=g, dtype=torch.float64), dim=-1)
    log_p = torch.log_softmax(torch.randn(3, 5, generator=g, dtype=torch.float64), dim=1)
    want = _all_crops_plain(z.numpy(), log_p.exp().numpy(), 0.7, jensen)
    assert all_crops_loss(z, log_p, 0.7, jensen).item() == pytest.approx(want, rel=1e-5)
    monkeypatch.setattr(exact, "ROWS_PER_BLOCK", 4)  # row blocks give the same value and gradient
    lp = log_p.float().clone().requires_grad_(True)
    all_crops_loss(z, lp, 0.7, jensen).backward()
    monkeypatch.setattr(exact, "ROWS_PER_BLOCK", 2048)
    lp2 = log_p.float().clone().requires_grad_(True)
    all_crops_loss(z, lp2, 0.7, jensen).backward()
    assert torch.allclose(lp.grad, lp2.grad, atol=1e-6)
    same = F.normalize(torch.ones(3, 5, 4), dim=-1)  # every crop alike: log B whatever P
    assert all_crops_loss(same, log_p.float(), 0.5).item() == pytest.approx(math.log(3), abs=1e-5)


def test_the_all_crops_channel_phase_evaluates_every_crop():
    obj = _objective(42, channel_crops="all", channel_init="random")
    views = _views(obj, _canvases([1, 7], size=42))
    out = obj(views, phase="channel")
    with torch.no_grad():
        _, h = obj.crop_outputs(views[0])
        want = all_crops_loss(h, obj.channel(views[0]), 0.5)
    assert out["bound"].item() == pytest.approx(want.item(), rel=1e-6)
    assert out["loss"].item() == pytest.approx(want.item() - 0.0025 * out["entropy"].item(), rel=1e-6)
    obj.zero_grad(set_to_none=True)
    out["loss"].backward()
    assert all(p.grad is None for p in obj.encoder.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in obj.channel.parameters())


def test_mass_per_cell_hand_constructed():
    """All of P(T|X) on a crop holding the digit for digits in cells 0-4, on a blank crop for cells 5-8: 1.0 and
    0.0 per cell, 4 cells on the blank canvas."""
    from ident3d.evaluation.channel import cell_columns, channel_summary

    grid = crop_grid(84)
    cells = list(range(9)) * 2
    images = _canvases(cells)
    ink = nonblank_crops(torch.from_numpy(images), grid).numpy()
    probs = np.zeros((len(cells), grid.n))
    for i, k in enumerate(cells):
        probs[i, np.flatnonzero(ink[i] if k < 5 else ~ink[i])[0]] = 1.0
    rc = np.array([divmod(k, 3) for k in cells])
    s = channel_summary(probs, images, grid, cells=rc)
    assert s["mass_per_cell"] == [1.0] * 5 + [0.0] * 4 and s["cells_on_blank"] == 4
    cols = cell_columns(s["mass_per_cell"])
    assert [cols[f"mass_cell_{k}"] for k in range(9)] == [1.0] * 5 + [0.0] * 4 and cols["cells_on_blank"] == 4.0
    half = probs[:9].copy()  # the cell-8 canvas: half its mass back on its digit
    half[8] = 0.5 * half[8] + 0.5 * np.eye(grid.n)[np.flatnonzero(ink[8])[0]]
    s = channel_summary(half, images[:9], grid, cells=rc[:9])
    assert s["mass_per_cell"] == [1.0] * 5 + [0.0] * 3 + [0.5] and s["cells_on_blank"] == 3
    missing = channel_summary(probs[:4], images[:4], grid, cells=rc[:4])["mass_per_cell"]
    assert missing[:4] == [1.0] * 4 and all(math.isnan(v) for v in missing[4:])
    assert math.isnan(cell_columns([math.nan] * 9)["cells_on_blank"])


def test_the_crl_tac_metric_reports_the_mass_per_cell():
    """The metric end to end on 42 px canvases, P(T|X) replaced by one that keeps the digit for cells 0-4 and the
    blank canvas for cells 5-8: mass_cell_K 1.0 / 0.0, cells_on_blank 4, and the list in the JSON."""
    from ident3d.evaluation.metric_base import ScoringData
    from ident3d.evaluation.metric_suite import METRICS

    assert METRICS.get("crl_tac").version == 2
    cells = list(range(9)) * 2
    images = _canvases(cells, size=42)
    obj = _objective(42).eval()
    grid = obj.grid

    def probabilities(x: torch.Tensor) -> torch.Tensor:
        ink = ink_crops(x, grid).bool()
        pixels = (x != x[:, :, :1, :1]).any(dim=1).nonzero()  # (image, row, column) of every inked pixel
        p = torch.zeros(len(x), grid.n)
        for i in range(len(x)):
            r, c = pixels[pixels[:, 0] == i][0, 1:].tolist()
            cell = (r // 14) * 3 + c // 14  # the digit's cell, from its ink
            keep = ink[i] if cell < 5 else ~ink[i]
            p[i, keep.nonzero()[0, 0]] = 1.0
        return p

    obj.probabilities = probabilities
    latents = np.array([[k % 2, *divmod(k, 3)] for k in cells], np.float32)
    store = SimpleNamespace(latent_names=["digit", "cell_row", "cell_col"], image_size=42)
    run = SimpleNamespace(objective=lambda device, image_size: obj,
                          cfg=SimpleNamespace(normalize={"mean": [0.1] * 3, "std": [0.3] * 3}))
    codes = np.zeros((9, 2))
    data = ScoringData(latents[:9], codes, latents[9:], codes, store=store, encoded={"latents": latents},
                       images=images, classes=latents[:, 0].astype(int))
    out = METRICS.get("crl_tac")()(run, data)
    assert [out[f"mass_cell_{k}"] for k in range(9)] == [1.0] * 5 + [0.0] * 4
    assert out["cells_on_blank"] == 4.0 and out["mass_per_cell"] == [1.0] * 5 + [0.0] * 4
    assert set(METRICS.get("crl_tac").columns) <= set(out)


def test_the_levers_config_rows_resolve():
    """Every row of the levers config is a valid crl_tac run (hyperparameters declared and in range), the rows
    differ in one lever each from CRL-TAC as today, and the untrained row moves no weight."""
    from ident3d.pipelines.kinds.compare import cell_config, load_config
    from ident3d.training.parts import resolve_args

    cfg = load_config("configs/crl_tac_mnist5k_levers.yaml")
    names = [row.name for row in cfg.rows]
    assert len(set(names)) == len(names)
    base = cell_config(cfg, cfg.rows[0], 0)
    resolve_args(base)
    for row in cfg.rows:
        tc = cell_config(cfg, row, 0)
        resolve_args(tc)
        CRLTAC(build_encoder("tac_cnn", 50, 84), **tc.objective_args)
        changed = {k for k in {**base.objective_args, **tc.objective_args}
                   if base.objective_args.get(k) != tc.objective_args.get(k)}
        assert len(changed) <= 3, (row.name, changed)
        if "control" in tc.objective_args.get("channel_init", ""):
            assert "control" in row.name.lower()
    untrained = [r for r in cfg.rows if r.name.startswith("untrained")]
    assert len(untrained) == 1 and untrained[0].train["steps"] == 1 and untrained[0].train["lr"] <= 1e-29


@pytest.fixture(scope="module")
def tiny_canvas_store(tmp_path_factory):
    """64 of sklearn's digits at 14 px on 42 px canvases, as a store."""
    from ident3d.ingest.datasets import _subset, canvas, digits, write_dataset_store

    return write_dataset_store(canvas(_subset(digits(14), slice(0, 64)), 0), tmp_path_factory.mktemp("c") / "s.zarr")


def test_levers_through_the_trainer_resume_exactly(tiny_canvas_store, tmp_path):
    """A run with the channel on its own Adam, 2 encoder steps per channel step and 1-channel [0, 1] input, trained
    4 steps at once or 2 then resumed to 4, ends with the same weights (the channel optimiser's moments are in the
    checkpoint), and evaluation's objective undoes the store's standardisation it was trained with."""
    from ident3d.evaluation.probe_run import load_objective
    from ident3d.training.trainer import TrainConfig, train

    hp = {"channel_lr": 3e-4, "encoder_steps_per_channel_step": 2, "input_format": "gray01"}

    def cfg(steps: int) -> TrainConfig:
        return TrainConfig(data=str(tiny_canvas_store), objective="crl_tac", views="learned_crop", encoder="tac_cnn",
                           out_dim=8, steps=steps, batch_size=8, lr=1e-3, seed=0, checkpoint_every=2, log_every=1,
                           device="cpu", objective_args=dict(hp))

    train(cfg(4), tmp_path / "once", progress=False)
    train(cfg(2), tmp_path / "twice", progress=False)
    train(cfg(4), tmp_path / "twice", resume=True, progress=False)
    (c1, a), (_, b) = load_objective(str(tmp_path / "once"), 42), load_objective(str(tmp_path / "twice"), 42)
    assert a.state_dict().keys() == b.state_dict().keys()
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items() if torch.is_tensor(v))
    moments = [s["exp_avg"] for s in a.channel_optimiser.optimizer.state_dict()["state"].values()]
    assert moments and all(torch.equal(m, n["exp_avg"]) for m, n in zip(
        moments, b.channel_optimiser.optimizer.state_dict()["state"].values(), strict=True))
    assert a.gray.stats.flatten().tolist() == pytest.approx([*c1.normalize["mean"], *c1.normalize["std"]])
