"""Every experiment kind runs on the one engine (``ident3d.pipelines.experiment``): a finished cell is reused on a re-run, a
cell whose settings changed is moved aside and run again, another experiment's folder is refused, and the scaling
kind's curves are the numbers of its points' own compare outputs. Real bpy renders (16 px), real training."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import run_cli

from ident3d.causal.errors import UserError

STORE = {"resolution": 16, "samples": 1, "seed": 0}
TRAIN = {"objective": "infonce", "encoder": "cnn", "out_dim": 4, "steps": 3, "batch_size": 16, "lr": 1e-3}


def compare_cfg(name: str, steps: int = 3) -> dict:
    return {"name": name, "scene": "causal3dident", "seeds": [0],
            "stores": {"train": {**STORE, "n": 32, "views": "hues:hues"}, "test": {**STORE, "n": 32, "seed": 1}},
            "train": {**TRAIN, "steps": steps}, "evaluate": {"fit": 16, "score": 16, "kernel": False},
            "rows": [{"name": "LT: change hues", "views": "lt_exact:hues"}]}


def run_kind(kind: str, tmp: Path, steps: int) -> tuple[Path, list[Path]]:
    """Run a tiny experiment of ``kind`` (training ``steps`` steps per cell); returns its output and the files that
    mark its cells finished. Synthetic and compare run their config file through the command with ``--set
    train.steps=N`` (the file stays as written); scaling writes its points' configs."""
    out = tmp / kind
    if kind in ("synthetic", "compare"):
        config = tmp / f"{kind}.yaml"
        if kind == "synthetic":
            cfg = {"kind": "synthetic", "name": "tiny", "seeds": [0], "evaluate": {"fit": 200, "score": 200},
                   "train": {"objective": "lp_infonce", "encoder": "mlp", "out_dim": 3, "steps": 3, "batch_size": 32},
                   "rows": [{"name": "box", "source": {"kind": "latent_pairs", "dim": 3}, "hp": {"p": 2}}]}
        else:
            cfg = {"kind": "compare", **compare_cfg("tiny")}
        config.write_text(yaml.safe_dump(cfg))
        r = run_cli("experiment", config, "--out", out, "--no-progress", "--set", f"train.steps={steps}")
        assert r.returncode == 0, r.stderr
        if kind == "synthetic":
            return out, [out / "cells/box/seed_0/scores.json"]
        return out, [out / f"cells/{row}/seed_0/report.json" for row in ("lt_change_hues", "supervised_ceiling")]
    from ident3d.pipelines.kinds.scaling import load_config, run_scaling

    points = []
    for i, n_steps in enumerate((steps, steps + 1)):
        path = tmp / f"point{i}.yaml"
        path.write_text(yaml.safe_dump(compare_cfg(f"point{i}", n_steps)))
        points.append({"config": str(path)})
    (tmp / "scaling.yaml").write_text(yaml.safe_dump({"name": "tiny", "paper": "001", "points": points}))
    run_scaling(load_config(tmp / "scaling.yaml"), out)
    return out, [out / f"points/point{i}/cells/{row}/seed_0/report.json"
                 for i in (0, 1) for row in ("lt_change_hues", "supervised_ceiling")]


@pytest.mark.parametrize("kind", ["synthetic", "compare", "scaling"])
def test_every_kind_reuses_finished_cells_and_reruns_a_stale_one(tmp_path, kind):
    out, done = run_kind(kind, tmp_path, steps=3)
    assert all(p.exists() for p in done)
    stamps = [p.stat().st_mtime_ns for p in done]
    assert (out / f"{'experiment' if kind == 'scaling' else kind}.json").exists()
    run_kind(kind, tmp_path, steps=3)  # the same settings: nothing is trained or scored again
    assert [p.stat().st_mtime_ns for p in done] == stamps
    assert not list(out.rglob("*.stale-*"))
    run_kind(kind, tmp_path, steps=4)  # one setting changed: every cell runs again, the old ones kept aside
    assert all(p.exists() for p in done)
    assert all(p.stat().st_mtime_ns != t for p, t in zip(done, stamps, strict=True))
    aside = sorted(p.name for p in out.rglob("*.stale-1"))
    assert len(aside) == len(done)
    steps = [json.loads((p.parent / "config.json").read_text())["steps"] for p in done]
    assert steps == ([4] if kind == "synthetic" else [4, 4] if kind == "compare" else [4, 4, 5, 5])


def test_scaling_curves_are_the_points_own_numbers(tmp_path):
    """curves.json holds, per point in config order, each row's mean linear R^2 as the mean over its cell's
    report (not a copy of another point's), the scale read from the point's config, and a fact per SSL row. Another
    --layer is refused on the finished output (nothing changes), and with --overwrite replaces its tables with that
    layer's numbers, reusing every cell."""
    out, done = run_kind("scaling", tmp_path, steps=3)
    assert json.loads((out / "curves.json").read_text())["layer"] == "output"
    curves = json.loads((out / "curves.json").read_text())["paper001"]
    assert [p["name"] for p in curves["points"]] == ["point0", "point1"]
    assert [p["scale"]["steps"] for p in curves["points"]] == [3, 4]
    for i, point in enumerate(curves["points"]):
        report = json.loads((out / f"points/point{i}/cells/lt_change_hues/seed_0/report.json").read_text())
        r2 = report["layers"]["output"]["r2_linear"]
        assert point["rows"]["lt_change_hues"]["mean_r2"] == pytest.approx(statistics.fmean(r2.values()))
        compare = json.loads((out / f"points/point{i}/table.json").read_text())
        assert set(compare["rows"]) == {"LT: change hues", "supervised (ceiling)"}
    a, b = (p["rows"]["lt_change_hues"]["mean_r2"] for p in curves["points"])
    assert a != b  # two trainings of different lengths: the points are not one number copied
    assert [f["row"] for f in curves["facts"]] == ["lt_change_hues"]
    assert curves["facts"][0]["curve"] == [a, b]
    assert (out / "tables/point0.md").read_text().startswith("| row | seeds |")
    check_another_layer(tmp_path, out, done)


def check_another_layer(tmp: Path, out: Path, done: list[Path]) -> None:
    """The finished scaling output ``out``: --layer inner is refused without --overwrite, leaving it unchanged; with
    it, the curves and every point's table are the inner layer's, and no cell ran again."""
    from helpers import tree_digest

    from ident3d.pipelines.kinds.scaling import load_config, run_scaling

    cfg, digest, stamps = load_config(tmp / "scaling.yaml"), tree_digest(out), [p.stat().st_mtime_ns for p in done]
    with pytest.raises(UserError, match=f"^{out} holds finished tables of the output layer; pass --overwrite to "
                                        "replace them with the inner layer's, or use another --out$"):
        run_scaling(cfg, out, layer="inner")
    assert tree_digest(out) == digest
    curves = run_scaling(cfg, out, layer="inner", overwrite=True)
    assert json.loads((out / "curves.json").read_text())["layer"] == curves["layer"] == "inner"
    for i, point in enumerate(curves["paper001"]["points"]):
        assert json.loads((out / f"points/point{i}/table.json").read_text())["layer"] == "inner"
        report = json.loads((out / f"points/point{i}/cells/lt_change_hues/seed_0/report.json").read_text())
        r2 = report["layers"]["inner"]["r2_linear"]
        # 16 fit rows for the wider inner layer: too few for a linear fit, so every R^2 is undefined and says why
        assert all(v != v for v in r2.values()) and point["rows"]["lt_change_hues"]["mean_r2"] != \
            point["rows"]["lt_change_hues"]["mean_r2"]
        assert "fit samples" in next(iter(report["layers"]["inner"]["r2_undefined"]["linear"].values()))
    assert [p.stat().st_mtime_ns for p in done] == stamps


@pytest.mark.parametrize("kind", ["synthetic", "compare", "scaling"])
def test_each_kind_refuses_another_experiments_output(tmp_path, kind):
    from ident3d.pipelines.experiment import claim_output
    from ident3d.pipelines.kinds.compare import Compare
    from ident3d.pipelines.kinds.scaling import Scaling
    from ident3d.pipelines.kinds.synthetic import Synthetic

    k = {"synthetic": Synthetic(), "compare": Compare(), "scaling": Scaling()}[kind]
    claim_output(k, tmp_path / "a", "first")
    claim_output(k, tmp_path / "a", "first")  # its own output: accepted
    with pytest.raises(UserError, match=f"holds the {kind} experiment 'first', not 'second'"):
        claim_output(k, tmp_path / "a", "second")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match=f"not an ident3d {kind} output"):
        claim_output(k, tmp_path / "b", "first")
    assert (tmp_path / "b" / "notes.txt").read_text() == "mine"


def test_a_cell_is_bit_identical_however_the_grid_is_split(tmp_path):
    """A synthetic cell run in this process (which has 2 torch threads) and on a Dask worker: every cell trains with
    the engine's one thread, so weights and scores are equal bit for bit, and the count is in each cell's key."""
    import torch

    from ident3d.pipelines.cells import CELL_THREADS, recorded
    from ident3d.pipelines.kinds.synthetic import check_config, run_synthetic

    # paper 001's encoder and batch: big enough that torch splits its products over threads (a small MLP runs on
    # one thread whatever the setting, and would pass without the fixed count)
    cfg = check_config({"name": "split", "seeds": [0], "evaluate": {"fit": 1000, "score": 1000},
                        "train": {"objective": "lp_infonce", "encoder": "mlp", "out_dim": 10, "steps": 100,
                                  "batch_size": 512, "encoder_args": {"hidden": [100, 200, 200, 100]}},
                        "rows": [{"name": "box", "source": {"kind": "latent_pairs"}, "hp": {"p": 2}}]}, "test")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run_synthetic(cfg, tmp_path / "serial", device="cpu", progress=False, figures=False)
    finally:
        torch.set_num_threads(before)
    run_synthetic(cfg, tmp_path / "split", device="cpu", progress=False, figures=False, workers=2)
    cells = [tmp_path / run / "cells/box/seed_0" for run in ("serial", "split")]
    weights = [torch.load(c / "checkpoint.pt", weights_only=False)["model"] for c in cells]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    scores = [{k: v for k, v in json.loads((c / "scores.json").read_text()).items() if k != "train_seconds"}
              for c in cells]
    assert scores[0] == scores[1]
    assert all(recorded(c)["settings"]["torch_threads"] == CELL_THREADS for c in cells)


@pytest.mark.parametrize("command", ["synthetic", "compare", "scaling"])
def test_every_kind_refuses_a_bad_worker_count_in_one_line_before_writing(tmp_path, command):
    """The engine checks --workers once, for every kind, before the output folder is made."""
    from helpers import run_cli

    config = {"synthetic": "configs/synthetic/paper001.yaml", "compare": "configs/da_vs_lt_small.yaml",
              "scaling": "configs/scaling/paper001.yaml"}[command]
    root = Path(__file__).resolve().parents[1]
    r = run_cli(command, "--config", root / config, "--out", tmp_path / "out", "--workers", "0", cwd=root)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and lines == [f"ident3d {command}: error: --workers must be a whole number >= 1, got 0"]
    assert not (tmp_path / "out").exists()


def _tear(path: Path) -> None:
    """Cut a file short, as a kill during a plain (non-atomic) write would have left it."""
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


@pytest.mark.parametrize("kind", ["synthetic", "compare"])
def test_a_torn_done_marker_means_not_done_and_the_cell_is_redone(tmp_path, kind):
    """Issue 34.4: a report.json cut short made every re-run of the demo a JSONDecodeError traceback. Each kind of
    marker is torn at once (the cell's result, its cell.json key and the output's own marker): the re-run redoes
    the cells and finishes with whole markers again."""
    def read_marker(path: Path) -> dict | None:
        try:
            return json.loads(path.read_text())
        except ValueError:
            return None

    out, done = run_kind(kind, tmp_path, steps=3)
    keys = [p.parent / "cell.json" for p in done]
    marker = out / f"{kind}.json"
    for path in (*done, *keys, marker):
        _tear(path)
        assert read_marker(path) is None
    run_kind(kind, tmp_path, steps=3)
    assert all(read_marker(p) is not None for p in (*done, *keys, marker))
    assert len(list(out.rglob("*.stale-1"))) == len(done)  # a cell with a torn key is moved aside and run again
    assert json.loads(marker.read_text())["name"] == "tiny"


def test_a_colour_strength_sweep_is_a_compare_config(tmp_path):
    """Issue 34.6: the DA rows' strength is a setting of their view maker, so a sweep is rows of one compare config:
    the cells differ in their views (and so in their weights), with the same seeds and everything else equal."""
    import torch

    from ident3d.pipelines.kinds.compare import check_config, run_compare

    cfg = {**compare_cfg("sweep"), "ceiling": False,
           "rows": [{"name": f"DA: colour x{s}", "views": f"colour(strength={s})"} for s in (0.25, 1.0)]}
    result = run_compare(check_config(cfg, "test"), tmp_path / "sweep")
    assert list(result["table"]) == ["DA: colour x0.25", "DA: colour x1.0"]
    cells = [tmp_path / "sweep/cells" / f"da_colour_x{s}/seed_0" for s in ("0_25", "1_0")]
    configs = [json.loads((c / "config.json").read_text()) for c in cells]
    assert [c["views"] for c in configs] == ["colour(strength=0.25)", "colour(strength=1.0)"]
    assert {k: v for k, v in configs[0].items() if k != "views"} == {k: v for k, v in configs[1].items() if k != "views"}
    weights = [torch.load(c / "checkpoint.pt", weights_only=False)["model"] for c in cells]
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_a_metric_added_from_a_test_module_gets_its_column_in_compare_and_synthetic_tables(tmp_path):
    """Issue 34.1: one registry serves every table. A metric registered here (its value: the codes' width, which the
    test knows: out_dim 4 for the compare cells, 3 for the synthetic one) is named in each config's ``metrics:`` and
    appears as its NAME/COLUMN column with that value, after the kind's own columns; an unknown name is one line."""
    from ident3d.evaluation.metric_suite import METRICS, Metric, register_metric
    from ident3d.pipelines.kinds.compare import check_config as check_compare
    from ident3d.pipelines.kinds.compare import run_compare
    from ident3d.pipelines.kinds.synthetic import check_config as check_synthetic
    from ident3d.pipelines.kinds.synthetic import run_synthetic

    @register_metric("code_width")
    class CodeWidth(Metric):
        """The number of code dimensions (a value a test can predict)."""

        columns = ("dims",)

        def __call__(self, run, data):
            return {"dims": data.codes_score.shape[1], "fit_rows": len(data.codes_fit)}

    try:
        compare = run_compare(check_compare({**compare_cfg("metric"), "ceiling": False, "metrics": ["code_width"]},
                                            "test"), tmp_path / "compare")
        row = compare["table"]["LT: change hues"]
        assert list(row)[-1] == "code_width/dims" and row["code_width/dims"][0] == 4.0
        assert "code_width/dims" in (tmp_path / "compare/table.md").read_text().splitlines()[2]
        cfg = {"name": "tiny", "seeds": [0], "evaluate": {"fit": 200, "score": 200}, "metrics": ["code_width"],
               "train": {"objective": "lp_infonce", "encoder": "mlp", "out_dim": 3, "steps": 3, "batch_size": 32},
               "rows": [{"name": "box", "source": {"kind": "latent_pairs", "dim": 3}, "hp": {"p": 2}}]}
        table = run_synthetic(check_synthetic(cfg, "test"), tmp_path / "synthetic", device="cpu", progress=False,
                              figures=False)
        assert table["columns"][-2:] == ["code_width/dims", "train_seconds"]
        assert table["rows"]["box"]["stats"]["code_width/dims"]["mean"] == 3.0
        with pytest.raises(UserError, match=r"metrics: unknown metric 'code_widht'; choose from .*code_width"):
            check_synthetic({**cfg, "metrics": ["code_widht"]}, "test")
    finally:
        METRICS.unregister("code_width")


def test_a_row_removed_from_a_scaling_config_is_gone_from_its_tables(tmp_path):
    """Issue 34.2: scaling reads the engine's results, not the disk. A point's ceiling row is dropped from its
    config (ceiling: false) after a full run: its cells stay on disk, and the curves and tables no longer show it."""
    from ident3d.pipelines.kinds.scaling import load_config, run_scaling

    def run(ceiling: bool) -> dict:
        path = tmp_path / "point.yaml"
        path.write_text(yaml.safe_dump({**compare_cfg("point"), "ceiling": ceiling}))
        (tmp_path / "scaling.yaml").write_text(yaml.safe_dump({"kind": "scaling", "name": "tiny", "paper": "001",
                                                               "points": [{"config": str(path)}]}))
        return run_scaling(load_config(tmp_path / "scaling.yaml"), tmp_path / "out")

    assert set(run(True)["paper001"]["points"][0]["rows"]) == {"lt_change_hues", "supervised_ceiling"}
    curves = run(False)
    assert (tmp_path / "out/points/point/cells/supervised_ceiling/seed_0/report.json").exists()
    assert set(curves["paper001"]["points"][0]["rows"]) == {"lt_change_hues"}
    assert "supervised_ceiling" not in (tmp_path / "out/tables/point.md").read_text()
    assert "supervised ceiling" not in (tmp_path / "out/points/point/table.md").read_text()


def test_the_temporal_learners_run_as_a_compare_config_on_sequence_stores(tmp_path):
    """Issue 34.3: the temporal study is an experiment on the engine (configs/temporal_small.yaml at CPU size): its
    stores are rendered sequence stores, each row a temporal objective with its view maker, and the config's
    ``metrics: [temporal]`` scores CITRIS's variable-level numbers, under the CITRIS-style model's own assignment and
    post hoc for the time-contrastive one; the table's temporal columns are the cells' own numbers."""
    from ident3d.pipelines.kinds.compare import check_config, run_compare

    seq = {"length": 6, "resolution": 16, "samples": 1}
    cfg = {"kind": "compare", "name": "temporal_tiny", "seeds": [0], "metrics": ["temporal"], "ceiling": False,
           "stores": {"train": {**seq, "sequences": 4, "seed": 0}, "test": {**seq, "sequences": 10, "seed": 1}},
           "train": {"encoder": "cnn", "out_dim": 12, "steps": 2, "batch_size": 8},
           "evaluate": {"fit": 16, "score": 44, "kernel": False},
           "rows": [{"name": "time-contrastive", "views": "next_frame", "train": {"objective": "infonce"}},
                    {"name": "CITRIS-style", "views": "next_frame_targets", "train": {"objective": "citris_vae"}}]}
    table = run_compare(check_config(cfg, "test"), tmp_path / "out")["table"]
    for row, kind in (("time_contrastive", "post hoc"), ("citris_style", "learned")):
        report = json.loads((tmp_path / f"out/cells/{row}/seed_0/report.json").read_text())
        temporal = report["metrics"]["temporal"]
        assert temporal["assignment_kind"] == kind and np.asarray(temporal["r2"]).shape == (7, 7)
        name = {"time_contrastive": "time-contrastive", "citris_style": "CITRIS-style"}[row]
        assert table[name]["temporal/diag"][0] == pytest.approx(temporal["diag"], abs=1e-12)
    from ident3d.store.info import store_info

    assert store_info(str(tmp_path / "out/stores/train.zarr")).attrs.sequences["length"] == 6
