"""J >= 2 views per image (``--n-views J``, issue 23): DA view makers draw J independent views, SimVAE's loss
through the trainer's own path is ``simvae_terms`` on those J views, objectives and view makers with a fixed count
refuse J != 2 in one line, and a J = 3 run records its J."""

import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from helpers import run_cli

from ident3d.causal.errors import UserError
from ident3d.training.views import Normalize, make_view_maker

IDENTITY = Normalize((0.0,) * 3, (1.0,) * 3)
SMALL_SIMVAE = ["--objective", "simvae", "--views", "crop_large+colour", "--encoder", "cnn", "--out-dim", "4",
                "--hp", "decoder_width=32", "--batch-size", "16", "--device", "cpu", "--no-progress"]


@pytest.fixture(scope="module")
def store(tiny_store):
    return tiny_store


def test_simvae_loss_with_three_views_through_the_trainer_is_simvae_terms(store):
    from ident3d.training.components import build_run
    from ident3d.training.losses.gaussian import gaussian_nll, sample_posterior, simvae_terms
    from ident3d.training.trainer import TrainConfig, view_generator

    cfg = TrainConfig(data=str(store), objective="simvae", views="crop_large+colour", n_views=3, encoder="cnn",
                      out_dim=4, batch_size=16, device="cpu", objective_args={"decoder_width": 32})
    torch.manual_seed(cfg.seed)
    run = build_run(cfg)
    assert run.views.n_views == 3
    batch = next(iter(run.loader))
    views = run.views(batch, view_generator(cfg.seed, 0))
    assert len(views) == 3 and all(v.shape == (16, 3, 32, 32) for v in views)
    objective = run.objective.eval()
    with torch.no_grad():
        torch.manual_seed(7)
        got = objective(views)
        torch.manual_seed(7)  # the same posterior draws, in the same order (one per view)
        logvar, z, x_hat = [], [], []
        for v in views:
            mu, lv = objective.posterior(v)
            zj = sample_posterior(mu, lv)
            logvar.append(lv), z.append(zj), x_hat.append(objective.decoder(zj))
        x = torch.stack([objective.target(v) for v in views])
        want = simvae_terms(x, torch.stack(x_hat), torch.stack(z), torch.stack(logvar), lik_var=0.02, prior_var=0.15)
        pair = simvae_terms(x[:2], torch.stack(x_hat[:2]), torch.stack(z[:2]), torch.stack(logvar[:2]), 0.02, 0.15)
    for key in ("loss", "rec", "entropy", "spread", "centre"):
        assert torch.allclose(got[key], want[key].mean(), rtol=1e-5, atol=1e-4), (key, got[key], want[key].mean())
    assert torch.allclose(got["mse"], (x - torch.stack(x_hat)).pow(2).mean())
    assert abs(float(got["loss"] - pair["loss"].mean())) > 1.0  # the third view is in the loss
    third = gaussian_nll(x[2], x_hat[2], 0.02).mean()  # the reconstruction term sums the J views' NLLs
    assert torch.allclose(got["rec"], pair["rec"].mean() + third, rtol=1e-5)


@pytest.mark.parametrize("spec,j", [("crop_large+colour", 4), ("paper004_colour", 3), ("paper004_grey", 5)])
def test_da_view_maker_makes_j_independently_augmented_views(spec, j):
    images = torch.randint(0, 256, (8, 32, 32, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    vm = make_view_maker(spec, IDENTITY, n_views=j)
    views = vm({"images": images}, torch.Generator().manual_seed(0))
    assert vm.n_views == j and len(views) == j
    boxes = [vm.last_params[f"view{i}/crop_box"] for i in range(j)]
    assert f"view{j}/crop_box" not in vm.last_params
    for a in range(j):
        for b in range(a + 1, j):
            assert (boxes[a] != boxes[b]).flatten(1).any(1).all(), (a, b)  # every image, a different crop
            assert ((views[a] - views[b]).abs().flatten(1).amax(1) > 1e-3).all(), (a, b)
    if "colour" in spec:
        brightness = torch.stack([vm.last_params[f"view{i}/brightness"] for i in range(j)])
        assert len({round(float(v), 6) for v in brightness[:, 0]}) == j  # each view its own jitter draw
    again = vm({"images": images}, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(views, again, strict=True))  # a function of the generator


def test_default_is_two_views_and_fixed_makers_keep_their_counts():
    assert make_view_maker("crop_large+colour", IDENTITY).n_views == 2
    assert make_view_maker("rotation", IDENTITY, n_views=2).n_views == 2
    assert make_view_maker("labels", IDENTITY).n_views == 3
    assert make_view_maker("lt_exact:hues", IDENTITY).n_views == 2


@pytest.mark.parametrize("spec,says", [
    ("rotation", "view maker rotation"), ("crop_large+rotation", "rotation recipe makes exactly 2"),
    ("lt_exact:hues", "view maker lt_exact"), ("lt_nn:positions", "view maker lt_nn"),
    ("labels", "view maker labels"), ("learned_crop", "view maker learned_crop"),
])
def test_fixed_count_view_makers_refuse_j_in_one_line(spec, says):
    with pytest.raises(UserError) as err:
        make_view_maker(spec, IDENTITY, n_views=3)
    text = str(err.value)
    assert "\n" not in text and text.startswith("--n-views 3: ") and says in text, text


@pytest.mark.parametrize("extra,says", [
    (["--objective", "infonce"], "--n-views 3: objective infonce takes 2 views (use --n-views 2); objectives that "
                                 "take J views: beta_vae, gin_nll, simvae, vae"),
    (["--objective", "cr_vae"], "--n-views 3: objective cr_vae takes 2 views"),
    (["--objective", "simvae", "--views", "lt_exact:hues"], "--n-views 3: view maker lt_exact makes a fixed set"),
])
def test_j_views_for_a_fixed_count_refused_in_one_line_before_anything_is_written(store, tmp_path, extra, says):
    out = tmp_path / "run"
    r = run_cli("train", "--data", store, "--out", out, "--encoder", "cnn", "--batch-size", "16", "--steps", "2",
                "--no-progress", "--n-views", "3", *extra)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert says in lines[0], lines[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_n_views_below_two_refused(store, tmp_path):
    r = run_cli("train", "--data", store, "--out", tmp_path / "run", *SMALL_SIMVAE, "--steps", "2", "--n-views", "1")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "--n-views must be a whole number >= 2, got 1" in lines[0] and not (tmp_path / "run").exists()


def test_simvae_run_with_three_views_finishes_and_records_j(store, tmp_path):
    from ident3d.training.trainer import load_checkpoint

    run = tmp_path / "simvae_j3"
    r = run_cli("train", "--data", store, "--out", run, *SMALL_SIMVAE, "--steps", "3", "--n-views", "3",
                "--log-every", "1")
    assert r.returncode == 0, r.stderr
    assert "crop_large+colour x 3 views" in r.stdout
    state = load_checkpoint(run / "checkpoint.pt")
    assert state["step"] == 3 and state["config"]["n_views"] == 3
    assert json.loads((run / "config.json").read_text())["n_views"] == 3
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert all(torch.isfinite(torch.tensor(row["loss"])) for row in rows)
    assert all("views/view2/crop_box" in row and "views/view3/crop_box" not in row for row in rows)


def test_saved_runs_and_grid_cells_from_before_n_views_stay_valid(store):
    from ident3d.pipelines.cells import run_settings
    from ident3d.training.run_dir import RunDir
    from ident3d.training.trainer import TrainConfig

    cfg = TrainConfig(data=str(store), objective="simvae", views="none")
    old = {k: v for k, v in asdict(cfg).items() if k != "n_views"}  # a config.json written before the field
    RunDir(Path("run")).check_resume(cfg, old)  # no "n_views differ"
    with pytest.raises(UserError, match="n_views differ"):
        RunDir(Path("run")).check_resume(TrainConfig(data=str(store), objective="simvae", views="none", n_views=3),
                                         old)
    assert "n_views" not in run_settings(TrainConfig(data="-", views="none"))  # an old cell's key is unchanged
    assert run_settings(TrainConfig(data="-", objective="simvae", views="none", n_views=3))["n_views"] == 3


def test_synthetic_source_decides_its_view_count():
    from ident3d.training.synthetic.run import build_synthetic_run
    from ident3d.training.trainer import TrainConfig

    source = {"kind": "latent_pairs", "space": "box", "dim": 3, "conditional": "normal"}
    cfg = TrainConfig(data="synthetic", objective="simvae", encoder="mlp", out_dim=3, batch_size=8, views="synthetic",
                      source=source)
    assert build_synthetic_run(cfg).views.n_views == 2
    with pytest.raises(UserError, match="^n_views 3: the synthetic source latent_pairs makes 2 views"):
        build_synthetic_run(TrainConfig(**{**asdict(cfg), "n_views": 3}))
