"""The GPU kit (benchmarks/gpu/): ``run.py --device cpu --tiny`` runs every job at toy size and writes results.json
with each job's fields and numbers; a damaged or missing pack part is one line and exit 2; stores travel as tar
parts that unpack to the same bytes; wheels install with pip or by unzipping; the pack command, the carry plan,
the GPU-hour estimate and the filing of a window's results, each on real inputs."""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "benchmarks" / "gpu"
sys.path.insert(0, str(KIT))

fmt = importlib.import_module("kit_pack_format")
kit_install = importlib.import_module("kit_install")
pack = importlib.import_module("pack")
estimate = importlib.import_module("estimate")
record = importlib.import_module("record")
run = importlib.import_module("run")

PIPELINES = ("ident3d DA crop_large+colour", "ident3d LT lt_exact:pos", "torchvision DataLoader + CPU transforms")
ROWS = {"DA: colour distortion", "LT: change positions", "supervised (ceiling)"}


def kit(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``python benchmarks/gpu/run.py ARGS`` as the device call runs it."""
    return subprocess.run([sys.executable, str(KIT / "run.py"), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One tiny run on the CPU (its stores rendered here), shared by the tests that read what it made."""
    base = tmp_path_factory.mktemp("kit")
    r = kit("--device", "cpu", "--tiny", "--out", str(base / "out"), "--work", str(base / "work"))
    return r, base / "out", base / "work"


def test_tiny_run_writes_every_field_and_number(tiny):
    r, out, work = tiny
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    commit = json.loads((work / "tiny_pack" / "manifest.json").read_text())["ident3d_commit"]
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    for job in ("throughput", "experiment"):
        e = res["jobs"][job]
        assert e["status"] == "ok" and e["device"] == "cpu" and e["device_name"].startswith("cpu")
        assert (e["torch"], e["numpy"], e["ident3d_commit"]) == (torch.__version__, np.__version__, commit)
        assert e["steps"] > 0 and e["wall_s"] > 0 and "--tiny" in e["command"] and "run.py" in e["command"]
    tp = res["jobs"]["throughput"]["numbers"]["stores"]["tiny.train"]
    assert tp["resolution"] == 32 and tp["lt_view"] == "pos" and tp["skipped"] == []
    for name in PIPELINES:
        assert tp["img_per_s"][name]["data only"] > 0 and tp["img_per_s"][name]["cnn"] > 0, name
    assert tp["gflop_per_img"] > 0 and set(tp["ratio_vs_baseline"]) == set(PIPELINES[:2])
    exp = res["jobs"]["experiment"]["numbers"]["tiny"]
    assert exp["status"] == "ok" and exp["cells"] == 3 and exp["stores_from_pack"] == {"train": "tiny.train",
                                                                                         "test": "tiny.test"}
    assert set(exp["table"]["rows"]) == ROWS
    assert all(math.isfinite(row["stats"]["Class"]["mean"]) for row in exp["table"]["rows"].values())
    assert "LT: change positions" in (out / "experiment_tiny_table.md").read_text()
    assert "experiment tiny: ok, 3 cells" in r.stdout


def test_a_damaged_pack_part_is_one_line_and_exit_2(tiny, tmp_path):
    _, _, work = tiny
    damaged = tmp_path / "pack"
    shutil.copytree(work / "tiny_pack", damaged)
    part = damaged / "data" / "tiny.test.tar.000"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    r = kit("--device", "cpu", "--tiny", "--pack", str(damaged), "--out", str(tmp_path / "out"), "--work",
            str(tmp_path / "work"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "data/tiny.test.tar.000" in r.stderr and "damaged" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "results.json").exists()


def test_a_missing_part_is_named_only_where_a_job_needs_it(tiny, tmp_path):
    _, _, work = tiny
    copy = tmp_path / "pack"
    shutil.copytree(work / "tiny_pack", copy)
    manifest = fmt.read_manifest(copy)
    gone = fmt.data_parts(manifest, "tiny.test")[0]
    (copy / gone["path"]).unlink()
    checked, absent = kit_install.check_parts(copy, manifest, fmt.data_parts(manifest, "tiny.train"))
    assert (checked, absent) == (len(manifest["parts"]) - 1, 1)
    with pytest.raises(fmt.KitError, match=r"pack part data/tiny\.test\.tar\.000 \(data:tiny\.test\) is missing"):
        kit_install.check_parts(copy, manifest, fmt.data_parts(manifest, "tiny.test"))


def test_store_parts_unpack_to_the_same_bytes_and_pack_the_same_twice(tiny, tmp_path):
    _, _, work = tiny
    store = work / "tiny" / "train.zarr"
    parts = fmt.tar_parts(store, tmp_path / "a" / "s", part_mib=0.05)
    assert len(parts) > 2 and all(p.stat().st_size <= 0.05 * fmt.MIB for p in parts)
    again = fmt.tar_parts(store, tmp_path / "b" / "s", part_mib=0.05)
    assert [fmt.sha256(p) for p in parts] == [fmt.sha256(p) for p in again]
    fmt.untar_parts(parts, tmp_path / "out.zarr")
    files = sorted(p.relative_to(store) for p in store.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "out.zarr") for p in (tmp_path / "out.zarr").rglob("*")
                           if p.is_file())
    assert all((store / f).read_bytes() == (tmp_path / "out.zarr" / f).read_bytes() for f in files)


def test_carries_hold_at_most_the_limit_and_8_paths():
    m = fmt.MIB
    assert fmt.plan_carries([("core", 10 * m), ("a", 30 * m), ("b", 30 * m), ("c", 15 * m)], 50) == [
        ["manifest.json", "core", "a"], ["manifest.json", "b", "c"]]
    many = fmt.plan_carries([(f"p{i}", m) for i in range(10)], 50, max_paths=4)
    assert [len(c) for c in many] == [4, 4, 4, 2]
    assert fmt.plan_carries([("big", 80 * m)], 50) == [["manifest.json", "big"]]


def make_wheel(folder: Path) -> Path:
    """A real (tiny) pure-Python wheel: a package and a module installed from the wheel's purelib data."""
    wheel = folder / "kitprobe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("kitprobe/__init__.py", "VALUE = 42\n")
        zf.writestr("kitprobe-1.0.data/purelib/kitprobe_extra.py", "X = 7\n")
        zf.writestr("kitprobe-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: kitprobe\nVersion: 1.0\n")
        zf.writestr("kitprobe-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                     "Tag: py3-none-any\n")
        zf.writestr("kitprobe-1.0.dist-info/RECORD", "")
    return wheel


def imports_from(site: Path, cwd: Path) -> str:
    code = "import kitprobe, kitprobe_extra; print(kitprobe.VALUE, kitprobe_extra.X)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd,
                       env=dict(os.environ, PYTHONPATH=str(site)))
    return r.stdout.strip() or r.stderr[-500:]


def test_wheels_install_where_missing_with_pip_or_by_unzipping(tmp_path):
    wheels = tmp_path / "pack" / "core"
    wheels.mkdir(parents=True)
    wheel = make_wheel(wheels)
    info = pack.wheel_info(wheel)
    assert info == {"dist": "kitprobe", "version": "1.0", "dist_info": "kitprobe-1.0.dist-info", "module": "kitprobe"}
    manifest = {"parts": [fmt.part_entry(tmp_path / "pack", wheel, "core", **info)]}
    site = tmp_path / "site"
    assert kit_install.wheels_to_install(manifest, site, importable=lambda m: True) == ([], [])
    need, done = kit_install.wheels_to_install(manifest, site)
    assert [p["module"] for p in need] == ["kitprobe"] and done == []
    assert kit_install.install_wheels(tmp_path / "pack", need, site) == "pip"
    assert imports_from(site, tmp_path) == "42 7"
    assert kit_install.wheels_to_install(manifest, site) == ([], manifest["parts"])  # installed by an earlier run
    assert kit_install.wheels_to_install(manifest, tmp_path / "s", ["kitprobe"], lambda m: True)[0] == need
    kit_install.unpack_wheel(wheel, tmp_path / "site2")
    assert imports_from(tmp_path / "site2", tmp_path) == "42 7"


def test_pack_builds_data_parts_and_a_manifest_and_refuses_bad_input(tiny, tmp_path, capsys):
    _, _, work = tiny
    out = tmp_path / "pack"
    store = work / "tiny" / "train.zarr"
    assert pack.main(["--no-wheels", "--data", f"tiny.train={store}", "--out", str(out), "--part-mib", "0.1"]) == 0
    printed = capsys.readouterr().out
    m = json.loads((out / "manifest.json").read_text())
    assert m["format"] == 1 and re.fullmatch(r"[0-9a-f]{40}", m["ident3d_commit"]) and len(m["parts"]) >= 4
    for p in m["parts"]:
        assert p["group"] == "data:tiny.train" and p["size"] <= 0.1 * fmt.MIB
        assert fmt.sha256(out / p["path"]) == p["sha256"] and (out / p["path"]).stat().st_size == p["size"]
    assert sum(len(c) - 1 for c in m["carries"]) == len(m["parts"]) and "carry 1 (" in printed
    for argv, says in ((["--no-wheels", "--data", f"tiny.train={store}", "--out", str(out)], "--overwrite"),
                       (["--no-wheels", "--data", f"x={tmp_path}", "--out", str(tmp_path / "p2")], "not a Zarr"),
                       (["--no-wheels", "--data", f"a/b={store}", "--out", str(tmp_path / "p3")], "must be")):
        assert pack.main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and says in err, err


def test_run_refuses_bad_input_in_one_line(tmp_path, capsys):
    assert run.main(["--device", "cpu", "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w")]) == 2
    assert "--pack is required" in capsys.readouterr().err
    assert run.main(["--device", "cpu", "--tiny", "--pack", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "not a GPU-kit pack" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert run.main(["--device", "cuda", "--tiny", "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "sees no CUDA device" in err


def test_gpu_hours_from_measured_throughput():
    rates = {64: {"DA": 1000.0, "LT": 500.0}}
    cfg = {"kind": "compare", "stores": {"train": {"resolution": 64}},
           "train": {"steps": 100, "batch_size": 36, "encoder": "resnet18"}, "seeds": [0, 1],
           "rows": [{"name": "a", "views": "colour"}, {"name": "b", "views": "lt_exact:hues"}]}
    e = estimate.estimate(cfg, rates, "resnet18")
    assert e["cells"] == 6 and e["anchors"] == 6 * 3600  # two rows and the ceiling, two seeds each
    assert e["gpu_hours"] == pytest.approx((2 * 3.6 + 2 * 7.2 + 2 * 3.6) / 3600) and e["notes"] == []
    far = estimate.estimate({**cfg, "stores": {"train": {"resolution": 128}}}, rates, "resnet18")
    assert far["gpu_hours"] == pytest.approx(4 * e["gpu_hours"]) and far["notes"] == ["scaled from 64 px by pixel count"]
    no_ceiling = estimate.estimate({**cfg, "ceiling": False}, rates, "cnn")
    assert no_ceiling["cells"] == 4 and no_ceiling["notes"] == ["resnet18 cells timed at the cnn rate"]


def test_estimate_reads_a_runs_results_and_a_paper_config(tiny, capsys):
    _, out, _ = tiny
    rates, encoder = estimate.rates_from(json.loads((out / "results.json").read_text()))
    assert encoder == "cnn" and set(rates) == {32} and set(rates[32]) == {"DA", "LT"}
    assert estimate.main([str(out / "results.json"), str(ROOT / "configs" / "paper001_3dident.yaml")]) == 0
    row = capsys.readouterr().out.splitlines()[-1].split(" | ")
    assert row[1:4] == ["6", "64", f"{6 * 30000 * 512:,}"] and float(row[4]) > 0
    assert estimate.main([str(out / "results.json"), str(ROOT / "configs" / "synthetic" / "paper001.yaml")]) == 2
    assert "only image experiments" in capsys.readouterr().err


def test_record_files_each_job_and_adds_its_row(tiny, tmp_path):
    _, out, _ = tiny
    (tmp_path / "README.md").write_text(f"# windows\n\n{record.HEADER}\n|---|---|---|---|---|---|---|\n"
                                        f"| - | - | - | {record.EMPTY} | - | - | - |\n\n## notes\n")
    with pytest.raises(record.RecordError, match="has no job render"):
        record.record(out, tmp_path, ["render"])
    folders = record.record(out, tmp_path)
    assert [f.name.split("_", 1)[1] for f in folders] == ["throughput", "experiment"]
    assert (folders[1] / "experiment_tiny_table.md").is_file()
    assert list(json.loads((folders[0] / "results.json").read_text())["jobs"]) == ["throughput"]
    text = (tmp_path / "README.md").read_text()
    assert record.EMPTY not in text and "| throughput | cpu (" in text and "tiny: ok, 3 cells" in text
    again = record.record(out, tmp_path)
    assert [f.name.endswith("_2") for f in again] == [True, True]
    assert (tmp_path / "README.md").read_text().count("| cpu (") == 4
    only = record.record(out, tmp_path, ["experiment"])
    assert [f.name for f in only] == [f"{folders[1].name}_3"]
    text = (tmp_path / "README.md").read_text()
    assert text.count("| cpu (") == 5 and text.endswith("\n## notes\n")
