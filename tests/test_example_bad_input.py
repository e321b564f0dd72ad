"""Bad input, round 5 (issue 42), examples/own_model.py: the example users copy fails as the ``ident3d`` command does
(one line ``own_model.py: error: ...``, exit 2, no traceback, nothing written) for a missing store, a folder that is
not a store, ``--steps 0``, an unknown view maker, a view the store lacks and ``--device tpu``; and a store with fewer
finished rows than its batch of 64 trains in batches of all its rows, said in one line. The store is a real 32-image
3DIdent render (Blender, 16 px); the small-store run is a real process, the refusals run the example's ``main``
in this process (an interpreter with torch per case would cost seconds each)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import tree_digest

import ident3d

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "own_model.py"


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """A finished 32-image, 16 px 3DIdent store with the ``hues`` LT view, as ``--tiny`` renders (at 384 images)."""
    store = tmp_path_factory.mktemp("own_model") / "small.zarr"
    assert ident3d.render_store(store, scene="3dident", n=32, settings={"resolution": 16, "samples": 1},
                                views="hues:hues", workers=1, progress=False).ok
    return store


@pytest.fixture(scope="module")
def example():
    """examples/own_model.py loaded as a module (its ``main(argv)`` is what ``python examples/own_model.py`` runs)."""
    spec = importlib.util.spec_from_file_location("own_model_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_store_smaller_than_a_batch_trains_in_batches_of_its_rows(small, tmp_path):
    before = tree_digest(small)
    r = subprocess.run([sys.executable, str(EXAMPLE), "--store", str(small), "--steps", "2", "--device", "cpu"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0] == f"{small} has 32 finished rows: batches of 32 instead of 64", r.stdout
    assert lines[1].startswith(f"trained 2 steps on {small} with views lt_exact:hues; last loss ")
    assert lines[2] == "| factor | trained | untrained | shuffled |" and "| obj_hue (S) |" in r.stdout
    assert tree_digest(small) == before and not any(tmp_path.iterdir())


CASES = {
    "missing store": (["--store", "{tmp}/missing.zarr"], "{tmp}/missing.zarr is not a Zarr store (no zarr.json)"),
    "not a store": (["--store", "{tmp}/folder"], "{tmp}/folder is not a Zarr store (no zarr.json)"),
    "steps 0": (["--store", "{small}", "--steps", "0"], "--steps must be a whole number >= 1, got 0"),
    "steps 0 with --tiny": (["--tiny", "--out", "{tmp}/new", "--steps", "0"], "--steps must be a whole number >= 1"),
    "views bogus": (["--store", "{small}", "--views", "bogus"], "unknown view maker 'bogus'"),
    "a view the store lacks": (["--store", "{small}", "--views", "lt_exact:positions"], "positions"),
    "device tpu": (["--store", "{small}", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    "seed -1": (["--store", "{small}", "--seed", "-1"], "seed must be a whole number in [0, 9223372036854775807], got -1"),
    "no store": ([], "give --store STORE or --tiny"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(example, small, tmp_path, monkeypatch, capsys, case):
    argv, says = CASES[case]
    (tmp_path / "folder").mkdir()
    fill = {"tmp": tmp_path, "small": small}
    monkeypatch.chdir(tmp_path)  # the default --out (runs/own_model) would be made here
    # the command line as Python gives it to the script (argparse names the program after it: own_model.py)
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), *(a.format(**fill) for a in argv)])
    before = tree_digest(tmp_path), tree_digest(small)
    with pytest.raises(SystemExit) as exit_:
        example.main()
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and err.startswith("own_model.py: error: ") and len(err.splitlines()) == 1, err
    assert says.format(**fill) in err and out == "", (out, err)
    assert (tree_digest(tmp_path), tree_digest(small)) == before and sorted(tmp_path.iterdir()) == [tmp_path / "folder"]
