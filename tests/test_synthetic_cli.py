"""``ident3d synthetic``: each shipped config trains and its metric moves the right way in a few steps (on a
smaller problem where the full one needs minutes), cells resume, and bad input is a one-line error (exit 2)."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import read_png

from ident3d.causal.yamlnum import load_yaml
from ident3d.pipelines.cli import main
from ident3d.pipelines.kinds.synthetic import check_config, run_synthetic, slug

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "synthetic"


def small(name: str, row: int, **train) -> dict:
    """Config ``name`` cut to one row, with a cheaper schedule and evaluation (same source kind and objective), as
    the YAML file gives it (a dict; ``run`` parses it)."""
    cfg = load_yaml((CONFIGS / f"{name}.yaml").read_text())
    cfg["rows"] = [cfg["rows"][row]]
    cfg["train"].update({"checkpoint_every": 10_000, "warmup_steps": 0, "schedule": "constant", **train})
    cfg["evaluate"] = {"fit": 2000, "score": 2000}
    return cfg


def run(cfg: dict, out: Path, **kwargs) -> dict:
    """``run_synthetic`` on the parsed config ``cfg``, seed 0."""
    return run_synthetic(check_config(copy.deepcopy(cfg), "test"), out, seeds=[0], progress=False, **kwargs)


def scores(cfg: dict, out: Path, steps: int) -> dict:
    table = run(cfg, out, steps=steps, figures=False)
    return {k: v["mean"] for k, v in table["rows"][cfg["rows"][0]["name"]]["stats"].items()}


@pytest.mark.parametrize("row, metric", [(0, "linear_r2"), (1, "mcc")])
def test_paper001_matching_rows_learn_their_metric(tmp_path, row, metric):
    cfg = small("paper001", row, out_dim=3, batch_size=256, lr=3e-3)
    cfg["rows"][0]["source"]["dim"] = 3  # 3 latents: identified in 200 steps instead of thousands
    before = scores(cfg, tmp_path / "before", 1)[metric]
    after = scores(cfg, tmp_path / "after", 200)[metric]
    assert before < 0.9 and after > 0.95, (before, after)


def test_paper000_learns_content_not_style(tmp_path):
    cfg = small("paper000", 2, lr=3e-3)
    before = scores(cfg, tmp_path / "before", 1)
    after = scores(cfg, tmp_path / "after", 200)
    assert after["linear_r2/content"] > before["linear_r2/content"] + 0.2
    assert after["linear_r2/content"] > after["linear_r2/style"] + 0.1


def test_cells_resume_and_finished_cells_are_kept(tmp_path, capsys):
    """A cell trained but not scored is scored from its checkpoint, not trained again; a finished cell is reused.
    (Kills, Ctrl-C and changed settings: tests/test_synthetic_cells.py.)"""
    cfg = small("paper001", 0, batch_size=64)
    out = tmp_path / "run"
    cell = out / "cells" / slug(cfg["rows"][0]["name"]) / "seed_0"
    cfg["train"]["checkpoint_every"] = 5
    table = run(cfg, out, steps=10, figures=True)
    first = (cell / "scores.json").read_text()
    (cell / "scores.json").unlink()  # as if stopped after the last checkpoint, before scoring
    again = run(cfg, out, steps=10, figures=False)
    log = [json.loads(line)["step"] for line in (cell / "metrics.jsonl").read_text().splitlines()]
    assert log == [10]  # not trained again
    assert (cell / "scores.json").read_text() == first and again["rows"] == table["rows"]
    run(cfg, out, steps=10, figures=False)
    assert (cell / "scores.json").read_text() == first
    assert {p.name for p in out.iterdir()} >= {"table.md", "table.csv", "table.json", "figures"}
    figure = out / "figures" / f"{slug(cfg['rows'][0]['name'])}.png"
    h, w, colours = read_png(figure)
    assert h > 100 and w > 100 and colours > 20
    # results kept without their weights (as under results/): the table is rewritten, the figure kept and named
    (cell / "checkpoint.pt").unlink()
    before = figure.read_bytes()
    capsys.readouterr()
    assert run(cfg, out, steps=10, figures=True)["rows"] == table["rows"]
    assert figure.read_bytes() == before and "has no checkpoint.pt to draw from" in capsys.readouterr().out


def test_bad_input_is_one_line_exit_2(tmp_path, capsys):
    bad_row = tmp_path / "bad_row.yaml"
    bad_row.write_text(yaml.safe_dump({"name": "x", "rows": [{"name": "r", "source": {"kind": "latent_pairs"},
                                                                 "hp": {"q": 1}}], "train": {"objective": "lp_infonce",
                                                                                            "encoder": "mlp"}}))
    image_encoder = tmp_path / "image_encoder.yaml"
    image_encoder.write_text(yaml.safe_dump({"name": "x", "rows": [{"name": "r", "source": {"kind": "latent_pairs"}}],
                                             "train": {"encoder": "cnn"}}))
    for args, words in [(["--config", str(tmp_path / "missing.yaml")], "not found"),
                        (["--config", str(bad_row)], "no hyperparameter 'q'"),
                        (["--config", str(image_encoder)], "takes images"),
                        (["--config", str(CONFIGS / "paper001.yaml"), "--rows", "nope", "--out", str(tmp_path / "o")],
                         "no row named 'nope'"),
                        (["--config", str(CONFIGS / "paper001.yaml"), "--steps", "0"], "--steps"),
                        (["--config", str(CONFIGS / "paper003_emnist.yaml")], "EMNIST digits not found")]:
        assert main(["synthetic", *args]) == 2, args
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o" / "cells").exists()


def test_the_command_exits_2_without_a_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ident3d.pipelines.cli", "synthetic", "--config", str(tmp_path / "none.yaml")],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 2 and "Traceback" not in r.stderr and "not found" in r.stderr


def test_paper003_gin_separates_the_informative_dims(tmp_path):
    """The random RealNVP hides little (the mixed data's top-2 std dims already match the informative latents),
    so the test is the spectrum: training squeezes the noise dims, leaving 2 clear top dims."""
    cfg = small("paper003", 0, schedule="step", batch_size=500)  # augment 2 dims

    def stats(steps: int, out: str) -> dict:
        table = run(cfg, tmp_path / out, steps=steps, figures=False)
        return {k: v["mean"] for k, v in table["rows"][cfg["rows"][0]["name"]]["stats"].items()}

    before, after = stats(1, "before"), stats(150, "after")
    assert before["spectrum/2"] < 10 * before["spectrum/3"]
    assert after["spectrum/2"] > 30 * after["spectrum/3"] and after["top_corr"] > 0.95, after


def test_a_diverging_cell_is_reported_and_the_others_go_on(tmp_path):
    cfg = small("paper001", 0, batch_size=64)
    bad = copy.deepcopy(cfg["rows"][0])
    bad["name"], bad["train"] = "exploding lr", {"lr": 1e12}
    cfg["rows"].append(bad)
    table = run(cfg, tmp_path, steps=20, figures=False)
    assert table["rows"][cfg["rows"][0]["name"]]["stats"]["linear_r2"]["n"] == 1
    assert "exploding lr" not in table["rows"]  # named below the table instead, as every kind names them
    assert [(d["row"], d["seed"]) for d in table["diverged"]] == [("exploding lr", 0)]
    assert "loss became" in table["diverged"][0]["why"]
    assert "exploding lr, seed 0 (loss became" in (tmp_path / "table.md").read_text()
