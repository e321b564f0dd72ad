"""Issue 9, no traceback, no wasted hours: every bad input to train / compare / demo / sample, run as a REAL
command, exits 2 with exactly one line on stderr (no traceback) and leaves every existing output byte for byte
as it was; inputs that were wrongly refused now work; Ctrl-C in train resumes to the uninterrupted weights."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from helpers import default_sigint, run_cli, tree_digest

REPO = Path(__file__).resolve().parents[1]
TINY = ["--encoder", "cnn", "--batch-size", "32", "--no-progress"]


def cli(*args, cwd=None):
    """The command, run in-process (``helpers.run_cli``)."""
    return run_cli(*args, cwd=cwd)


def real_cli(*args):
    """The command as a real process (the Ctrl-C test compares weights across processes, bit for bit)."""
    return subprocess.run([sys.executable, "-m", "ident3d.pipelines.cli", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def assert_refused(r, expected):
    """Exit code 2, one line on stderr that says ``expected``, no traceback."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert expected in lines[0], lines[0]


@pytest.fixture(scope="module")
def store(tiny_store):
    return tiny_store


@pytest.fixture(scope="module")
def trained(store, tmp_path_factory):
    """A finished 5-step run: the existing output that faults must leave alone."""
    run = tmp_path_factory.mktemp("trained") / "run"
    r = cli("train", "--data", store, "--out", run, "--views", "lt_exact:hues", "--steps", "5", *TINY)
    assert r.returncode == 0, r.stderr
    return run


@pytest.fixture
def work(trained, tmp_path):
    """A folder holding a copy of the finished run and an ordinary file; returns (folder, digest before)."""
    shutil.copytree(trained, tmp_path / "run")
    (tmp_path / "notes.txt").write_text("keep me\n")
    return tmp_path, tree_digest(tmp_path)


@pytest.mark.parametrize("extra,expected", [
    (["--lr", "nan"], "--lr must be a finite number > 0, got nan"),
    (["--lr", "inf"], "--lr must be a finite number > 0, got inf"),
    (["--lr", "-0.1"], "--lr must be a finite number > 0, got -0.1"),
    (["--checkpoint-every", "0"], "--checkpoint-every must be a whole number >= 1, got 0"),
    (["--log-every", "-1"], "--log-every must be a whole number >= 1, got -1"),
    (["--grad-clip", "nan"], "--grad-clip must be a finite number >= 0"),
    (["--num-workers", "-1"], "--num-workers must be a whole number >= 0, got -1"),
    (["--steps", "0"], "--steps must be a whole number >= 1, got 0"),
    (["--hp", "foo=1"], "objective infonce has no hyperparameter 'foo'; it takes: tau"),
    (["--objective", "moco_v2", "--hp", "tau=0.2", "quue_size=64"], "has no hyperparameter 'quue_size'; it takes: tau, "),
    (["--encoder-arg", "depth=3"], "encoder cnn has no option 'depth'; it takes: hidden, width"),
    (["--views", "lt_exact"], "lt_exact needs the name of a stored view, e.g. --views lt_exact:hues"),
    (["--views", "lt_nn"], "lt_nn needs a change set"),
    (["--views", "crop_large+blur"], "unknown DA recipe 'blur' in 'crop_large+blur'; choose one of: colour, "),
    (["--resume"], "nothing to resume at"),
    (["--batch-size", "500"], "--batch-size 500 is larger than the 96 images"),
    # issue 32.10: refused before the first step (an IndexError there), and a string for a list in our words
    (["--objective", "supervised", "--hp", "n_classes=3"], "--hp n_classes=3 does not match"),
    (["--objective", "supervised", "--hp", "latent_mean=[0.5, 1]"], "--hp latent_mean must have one value per latent"),
    (["--objective", "supervised", "--hp", "latent_mean=abc"], "latent_mean must be a list of finite numbers"),
])
def test_bad_train_input_exits_2_and_writes_nothing(store, work, extra, expected):
    folder, before = work
    new = folder / "new"
    r = cli("train", "--data", store, "--out", new, *TINY, "--steps", "3", *extra)
    assert_refused(r, expected)
    assert not new.exists()  # no config.json, no empty run dir left to block the corrected re-run
    assert tree_digest(folder) == before


@pytest.mark.parametrize("extra,expected", [
    ([], "already holds a run; pass --resume"),
    (["--overwrite", "--lr", "nan"], "--lr must be a finite number > 0"),
    (["--overwrite", "--batch-size", "500"], "larger than the 96 images"),  # refused after the store is read
    (["--overwrite", "--hp", "foo=1"], "has no hyperparameter 'foo'"),
    (["--resume", "--views", "colour"], "cannot resume"),
])
def test_existing_run_is_untouched_by_a_refused_command(store, work, extra, expected):
    folder, before = work
    r = cli("train", "--data", store, "--out", folder / "run", *TINY, "--steps", "3", *extra)
    assert_refused(r, expected)
    assert tree_digest(folder) == before


@pytest.mark.parametrize("out,expected", [
    (lambda f: "/proc/ident3d_run", "cannot create --out /proc/ident3d_run: /proc is not writable"),
    (lambda f: f / "notes.txt" / "run", "notes.txt is a file, not a folder"),
    (lambda f: f / "notes.txt", "notes.txt is a file; choose a folder"),
])
def test_unwritable_out(store, work, out, expected):
    folder, before = work
    r = cli("train", "--data", store, "--out", out(folder), *TINY, "--steps", "3")
    assert_refused(r, expected)
    assert tree_digest(folder) == before


def test_failed_validation_leaves_nothing_and_the_fix_runs(store, tmp_path):
    """Refused after reading the store (batch too large): no run dir; the corrected command needs no flags."""
    run = tmp_path / "run"
    assert_refused(cli("train", "--data", store, "--out", run, *TINY[:2], "--batch-size", "97", "--steps", "2"),
                   "larger than the 96 images")
    assert not run.exists()
    r = cli("train", "--data", store, "--out", run, "--steps", "2", "--views", "colour", "--no-progress")
    assert r.returncode == 0, r.stderr
    start = r.stdout.splitlines()[0]  # one line saying the chosen defaults (batch capped at the store's size)
    assert start == ("training infonce with colour on cpu: cnn, 2 steps, batch 96, lr 0.001 "
                     "(auto defaults for cpu; set --encoder/--batch-size/--lr to change)"), start
    cfg = json.loads((run / "config.json").read_text())
    assert (cfg["encoder"], cfg["batch_size"], cfg["data"]) == ("cnn", 96, str(Path(store).resolve()))


def test_an_objective_with_its_own_views_uses_them_when_none_are_named(store, tmp_path):
    """Issue 32.11: `train --objective supervised` without --views refused, naming a default the user never typed."""
    r = cli("train", "--data", store, "--out", tmp_path / "run", "--objective", "supervised", "--steps", "1", *TINY)
    assert r.returncode == 0 and "training supervised with labels" in r.stdout, r.stderr
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["views"] == "labels" and cfg["objective_args"]["n_classes"] == 7
    r = cli("train", "--data", store, "--out", tmp_path / "run", "--objective", "supervised", "--steps", "2", "--resume",
            *TINY)
    assert r.returncode == 0 and "to step 2" in r.stdout, r.stderr


def test_resume_from_another_directory_with_an_absolute_store_path(store, tmp_path):
    """The same store typed differently (relative here, absolute from elsewhere) is the same store."""
    rel = os.path.relpath(store, tmp_path)
    r = cli("train", "--data", rel, "--out", "run", *TINY, "--views", "lt_exact:hues", "--steps", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    other = tmp_path / "elsewhere"
    other.mkdir()
    r = cli("train", "--data", Path(store).resolve(), "--out", "../run", *TINY, "--views", "lt_exact:hues",
            "--steps", "6", "--resume", cwd=other)
    assert r.returncode == 0, r.stderr
    assert torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["step"] == 6


def test_help_states_the_device_defaults():
    r = cli("train", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "default auto: cnn on a CPU, resnet18 on CUDA" in text
    assert "default auto: 500 on a CPU, 1000 on CUDA" in text and "128 on a CPU, 256 on CUDA" in text


# ----- compare, demo, sample ----------------------------------------------------------------------------------
def _config(tmp_path, edit):
    cfg = yaml.safe_load((REPO / "configs" / "da_vs_lt_small.yaml").read_text())
    edit(cfg)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize("edit,expected", [
    (lambda c: c["train"]["hp"].update(foo=1), "train: objective infonce has no hyperparameter 'foo'; it takes: tau"),
    (lambda c: c["train"].update(objective="simsiam"), "unknown objective 'simsiam'"),
    (lambda c: c["train"].update(encoder="vit"), "unknown encoder 'vit'"),
    (lambda c: c["train"].update(batch_size=4096), "train.batch_size: 4096 is larger than the 1536 images of stores.train"),
    (lambda c: c["train"].update(steps=0), "train.steps: must be a whole number >= 1, got 0"),
    (lambda c: c["train"].update(lr=float("nan")), "train.lr: must be a finite number > 0, got nan"),
    (lambda c: c["train"].update(stepz=10), "train.stepz: is not a setting here; allowed: "),
])
def test_compare_checks_its_train_section_before_rendering(tmp_path, edit, expected):
    r = cli("compare", "--config", _config(tmp_path, edit), "--out", tmp_path / "out")
    assert_refused(r, expected)
    assert not (tmp_path / "out").exists()  # nothing rendered


@pytest.mark.parametrize("command", [["compare", "--config", "configs/da_vs_lt_small.yaml"], ["demo"]])
def test_compare_and_demo_refuse_a_file_as_out(work, command):
    folder, before = work
    r = cli(*command, "--out", folder / "notes.txt", cwd=REPO)
    assert_refused(r, "notes.txt is a file; choose a folder")
    assert tree_digest(folder) == before


def test_sample_n_beyond_memory(work):
    folder, before = work
    r = cli("sample", "--scm", "3dident", "--n", "10000000000", "--out", folder / "z.npz")
    assert_refused(r, "--n 10000000000 needs about")
    assert "split the rest with --start" in r.stderr and not (folder / "z.npz").exists()
    assert tree_digest(folder) == before


# ----- pure parts ---------------------------------------------------------------------------------------------
def test_tables_show_a_spread_only_over_two_or_more_seeds():
    from ident3d.pipelines.kinds.compare import markdown_table
    from ident3d.pipelines.results_table import tabulate

    def table(values):  # {(row, seed): x}
        return tabulate("t", ["A", "B"], [0, 1, 2], {k: {"x": v} for k, v in values.items()}, ["x"])

    one = markdown_table(table({("A", 0): 0.61, ("B", 0): 0.1}))
    assert "±" not in one.split("\n\n")[0] and "| A | **0.61** |" in one and "n = 1 seed" in one
    three = markdown_table(table({("A", 0): 0.59, ("A", 1): 0.61, ("A", 2): 0.63}))
    assert "| A | **0.61 ± 0.02** |" in three and "mean ± std over n = 3 seeds" in three
    mixed = markdown_table(table({("A", 0): 0.59, ("A", 1): 0.61, ("A", 2): 0.63, ("B", 0): 0.1}))
    assert "| A | **0.61 ± 0.02** | 3 |" in mixed and "| B | 0.10 ↓ | 1 |" in mixed


def test_atomic_outputs_get_the_normal_file_mode(tmp_path):
    from ident3d.pipelines.files import current_umask, write_atomic

    path = write_atomic(tmp_path / "a.json", lambda p: p.write_text("{}"))
    assert path.stat().st_mode & 0o777 == 0o666 & ~current_umask()


def test_estimate_text():
    from ident3d.training.trainer import estimate_text

    assert estimate_text(0.2, 500) == "estimated run time: about 100 s for 500 steps (0.20 s/step)"
    assert estimate_text(0.36, 500) == "estimated run time: about 3 min for 500 steps (0.36 s/step)"
    assert estimate_text(43.0, 1000).startswith("estimated run time: about 11.9 h for 1000 steps")


# ----- Ctrl-C -------------------------------------------------------------------------------------------------
def test_sigint_mid_run_then_resume_gives_the_uninterrupted_weights(store, tmp_path):
    common = ["--data", store, *TINY, "--views", "lt_exact:hues", "--steps", "60", "--checkpoint-every", "5",
              "--log-every", "1"]
    assert real_cli("train", "--out", tmp_path / "full", *common).returncode == 0
    part = tmp_path / "part"
    proc = subprocess.Popen([sys.executable, "-m", "ident3d.pipelines.cli", "train", "--out", str(part), *map(str, common)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while not (part / "checkpoint.pt").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "--resume" in err, err
    stopped = torch.load(part / "checkpoint.pt", weights_only=False)["step"]
    assert 5 <= stopped < 60  # Ctrl-C finishes the step it is in and checkpoints it
    assert f"interrupted at step {stopped} of 60; the checkpoint of step {stopped} is kept" in err, err
    r = real_cli("train", "--out", part, *common, "--resume")
    assert r.returncode == 0, r.stderr
    a = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=False)["model"]
    b = torch.load(part / "checkpoint.pt", weights_only=False)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rows = lambda run: [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()]  # noqa: E731
    assert rows(part) == rows(tmp_path / "full") == list(range(1, 61))


def test_list_shows_every_summary_whole():
    """Issue 32.12: `train --list` cut two descriptions mid-sentence (the first docstring line of a wrapped summary)."""
    from ident3d.pipelines.train import list_components

    entries = [line for line in list_components().splitlines() if line.startswith("  ") and not line.startswith("   ")
               and not line.lstrip().startswith("(")]
    assert len(entries) > 30
    for line in entries:
        assert line.rstrip().endswith((".", ")")), line


def test_a_finished_run_resumed_says_nothing_to_do(trained, tmp_path):
    """Issue 32.12: re-running a finished run with --resume printed "loss nan"; like render, it is complete: exit 0,
    nothing to do, nothing changed."""
    shutil.copytree(trained, tmp_path / "run")
    before = tree_digest(tmp_path / "run")
    r = cli("train", "--data", json.loads((trained / "config.json").read_text())["data"], "--out", tmp_path / "run",
            "--views", "lt_exact:hues", "--steps", "5", "--resume", *TINY)
    assert r.returncode == 0 and "is complete (step 5 of 5); nothing to do" in r.stdout and "nan" not in r.stdout
    assert tree_digest(tmp_path / "run") == before
