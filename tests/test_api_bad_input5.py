"""Bad input, round 5 (issue 42), the Python API's own knobs and exports that cannot write: every seed of
``ident3d.metrics`` is bounded by what scikit-learn takes, dci's knobs and mig's flag are checked before any array is
read, each a one-line ``UserError``; every export format into a read-only file system (a real read-only bind mount
in a private mount namespace, via ``unshare``) is one line, exit 2 (the CLI) or a ``UserError`` (the API), no
traceback, and leaves nothing behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import tree_digest
from test_temporal_npz import LENGTH, citris_file

import ident3d
import ident3d.metrics as M
from ident3d.ingest.temporal_npz import import_temporal


# ----- b: ident3d.metrics knobs ----------------------------------------------------------------------------------
def arrays(n: int = 60) -> dict[str, np.ndarray]:
    """Factors (N, 3) and linear codes (N, 4), split 40 / 20, plus class labels for the probe."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(n, 3))
    c = z @ rng.normal(size=(3, 4))
    return {"z": z, "c": c, "y": (z[:, 0] > 0).astype(int)}


A = arrays()
SPLITS = {"factors": A["z"][:40], "codes": A["c"][:40], "factors_test": A["z"][40:], "codes_test": A["c"][40:]}
LABELS = {"factors": A["y"][:40], "codes": A["c"][:40], "factors_test": A["y"][40:], "codes_test": A["c"][40:]}
SEED_RANGE = "seed must be a whole number in [0, 4294967295]"


@pytest.mark.parametrize("call, says", [
    (lambda: M.dci(**SPLITS, alpha=-1.0), "ident3d.metrics.dci: alpha must be a number > 0"),
    (lambda: M.dci(**SPLITS, alpha=float("nan")), "ident3d.metrics.dci: alpha must be a number > 0"),
    (lambda: M.dci(**SPLITS, importance="ridge"), "ident3d.metrics.dci: importance must be one of lasso, forest, gbt"),
    (lambda: M.dci(**SPLITS, importance="forest", n_estimators=0), "dci: n_estimators must be a whole number >= 1"),
    (lambda: M.dci(**SPLITS, importance="gbt", n_bins=1), "ident3d.metrics.dci: n_bins must be a whole number >= 2"),
    # knobs before arrays: a bad alpha is named even where the arrays are bad too
    (lambda: M.dci(factors=[[np.nan]], codes=[[0.0]], factors_test=[[0.0]], codes_test=[[0.0]], alpha=0),
     "ident3d.metrics.dci: alpha must be a number > 0"),
    (lambda: M.dci(**SPLITS, seed=2**33), f"ident3d.metrics.dci: {SEED_RANGE}, got 8589934592"),
    (lambda: M.dci(**SPLITS, importance="forest", seed=2**40), f"ident3d.metrics.dci: {SEED_RANGE}"),
    (lambda: M.r2(**SPLITS, kind="kernel", seed=2**40), f"ident3d.metrics.r2: {SEED_RANGE}"),
    (lambda: M.probe(**LABELS, seed=-1), f"ident3d.metrics.probe: {SEED_RANGE}, got -1"),
    (lambda: M.probe(**LABELS, seed=2.5), f"ident3d.metrics.probe: {SEED_RANGE}, got 2.5"),
    (lambda: M.probe(**LABELS, kind="mlp", seed=2**40), f"ident3d.metrics.probe: {SEED_RANGE}"),
    (lambda: M.mig(factors=A["z"], codes=A["c"], discretize_factors="no"),
     "ident3d.metrics.mig: discretize_factors must be True, False or None"),
    (lambda: M.block_mcc(objects=A["z"][:, None, :], codes=A["c"], block_sizes=[4], seed=2**32),
     f"ident3d.metrics.block_mcc: {SEED_RANGE}, got 4294967296"),
], ids=["dci-alpha-negative", "dci-alpha-nan", "dci-importance", "dci-n_estimators", "dci-n_bins",
        "dci-knobs-before-arrays", "dci-seed", "dci-forest-seed", "r2-seed", "probe-seed-negative", "probe-seed-float",
        "probe-mlp-seed", "mig-discretize_factors", "block_mcc-seed"])
def test_metric_knobs_are_one_user_error_line(call, says):
    with pytest.raises(ident3d.UserError) as err:
        call()
    assert says in str(err.value) and "\n" not in str(err.value), err.value


def test_the_largest_seed_and_a_numpy_bool_are_taken():
    assert np.isfinite(M.r2(**SPLITS, kind="kernel", seed=2**32 - 1).scores).all()
    assert 0 <= M.probe(**LABELS, seed=np.int64(2**32 - 1)) <= 1
    assert np.isfinite(M.mig(factors=A["z"], codes=A["c"], discretize_factors=np.bool_(True)).score)


# ----- c: exports into a read-only file system --------------------------------------------------------------------
CLI_CASES = [
    ("seq.zarr", "temporal_causal3dident", "ro/x.npz",
     "cannot write --out ro/x.npz (ro/.x.npz.partial: Read-only file system); nothing was written"),
    ("seq.zarr", "temporal_causal3dident", "ro/a/b/x.npz", "cannot create ro/a (Read-only file system)"),
    ("c3d.zarr", "3dident", "ro/x", "cannot create --out ro/x: ro is not writable (Read-only file system)"),
    ("c3d.zarr", "causal3dident", "ro", "cannot create --out ro: ro is not writable (Read-only file system)"),
    ("c3d.zarr", "causal3dident", "ro/a/b", "cannot create --out ro/a/b: ro is not writable"),
]
API_CASES = [
    ("ro/x", "cannot write --out ro/x (ro/.x.partial-"),
    ("ro/a/b", "cannot write --out ro/a/b: cannot create ro/a (Read-only file system)"),
    ("ro/x.npz", "cannot write --out ro/x.npz (ro/.x.npz.partial: Read-only file system)"),
]
# Run inside the namespace, one Python for every case (an interpreter start per case cost a second each): each CLI
# case through ``ident3d``'s own main as helpers.run_cli runs it (an escaping exception is a traceback, exit 1), each
# API case as a user calls it; per case the exit code, output and whether the folder changed, as JSON on stdout.
DRIVER = """import contextlib, io, json, sys, traceback
sys.path.insert(0, sys.argv[1])
from helpers import run_cli, tree_digest
import ident3d
from ident3d.ingest.published_export import export_published
from ident3d.ingest.temporal_npz import export_temporal
cli, api, results = json.loads(sys.argv[2]), json.loads(sys.argv[3]), []
for store, fmt, out in cli:
    before = tree_digest(".")
    r = run_cli("export", store, "--format", fmt, "--out", out, "--no-progress")
    results.append([r.returncode, r.stdout, r.stderr, tree_digest(".") == before])
for out in api:
    before, err = tree_digest("."), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            export_temporal("seq.zarr", out) if out.endswith(".npz") else export_published("c3d.zarr", out, "3dident",
                                                                                          progress=False)
            code = 0
        except ident3d.UserError as exc:
            print(f"UserError: {exc}", file=sys.stderr)
            code = 2
        except Exception:
            traceback.print_exc()
            code = 1
    results.append([code, "", err.getvalue(), tree_digest(".") == before])
print(json.dumps(results))
"""


def read_only(folder: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """``argv`` run with ``folder`` bind-mounted read-only in a private mount namespace (``unshare -rm``: no privilege
    needed, nothing outside the child sees the mount, and it goes with the child)."""
    script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, str(folder), *argv], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> list[list]:
    """Every case of ``CLI_CASES`` then ``API_CASES`` run in one child with ``ro`` mounted read-only, next to a
    sequence store (imported from a CITRIS-layout file) and a rendered 16-image Causal3DIdent store (classes: every
    published layout); skipped where this machine cannot make an unprivileged read-only mount."""
    base = tmp_path_factory.mktemp("export_ro")
    (base / "ro").mkdir()
    probe = read_only(base / "ro", "sh", "-c", "! touch ro/probe 2>/dev/null", cwd=base)
    if probe.returncode != 0:
        pytest.skip(f"no read-only bind mount in a user namespace here ({probe.stderr.strip()[:200]})")
    citris_file(base / "train.npz")
    import_temporal(base / "train.npz", base / "seq.zarr", length=LENGTH, sequences_per_chunk=1, progress=False)
    assert ident3d.render_store(base / "c3d.zarr", scene="causal3dident", n=16, chunk_size=8,
                                settings={"resolution": 16, "samples": 1}, workers=1, progress=False).ok
    before = tree_digest(base)
    r = read_only(base / "ro", sys.executable, "-c", DRIVER, str(Path(__file__).parent),
                  json.dumps([c[:3] for c in CLI_CASES]), json.dumps([c[0] for c in API_CASES]), cwd=base)
    assert r.returncode == 0, r.stderr[-3000:]
    assert tree_digest(base) == before and not any((base / "ro").iterdir())
    return json.loads(r.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", range(len(CLI_CASES)), ids=[f"{c[1]}-{c[2]}" for c in CLI_CASES])
def test_export_into_a_read_only_folder_is_one_line_and_exit_2(exports, case):
    code, out, err, unchanged = exports[case]
    assert code == 2 and err.startswith("ident3d export: error: ") and len(err.splitlines()) == 1, err
    assert CLI_CASES[case][3] in err and "Traceback" not in err and out == "" and unchanged, err


@pytest.mark.parametrize("case", range(len(API_CASES)), ids=[c[0] for c in API_CASES])
def test_the_export_functions_raise_one_user_error_line_on_a_read_only_folder(exports, case):
    code, _, err, unchanged = exports[len(CLI_CASES) + case]
    assert code == 2 and err.startswith("UserError: ") and len(err.splitlines()) == 1, err
    assert API_CASES[case][1] in err and unchanged, err
