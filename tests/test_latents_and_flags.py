"""Issue 20, items 3, 8 and 12: latents outside their documented range are refused by `render --latents` (the SCM's
node ranges) and `import` (the published set's documented range), naming row, column and range; a text file given
as latents says so; `check STORE/images` names the store; `export --workers 0` is refused; an unreachable
`import --scheduler` creates nothing; import/export errors name flags. Each refusal: one line, exit 2, nothing
created or changed."""

import math

import numpy as np
import pytest
from helpers import assert_refused, run_cli, tree_digest
from PIL import Image

LATENTS = ["pos_x", "pos_y", "pos_z", "rot_alpha", "rot_beta", "rot_gamma", "spot_angle", "obj_hue", "spot_hue",
           "bg_hue"]


def make_3dident(root, n=12, size=8, raw=None):
    """A published 3DIdent folder: n tiny PNGs and raw_latents.npy (random in [-1, 1] unless given)."""
    (root / "images").mkdir(parents=True)
    width = int(math.ceil(math.log10(n)))
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (size, size, 3), np.uint8)).save(root / "images" / f"{str(i).zfill(width)}.png")
    np.save(root / "raw_latents.npy", rng.uniform(-1, 1, (n, 10)) if raw is None else raw)
    return root


@pytest.fixture(scope="module")
def scheduler():
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def store(tmp_path_factory, scheduler):
    """A complete (imported) 3DIdent store."""
    root = tmp_path_factory.mktemp("published")
    make_3dident(root / "src")
    r = run_cli("import", "--format", "3dident", root / "src", "--out", root / "s.zarr", "--scheduler", scheduler,
                "--no-progress", "--chunk-size", "4")
    assert r.returncode == 0, r.stderr
    return root / "s.zarr"


# ----- item 3: documented ranges ------------------------------------------------------------------------------
@pytest.mark.parametrize("value,shown", [(5.0, "5"), (1e30, "1e+30"), (-1.5, "-1.5")])
def test_render_refuses_latents_outside_the_scm_range(tmp_path, value, shown):
    rows = np.zeros((3, 10))
    rows[1, 0] = value
    (tmp_path / "rows.csv").write_text(",".join(LATENTS) + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    r = run_cli("render", "--scene", "3dident", "--latents", tmp_path / "rows.csv", "--out", tmp_path / "s.zarr",
                "--no-progress")
    assert_refused(r, "rows.csv: row 1 has pos_x = " + shown, "outside its range in SCM 3dident, [-1, 1]")
    assert not (tmp_path / "s.zarr").exists()


def test_render_takes_latents_on_the_range_edges():
    from ident3d.causal import load_scm
    from ident3d.render.latents_io import check

    x = np.zeros((2, 10), np.float32)
    x[0], x[1] = 1.0, -1.0
    assert np.array_equal(check(x, None, load_scm("3dident"), "edges").latents, x)


def test_import_refuses_raw_latents_outside_the_published_range(tmp_path, scheduler):
    raw = np.random.default_rng(1).uniform(-1, 1, (12, 10))
    raw[7, 1] = 5.0
    make_3dident(tmp_path / "src", raw=raw)
    before = tree_digest(tmp_path)
    r = run_cli("import", "--format", "3dident", tmp_path / "src", "--out", tmp_path / "s.zarr", "--scheduler",
                scheduler, "--no-progress")
    assert_refused(r, "raw_latents.npy: row 7 has pos_y = 5, outside the documented range of the published 3DIdent "
                      "raw latents, [-1, 1]")
    assert tree_digest(tmp_path) == before and not (tmp_path / "s.zarr").exists()


# ----- item 12: wording -------------------------------------------------------------------------------------------
def test_a_text_file_given_as_latents_says_what_it_is(tmp_path, scheduler):
    (tmp_path / "rows.npy").write_text(",".join(LATENTS) + "\n" + ",".join(["0"] * 10) + "\n")
    r = run_cli("render", "--scene", "3dident", "--latents", tmp_path / "rows.npy", "--out", tmp_path / "s.zarr")
    line = assert_refused(r, "rows.npy: not a NumPy .npy file (a text file starting 'pos_x,pos_y,", "numpy.save",
                          "a table of latents goes in a .csv file")
    assert "pickled" not in line and not (tmp_path / "s.zarr").exists()
    make_3dident(tmp_path / "src")
    (tmp_path / "src/raw_latents.npy").write_text("0.1 0.2 0.3\n")
    r = run_cli("import", "--format", "3dident", tmp_path / "src", "--out", tmp_path / "i.zarr", "--scheduler",
                scheduler, "--no-progress")
    assert_refused(r, "raw_latents.npy: not a NumPy .npy file (a text file starting '0.1 0.2 0.3')")
    assert not (tmp_path / "i.zarr").exists()


@pytest.mark.parametrize("inner,kind", [("images", "array"), ("done", "array")])
def test_check_of_an_array_inside_a_store_names_the_store(store, inner, kind):
    before = tree_digest(store)
    r = run_cli("check", store / inner, "--no-progress")
    assert_refused(r, f"{store / inner} is the {kind} '{inner}' inside the store {store}, not a store",
                   f"ident3d check {store}")
    assert tree_digest(store) == before


@pytest.mark.parametrize("extra,expected", [
    (["--chunk-size", "0"], "--chunk-size must be a whole number >= 1, got 0"),
    (["--compression-level", "23"], "--compression-level must be a whole number from 1 to 22 (zstd's levels), got 23"),
    (["--workers", "0"], "--workers must be a whole number >= 1, got 0"),
    (["--connect-timeout", "0"], "--connect-timeout must be a positive number of seconds, got 0.0"),
])
def test_import_errors_name_flags(tmp_path, extra, expected):
    make_3dident(tmp_path / "src")
    r = run_cli("import", "--format", "3dident", tmp_path / "src", "--out", tmp_path / "s.zarr", "--no-progress",
                *extra)
    assert_refused(r, "ident3d import: error: " + expected)
    assert not (tmp_path / "s.zarr").exists()


# ----- item 8 -----------------------------------------------------------------------------------------------------
def test_export_refuses_zero_workers(store, tmp_path):
    before = tree_digest(store)
    r = run_cli("export", store, "--format", "3dident", "--out", tmp_path / "exp", "--workers", "0", "--no-progress")
    assert_refused(r, "ident3d export: error: --workers must be a whole number >= 1, got 0")
    assert not (tmp_path / "exp").exists() and tree_digest(store) == before


def test_import_to_an_unreachable_scheduler_creates_nothing(tmp_path):
    make_3dident(tmp_path / "src")
    r = run_cli("import", "--format", "3dident", tmp_path / "src", "--out", tmp_path / "s.zarr", "--scheduler",
                "tcp://127.0.0.1:1", "--connect-timeout", "0.5", "--no-progress")
    assert_refused(r, "cannot reach the Dask scheduler at tcp://127.0.0.1:1")
    assert not (tmp_path / "s.zarr").exists()
