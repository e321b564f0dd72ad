"""ident3d evaluate on real renders: content/style columns follow the view maker, an easy latent is
recovered, and bad inputs (no checkpoint, a store of another scene) exit 2 with one line."""

import json

import numpy as np
import pytest
from helpers import run_cli

from ident3d.pipelines.cli import main


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_store):
    """A 40-step run on the tiny store (conftest), a held-out store of its scene and a store of another scene."""
    from ident3d.render import render_store

    d = tmp_path_factory.mktemp("eval")
    common = {"settings": {"resolution": 32, "samples": 4}, "chunk_size": 48, "workers": 1, "progress": False}
    assert render_store(d / "test.zarr", scene="causal3dident", n=96, seed=9, **common).ok
    assert render_store(d / "other.zarr", scene="3dident", n=48, **common).ok
    assert main(["train", "--data", str(tiny_store), "--out", str(d / "run"), "--encoder", "cnn",
                 "--objective", "infonce", "--views", "lt_exact:hues", "--steps", "40", "--batch-size", "32",
                 "--lr", "1e-3", "--no-progress"]) == 0
    return d


def test_report_marks_style_by_view_maker_and_scores_latents(setup, capsys):
    out = setup / "report.json"
    assert main(["evaluate", "--run", str(setup / "run"), "--data", str(setup / "test.zarr"), "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["style_latents"] == ["bg_hue", "obj_hue", "spot_hue"]
    printed = capsys.readouterr().out
    assert "hues: background (S)" in printed and "positions: object (C)" in printed
    layer = rep["layers"]["output"]
    assert set(layer["r2_kernel"]) == {"pos_x", "pos_y", "pos_z", "rot_alpha", "rot_beta", "rot_gamma",
                                       "spot_angle", "obj_hue", "spot_hue", "bg_hue"}
    assert rep["layers"]["inner"]["dim"] == 100 and layer["dim"] == 10
    # paper 000's finding at toy scale: LT pairs that change the hues discard them (style), positions stay
    r2 = rep["layers"]["inner"]["r2_kernel"]
    hues, positions = [r2[k] for k in ("obj_hue", "spot_hue", "bg_hue")], [r2[k] for k in ("pos_x", "pos_y")]
    assert max(hues) < 0.25 and sum(positions) / 2 > max(hues) + 0.2, r2
    assert rep["n_fit"] == 32 and rep["n_score"] == 64
    hits = layer["class_accuracy"] * 64  # the probe's accuracy is counted over the 64 scored images
    assert hits == pytest.approx(round(hits), abs=1e-9) and 0 < round(hits) <= 64


def test_bad_inputs_exit_2(setup, tmp_path):
    (tmp_path / "empty_run").mkdir()
    (tmp_path / "empty_run" / "config.json").write_text((setup / "run" / "config.json").read_text())
    cases = [
        (["--run", str(tmp_path / "empty_run"), "--data", str(setup / "test.zarr")], "no checkpoint.pt"),
        (["--run", str(setup / "run"), "--data", str(setup / "other.zarr")], "has classes none but the run was trained on Teapot, Hare"),
        (["--run", str(tmp_path), "--data", str(setup / "test.zarr")], "not a run directory"),
    ]
    for args, expected in cases:
        r = run_cli("evaluate", *args)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and expected in r.stderr, r.stderr


def test_metrics_on_an_iid_run(setup, tmp_path, capsys):
    """--metrics dci,mig,sap on the i.i.d. run: the report's numbers are the metrics of the run's own output codes
    against the test store's latents on the report's fit/score splits (recomputed here from the encoding); an
    unknown metric is one line before any work."""
    from ident3d.evaluation.dci import dci
    from ident3d.evaluation.encode import encode_store
    from ident3d.evaluation.mig import mig
    from ident3d.store.info import store_info
    from ident3d.training.run_dir import RunDir

    out = tmp_path / "m.json"
    assert main(["evaluate", "--run", str(setup / "run"), "--data", str(setup / "test.zarr"), "--no-kernel",
                 "--metrics", "dci,mig,sap", "--out", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert set(rep["metrics"]) == {"dci", "mig", "sap"} and rep["metrics"]["mig"]["n_bins"] == 20
    run = RunDir(setup / "run").load()
    info = store_info(str(setup / "test.zarr"))
    enc = encode_store(run, info, info.rows[:rep["n_fit"] + rep["n_score"]], device="cpu")
    z, y, k = enc["output"], enc["latents"], rep["n_fit"]
    want = dci(y[:k], z[:k], y[k:], z[k:])
    assert rep["metrics"]["dci"]["disentanglement"] == pytest.approx(want.disentanglement, abs=1e-6)
    assert rep["metrics"]["mig"]["mig"] == pytest.approx(mig(y[k:], z[k:]).score, abs=1e-9)
    shuffled = mig(y[k:], z[k:][np.random.default_rng(0).permutation(len(z) - k)]).score
    assert rep["metrics"]["mig"]["mig"] != pytest.approx(shuffled, abs=1e-9)  # the rows are paired, not any rows
    assert "dci (output layer): disentanglement" in capsys.readouterr().out
    r = run_cli("evaluate", "--run", str(setup / "run"), "--data", str(setup / "test.zarr"), "--metrics", "dci,bogus")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "unknown metric 'bogus'" in r.stderr
    r = run_cli("evaluate", "--run", str(setup / "run"), "--data", str(setup / "test.zarr"), "--no-kernel",
                "--metrics", "temporal", "--out", str(tmp_path / "t.json"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "needs a sequence store" in r.stderr and not (tmp_path / "t.json").exists()


def test_metric_flags_say_which_metric_and_add_up(setup, tmp_path):
    """Issue 32.12: too few samples named no metric; an empty --metrics computed nothing silently; a repeated
    --metrics kept only the last."""
    base = ["evaluate", "--run", setup / "run", "--data", setup / "test.zarr", "--no-kernel"]
    r = run_cli(*base, "--score", "22", "--metrics", "mig")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "metric mig: need at least 40 samples" in r.stderr, r.stderr
    r = run_cli(*base, "--metrics", "", "--out", tmp_path / "e.json")
    assert r.returncode == 2 and "--metrics names no metric" in r.stderr and not (tmp_path / "e.json").exists()
    r = run_cli(*base, "--metrics", "sap", "--metrics", "mig", "--out", tmp_path / "two.json")
    assert r.returncode == 0, r.stderr
    assert set(json.loads((tmp_path / "two.json").read_text())["metrics"]) == {"sap", "mig"}
