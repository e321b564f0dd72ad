"""Issue 35 §3: the multi-object study is an experiment on the engine. A tiny copy of configs/multi_object_cpu.yaml
(multi3dident with a compositional split: train and test stores without the held-out corner, an ``ood`` store with
only it) trains object-centric cells and scores them with fg_ari, slot_r2 and sis on both test stores; the same
numbers come from ``ident3d evaluate --metrics fg_ari,slot_r2,sis`` on a cell's run, and bad metric requests are one
line."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr
from helpers import run_cli

from ident3d.evaluation.metric_base import METRICS
from ident3d.pipelines.kinds.compare import load_config, run_compare
from ident3d.store.info import store_info

ROOT = Path(__file__).resolve().parents[1]
METRIC_COLUMNS = ["fg_ari/fg_ari", "slot_r2/r2", "slot_r2_masks/r2", "sis/sis"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The config's stores at 32 px (24-32 images), 3 training steps, one seed, the untrained and additive rows."""
    tmp = tmp_path_factory.mktemp("study")
    cfg = yaml.safe_load((ROOT / "configs" / "multi_object_cpu.yaml").read_text())
    for key, n in (("train", 32), ("test", 24), ("ood", 24)):
        cfg["stores"][key].update(n=n, resolution=32, samples=1)
    cfg["train"].update(steps=3, batch_size=8, checkpoint_every=3)
    cfg["rows"] = [r for r in cfg["rows"] if r["name"] in ("untrained", "additive_ae")]
    cfg["seeds"], cfg["evaluate"] = [0], {"fit": 10, "score": 14, "kernel": False}
    cfg["metrics"].remove("block_mcc")  # it needs 10 images with all 4 objects; 24-image stores have none
    path = tmp / "multi_object.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp / "out"
    return cfg, out, run_compare(load_config(path), out)


def test_the_table_scores_every_cell_in_and_out_of_distribution(study):
    cfg, out, result = study
    table = json.loads((out / "table.json").read_text())
    assert table["columns"] == METRIC_COLUMNS + [f"ood:{c}" for c in METRIC_COLUMNS]
    assert list(table["rows"]) == ["untrained", "additive_ae"]
    report = json.loads((out / "cells" / "additive_ae" / "seed_0" / "report.json").read_text())
    assert result["table"]["additive_ae"]["ood:sis/sis"][0] == pytest.approx(report["also"]["ood"]["sis"]["sis"])
    assert result["table"]["additive_ae"]["fg_ari/fg_ari"][0] == pytest.approx(report["metrics"]["fg_ari"]["fg_ari"])


def test_the_split_holds_out_the_corner_from_training_and_shows_only_it_out_of_distribution(study):
    cfg, out, _ = study
    corner = cfg["stores"]["ood"]["support"]["only"]
    for key, inside in (("train", False), ("test", False), ("ood", True)):
        path = str(out / "stores" / f"{key}.zarr")
        names, lat = store_info(path).latent_names, zarr.open_group(path, mode="r")["latents"][:]
        hit = np.all([(lat[:, names.index(n)] >= lo) & (lat[:, names.index(n)] <= hi)
                      for n, (lo, hi) in corner.items()], axis=0)
        assert hit.all() if inside else not hit.any(), key


def test_evaluate_cli_gives_the_cells_object_metrics(study, tmp_path):
    _, out, _ = study
    cell = out / "cells" / "additive_ae" / "seed_0"
    report = json.loads((cell / "report.json").read_text())
    r = run_cli("evaluate", "--run", str(cell), "--data", str(out / "stores" / "ood.zarr"), "--fit", "10",
                "--score", "14", "--no-kernel", "--metrics", "fg_ari,slot_r2,sis", "--out", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    got = json.loads((tmp_path / "r.json").read_text())["metrics"]
    for name, col in (("fg_ari", "fg_ari"), ("slot_r2", "r2"), ("sis", "sis")):
        assert got[name][col] == pytest.approx(report["also"]["ood"][name][col], abs=1e-9)


def test_bad_metric_requests_are_one_line(study, tmp_path):
    _, out, _ = study
    cell = out / "cells" / "additive_ae" / "seed_0"
    base = ["evaluate", "--run", str(cell), "--fit", "10", "--score", "14", "--no-kernel"]
    r = run_cli(*base, "--data", str(out / "stores" / "ood.zarr"), "--metrics", "fg_arii")
    assert r.returncode == 2 and "unknown metric 'fg_arii'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    # a run whose model gives no slots: the untrained row is slot_attention, so train a tiny plain encoder here
    plain = tmp_path / "plain"
    r = run_cli("train", "--data", str(out / "stores" / "train.zarr"), "--objective", "infonce", "--encoder", "cnn",
                "--views", "colour", "--steps", "1", "--batch-size", "8", "--out", str(plain), "--no-progress")
    assert r.returncode == 0, r.stderr
    r = run_cli("evaluate", "--run", str(plain), "--data", str(out / "stores" / "test.zarr"), "--fit", "10",
                "--score", "14", "--no-kernel", "--metrics", "sis")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        r.stderr.strip()] and "metric sis: needs an object-centric run" in r.stderr


def test_evaluate_help_lists_every_registered_metric():
    r = run_cli("evaluate", "--help")
    text = " ".join(r.stdout.split())
    assert all(name in text for name in METRICS.names()), [n for n in METRICS.names() if n not in text]


@pytest.mark.parametrize("change, message", [
    ({"metrics": None}, "stores.ood: is scored by the config's metrics; add metrics"),
    ({"stores.bad key": {"n": 8, "resolution": 32, "samples": 1}}, "stores: key 'bad key' must be a plain name"),
    ({"stores.ood.support": {"only": {"obj9_pos_x": [0, 1]}}}, "obj9_pos_x"),
])
def test_bad_study_configs_are_one_line_before_anything_renders(tmp_path, change, message):
    from ident3d.causal.errors import UserError

    cfg = yaml.safe_load((ROOT / "configs" / "multi_object_cpu.yaml").read_text())
    for key, value in change.items():
        *parents, last = key.split(".", 2) if key.startswith("stores.ood") else key.split(".", 1)
        node = cfg
        for part in parents:
            node = node[part]
        if value is None:
            node.pop(last)
        else:
            node[last] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(UserError) as err:
        load_config(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()
