"""The ident3d command line: help, sample/scm subcommands, one-line errors with exit code 2."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import read_png, run_cli

from ident3d.causal import load_scm
from ident3d.pipelines.cli import COMMANDS, main


def run(*args, cwd=None):
    """The command, in-process (``helpers.run_cli``)."""
    return run_cli(*args, cwd=cwd)


def test_console_script_lists_subcommands():
    exe = shutil.which("ident3d") or str(Path(sys.executable).with_name("ident3d"))
    out = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for cmd in COMMANDS:
        assert cmd in out.stdout


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_every_subcommand_has_its_help(cmd, capsys):
    with pytest.raises(SystemExit) as done:
        main([cmd, "--help"])
    text = capsys.readouterr().out
    assert done.value.code == 0 and text.startswith(f"usage: ident3d {cmd}"), text[:200]
    assert "options:" in text and "--help" in text


def test_sample_npz_and_csv_match_the_api(tmp_path):
    r = run("sample", "--scm", "causal3dident", "--n", "50", "--seed", "3", "--out", str(tmp_path / "z.npz"))
    assert r.returncode == 0, r.stderr
    z = np.load(tmp_path / "z.npz")
    ref = load_scm("causal3dident").sample(50, seed=3)
    assert np.array_equal(z["latents"], ref.latents) and np.array_equal(z["classes"], ref.classes)
    assert list(z["names"]) == ref.names
    r = run("sample", "--scm", "3dident", "--n", "5", "--out", str(tmp_path / "z.csv"))
    lines = (tmp_path / "z.csv").read_text().splitlines()
    assert r.returncode == 0 and len(lines) == 6 and lines[0].startswith("index,pos_x")


def test_sample_from_a_copied_spec_file(tmp_path):
    text = run("scm", "show", "causal3dident", "--yaml").stdout
    spec = yaml.safe_load(text)
    spec["nodes"][1]["mechanism"]["scale"] = 0.1  # pos_x tighter around the class mean
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(spec))
    r = run("sample", "--scm", str(path), "--n", "2000", "--out", str(tmp_path / "m.npz"))
    assert r.returncode == 0, r.stderr
    z = np.load(tmp_path / "m.npz")
    x, k = z["latents"][:, 0], z["classes"]
    assert np.abs(x - np.linspace(-0.6, 0.6, 7)[k]).std() < 0.12


def test_scm_show_and_plot(tmp_path):
    r = run("scm", "show", "causal3dident")
    assert r.returncode == 0 and "spot_angle" in r.stdout and "pos_x, pos_y" in r.stdout
    assert "change set positions" in r.stdout
    r = run("scm", "plot", "causal3dident", "--out", str(tmp_path / "g.png"))
    assert r.returncode == 0, r.stderr
    h, w, colours = read_png(tmp_path / "g.png")
    assert h > 200 and w > 200 and colours > 20  # a drawn graph, not a blank canvas


def _bad_spec(tmp_path, text):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("make_args,expected", [
    (lambda t: ["sample", "--scm", "nope", "--n", "3", "--out", str(t / "a.npz")], "no built-in SCM"),
    (lambda t: ["sample", "--scm", "3dident", "--n", "0", "--out", str(t / "a.npz")], "positive"),
    (lambda t: ["sample", "--scm", "3dident", "--n", "x", "--out", str(t / "a.npz")], "invalid int"),
    (lambda t: ["sample", "--scm", "3dident", "--n", "3", "--out", str(t / "a.txt")], ".npz or .csv"),
    (lambda t: ["sample", "--scm", "3dident", "--n", "3", "--out", str(t / "no/dir/a.npz")], "does not exist"),
    (lambda t: ["sample", "--scm", _bad_spec(t, "nodes:\n - {name: a, parents: [b], mechanism: {type: uniform}, range: [0, 1]}\n"),
                "--n", "3", "--out", str(t / "a.npz")], "node 'a': unknown parent 'b'"),
    (lambda t: ["sample", "--scm", _bad_spec(t, "nodes:\n - {name: a, parents: [b], mechanism: {type: deterministic, fn: b}}\n"
                " - {name: b, parents: [a], mechanism: {type: deterministic, fn: a}}\n"),
                "--n", "3", "--out", str(t / "a.npz")], "cycle"),
    (lambda t: ["sample", "--scm", _bad_spec(t, "nodes:\n - {name: a, mechanism: {type: poisson}}\n"),
                "--n", "3", "--out", str(t / "a.npz")], "node 'a': unknown mechanism 'poisson'"),
    (lambda t: ["sample", "--scm", _bad_spec(t, "nodes:\n - {name: a, range: [1, 0], mechanism: {type: uniform}}\n"),
                "--n", "3", "--out", str(t / "a.npz")], "node 'a': 'range' must have low < high"),
    (lambda t: ["sample", "--scm", _bad_spec(t, "nodes: [\n"), "--n", "3", "--out", str(t / "a.npz")], "not valid YAML"),
    (lambda t: ["scm", "show", _bad_spec(t, "nodes:\n - {name: a, range: [0, 1], mechanism: {type: truncnorm, scale: zero}}\n")],
     "node 'a': scale must be a positive number"),
    (lambda t: ["scm", "frobnicate"], "invalid choice"),
])
def test_bad_input_one_line_exit_2(tmp_path, make_args, expected):
    r = run(*make_args(tmp_path))
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_existing_output_is_not_overwritten_without_flag(tmp_path):
    out = tmp_path / "keep.npz"
    assert run("sample", "--scm", "3dident", "--n", "4", "--out", str(out)).returncode == 0
    before = out.read_bytes()
    r = run("sample", "--scm", "3dident", "--n", "9", "--seed", "1", "--out", str(out))
    assert r.returncode == 2 and "--overwrite" in r.stderr and out.read_bytes() == before
    r = run("sample", "--scm", "3dident", "--n", "9", "--seed", "1", "--out", str(out), "--overwrite")
    assert r.returncode == 0 and np.load(out)["latents"].shape == (9, 10)


def test_a_reader_that_goes_away_is_no_traceback():
    """`ident3d ... | head -1`: the pipe closes before the output is written; the command stops quietly (141, as a
    tool killed by SIGPIPE reports in a shell), with nothing on stderr."""
    import os

    read, write = os.pipe()
    os.close(read)  # the reader is already gone: the first write fails with EPIPE
    r = subprocess.run([sys.executable, "-m", "ident3d.pipelines.cli", "experiment", "configs/da_vs_lt_small.yaml",
                        "--dry-run"], stdout=write, stderr=subprocess.PIPE, text=True,
                       cwd=Path(__file__).resolve().parents[1])
    os.close(write)
    assert r.returncode == 141 and r.stderr == "", (r.returncode, r.stderr)
