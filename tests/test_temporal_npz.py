"""The published Temporal Causal3DIdent .npz <-> sequence stores: units, target alignment, round trip, bad files and
flags (one line, nothing written), export faults, and re-running a finished import."""

from __future__ import annotations

import io
import math
import zipfile

import numpy as np
import pytest
import zarr
from helpers import run_cli, tree_digest

from ident3d.ingest.temporal_npz import COLUMNS, SHAPES, export_temporal, import_temporal

N, LENGTH = 23, 5  # 4 sequences of 5 frames; 3 frames left out
OUR_CLASSES = ["Teapot", "Hare", "Dragon", "Cow", "Armadillo", "Horse", "Head"]  # the temporal_causal3dident spec
NODE_ORDER = ["class", "pos_x", "pos_y", "pos_z", "rot_alpha", "rot_beta", "spot_angle", "obj_hue", "spot_hue",
              "bg_hue"]
COLUMN_NODE = {"pos-x": "pos_x", "pos-y": "pos_y", "pos-z": "pos_z", "rot-alpha": "rot_alpha", "rot-beta": "rot_beta",
               "rot-spot": "spot_angle", "hue-object": "obj_hue", "hue-spot": "spot_hue", "hue-back": "bg_hue",
               "obj-shape": "class"}


def citris_file(path, n=N, seed=0, **override):
    """A file in CITRIS's layout: RGBA frames, positions in [-2, 2], angles in [0, 2 pi), shapes, 0/1 targets
    (rot-gamma and the material constant, as the generator writes them)."""
    rng = np.random.default_rng(seed)
    raw = np.zeros((n, 10), np.float32)
    raw[:, :3] = rng.uniform(-2, 2, (n, 3))
    raw[:, 3:] = rng.uniform(0, 2 * np.pi, (n, 7))
    raw[:, 5] = 0.0
    steps = rng.binomial(1, 0.3, (n - 1, 12))
    steps[:, [5, 11]] = 0
    arrays = {"imgs": rng.integers(0, 256, (n, 6, 6, 4), dtype=np.uint8), "raw_latents": raw,
              "shape_latents": np.stack([rng.integers(0, 7, n), np.zeros(n, int)], 1).astype(np.uint8),
              "interventions": steps, **override}
    np.savez_compressed(path, **arrays)
    return arrays


def plain_ours(col: str, c: float) -> float:
    """Our unit of one CITRIS value, from the formulas: positions / 2; an angle in [0, 2 pi) as a fraction of pi in
    (-1, 1] (angles above pi count down from 2 pi)."""
    if col.startswith("pos"):
        return c / 2
    return c / math.pi if c <= math.pi else c / math.pi - 2


def test_import_converts_units_classes_and_moves_targets_to_the_step_that_reached_a_frame(tmp_path):
    src = citris_file(tmp_path / "train.npz")
    report = import_temporal(tmp_path / "train.npz", tmp_path / "s.zarr", length=LENGTH, sequences_per_chunk=2,
                             progress=False)
    assert (report.sequences, report.dropped, len(report.imported)) == (4, 3, 2)
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")
    n = 4 * LENGTH
    assert np.array_equal(g["images"][:], src["imgs"][:n, ..., :3]) and g["done"][:].all()
    names = list(g.attrs["latent_names"])
    for j, col in enumerate(COLUMNS[:10]):
        if col in COLUMN_NODE:
            want = [plain_ours(col, float(c)) for c in src["raw_latents"][:n, j]]
            assert np.allclose(g["latents"][:, names.index(COLUMN_NODE[col])], want, atol=1e-6), col
    assert [OUR_CLASSES[c] for c in g["classes"][:]] == [SHAPES[s] for s in src["shape_latents"][:n, 0]]
    assert np.array_equal(g["sequence"][:], np.repeat(np.arange(4), LENGTH))
    assert np.array_equal(g["time"][:], np.tile(np.arange(LENGTH), 4))
    got = g["interventions"][:]
    for r in range(n):
        for j, col in enumerate(COLUMNS):
            if col in COLUMN_NODE:
                want = bool(src["interventions"][r - 1, j]) if r % LENGTH else False
                assert got[r, NODE_ORDER.index(COLUMN_NODE[col])] == want, (r, col)
    # the alignment is tested, not assumed: the unshifted rows differ from the shifted ones
    assert not np.array_equal(got[1:LENGTH, 1], src["interventions"][1:LENGTH, 0].astype(bool))


def test_export_writes_the_chain_back_and_a_new_sequence_is_an_intervention_on_every_factor(tmp_path):
    src = citris_file(tmp_path / "train.npz", seed=1)
    import_temporal(tmp_path / "train.npz", tmp_path / "s.zarr", length=LENGTH, progress=False)
    out = export_temporal(tmp_path / "s.zarr", tmp_path / "export" / "train.npz")
    n = 4 * LENGTH
    with np.load(out) as back:
        assert np.array_equal(back["imgs"], src["imgs"][:n, ..., :3])
        turn = np.mod(back["raw_latents"] - src["raw_latents"][:n] + np.pi, 2 * np.pi) - np.pi  # angles mod 2 pi
        assert np.abs(turn).max() < 1e-5
        assert np.array_equal(back["shape_latents"][:, 0], src["shape_latents"][:n, 0])
        steps = back["interventions"]
    assert steps.shape == (n - 1, 12)
    causal = [j for j, c in enumerate(COLUMNS) if c in COLUMN_NODE]
    for t in range(n - 1):
        if (t + 1) % LENGTH:
            assert np.array_equal(steps[t], src["interventions"][t]), t
        else:
            assert steps[t, causal].all() and not steps[t, [5, 11]].any(), t
    again = import_temporal(out, tmp_path / "again.zarr", length=LENGTH, progress=False)
    assert again.sequences == 4
    a, b = (zarr.open_group(str(tmp_path / s), mode="r") for s in ("s.zarr", "again.zarr"))
    for key in ("images", "classes", "interventions", "sequence", "time"):
        assert np.array_equal(a[key][:], b[key][:]), key
    assert np.allclose(a["latents"][:], b["latents"][:], atol=1e-6)


def import_cli(src, out, *extra):
    """`ident3d import --format temporal_causal3dident` in this process."""
    return run_cli("import", "--format", "temporal_causal3dident", src, "--out", out, "--no-progress", *extra)


def one_line(r, *fragments) -> str:
    """Exit code 2 and exactly one stderr line (no traceback) holding every fragment."""
    err = r.stderr.strip()
    assert r.returncode == 2 and err.count("\n") == 0 and "Traceback" not in err, r.stderr
    for f in fragments:
        assert f in err, err
    return err


def test_import_resumes_and_a_rerun_on_a_complete_store_does_nothing(tmp_path):
    citris_file(tmp_path / "train.npz")
    out = tmp_path / "s.zarr"
    settings = ("--length", LENGTH, "--sequences-per-chunk", 1)
    import_temporal(tmp_path / "train.npz", out, length=LENGTH, sequences_per_chunk=1, progress=False)
    g = zarr.open_group(str(out), mode="r+")
    g["done"][2] = False
    g["images"][10:15] = 0
    r = import_temporal(tmp_path / "train.npz", out, length=LENGTH, sequences_per_chunk=1, progress=False)
    assert r.imported == [2] and r.skipped == [0, 1, 3]
    assert g["images"][10:15].any()
    before = tree_digest(out)
    r = import_cli(tmp_path / "train.npz", out, *settings)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout == f"{out} is complete (4 sequences x 5 frames, 4 chunks); nothing to do (--overwrite imports it " \
                       "again)\n"
    assert tree_digest(out) == before
    one_line(import_cli(tmp_path / "train.npz", out, "--length", 4), "was rendered with different", "--overwrite")
    one_line(import_cli(tmp_path / "train.npz", out, *settings, "--compression-level", 3),
             "was imported with different --compression-level", "--overwrite")
    citris_file(tmp_path / "train.npz", interventions=np.zeros((N - 1, 12), int))  # same factors, other targets
    one_line(import_cli(tmp_path / "train.npz", out, *settings), "was imported with different source files")
    assert tree_digest(out) == before
    r = import_cli(tmp_path / "train.npz", out, *settings, "--overwrite")
    assert r.returncode == 0 and "imported 4 chunks" in r.stdout, r.stderr
    assert not zarr.open_group(str(out), mode="r")["interventions"][:].any()


# ----- bad files: every member is checked before the store is created ------------------------------------------
def npz_members(path, **members):
    """A .npz whose members are given as raw .npy bytes (a member can be cut short or damaged)."""
    with zipfile.ZipFile(path, "w") as zf:
        for key, data in members.items():
            zf.writestr(f"{key}.npy", data)


def npy_bytes(array) -> bytes:
    """An array as the bytes of an .npy file."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array)
    return buf.getvalue()


def short_images(path):
    """imgs.npy 100 bytes shorter than its header says (the zip's CRC matches what is there)."""
    arrays = citris_file(path, n=N + 40)
    members = {k: npy_bytes(v) for k, v in arrays.items()}
    npz_members(path, **{**members, "imgs": members["imgs"][:-100]})


def bad_crc(key):
    """A file (stored, not compressed) with one byte of ``key``'s data flipped: the member fails the zip's CRC."""
    def spoil(path):
        arrays = citris_file(path, n=N + 40)
        np.savez(path, **arrays)
        data = bytearray(path.read_bytes())
        at = data.index(b"\x93NUMPY", data.index(f"{key}.npy".encode())) + 128 + 50
        data[at] ^= 0xFF
        path.write_bytes(bytes(data))
    return spoil


def override(**arrays):
    """A file whose named arrays are replaced."""
    return lambda path: citris_file(path, **arrays)


def shapes_with(value, dtype=float):
    """shape_latents whose row 3 holds ``value`` as its shape index."""
    shapes = np.stack([np.arange(N) % 7, np.zeros(N)], 1).astype(dtype)
    shapes[3, 0] = value
    return override(shape_latents=shapes)


RAW = np.random.default_rng(0).uniform(0, 2, (N, 10)).astype(np.float32)  # in every column's range
BAD = {
    "out of range": (override(raw_latents=np.full((N, 10), 7.0, np.float32)), "raw_latents column pos-x spans [7, 7]"),
    "interventions columns": (override(interventions=np.zeros((N - 1, 10), int)), "interventions (22, 10)"),
    "imgs without channels": (override(imgs=np.zeros((N, 6, 6), np.uint8)), "expected N x H x W x 3"),
    "shape index 9": (override(shape_latents=np.full((N, 2), 9, np.uint8)), "shape_latents[0, 0] is 9; shape indices "
                                                                             "are whole numbers 0..6"),
    "no frames": (override(imgs=np.zeros((0, 6, 6, 4), np.uint8), raw_latents=np.zeros((0, 10), np.float32),
                           shape_latents=np.zeros((0, 2), np.uint8), interventions=np.zeros((0, 12), int)),
                  "imgs holds no frames"),
    "raw_latents strings": (override(raw_latents=RAW.astype(str)), "raw_latents holds <U32 values; expected numbers"),
    "raw_latents objects": (override(raw_latents=RAW.astype(object)), "raw_latents holds object values"),
    "shape NaN": (shapes_with(np.nan), "shape_latents[3, 0] is nan; shape indices are whole numbers 0..6"),
    "shape 2.5": (shapes_with(2.5), "shape_latents[3, 0] is 2.5; shape indices are whole numbers 0..6"),
    "shape strings": (shapes_with("1", dtype=str), "shape_latents holds <U32 values; expected numbers"),
    "shape without columns": (override(shape_latents=np.zeros((N, 0))), "shape_latents (23, 0)"),
    "imgs cut short": (short_images, "imgs holds 8972 bytes of pixels but its header promises 9072"),
    "imgs bad CRC": (bad_crc("imgs"), "imgs cannot be read (BadZipFile: Bad CRC-32 for file 'imgs.npy')"),
    "raw_latents bad CRC": (bad_crc("raw_latents"), "raw_latents cannot be read (BadZipFile: Bad CRC-32"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_are_one_line_exit_2_and_write_nothing(tmp_path, case):
    make, message = BAD[case]
    make(tmp_path / "bad.npz")
    out = tmp_path / "s.zarr"
    one_line(import_cli(tmp_path / "bad.npz", out, "--length", 8), message)
    assert not out.exists()


@pytest.mark.parametrize("flags, message", [
    (("--workers", 0), "--workers must be a whole number >= 1, got 0"),
    # one wording for one rule (issue 32.12: ">= 1, got 0" but "at least 2 frames" for 1; render says ">= 2")
    (("--length", 0), "--length must be a whole number >= 2 (a sequence holds a transition), got 0"),
    (("--length", 1), "--length must be a whole number >= 2 (a sequence holds a transition), got 1"),
    (("--split", "train"), "--split does not apply to --format temporal_causal3dident (the split is the file itself"),
    (("--chunk-size", 64), "--chunk-size does not apply to --format temporal_causal3dident (chunks hold whole "
                           "sequences: use --sequences-per-chunk)"),
    (("--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", 0.5), "cannot reach the Dask scheduler at "
                                                                      "tcp://127.0.0.1:1"),
])
def test_import_flags_that_cannot_work_are_refused_before_anything_is_written(tmp_path, flags, message):
    citris_file(tmp_path / "train.npz")
    out = tmp_path / "s.zarr"
    one_line(import_cli(tmp_path / "train.npz", out, "--length", LENGTH, *flags), message)
    assert not out.exists()


def test_the_3dident_import_refuses_the_temporal_flags(tmp_path):
    one_line(run_cli("import", "--format", "3dident", tmp_path, "--out", tmp_path / "s.zarr", "--length", 5),
             "--length does not apply to --format 3dident")
    assert not (tmp_path / "s.zarr").exists()


# ----- export ----------------------------------------------------------------------------------------------------
@pytest.fixture()
def store(tmp_path):
    """A complete imported store of 4 one-sequence chunks."""
    citris_file(tmp_path / "train.npz")
    import_temporal(tmp_path / "train.npz", tmp_path / "s.zarr", length=LENGTH, sequences_per_chunk=1,
                    progress=False)
    return tmp_path / "s.zarr"


@pytest.mark.parametrize("out, flags, message", [
    ("a_file/x.npz", (), "a_file is a file, not a folder"),
    ("a_file/deeper/x.npz", (), "a_file is a file, not a folder"),
    ("/proc/ident3d_x.npz", (), "cannot write --out /proc/ident3d_x.npz (/proc/.ident3d_x.npz.partial"),
    ("folder.npz", ("--overwrite",), "is a folder; name the split file"),
    ("new/x.npz", ("--workers", 0), "--workers must be a whole number >= 1, got 0"),
    ("new/x.npz", ("--workers", -3), "--workers must be a whole number >= 1, got -3"),
])
def test_export_to_a_place_it_cannot_write_is_one_line_and_leaves_nothing(tmp_path, store, out, flags, message):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "folder.npz").mkdir()
    before = tree_digest(tmp_path)
    one_line(run_cli("export", store, "--format", "temporal_causal3dident", "--out", tmp_path / out, *flags), message)
    assert tree_digest(tmp_path) == before and not (tmp_path / "new").exists()


def test_export_of_a_damaged_chunk_names_it_and_removes_the_partial_file(tmp_path, store):
    chunk = store / "images/c/2/0/0/0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    out = tmp_path / "new" / "deeper" / "x.npz"
    one_line(run_cli("export", store, "--format", "temporal_causal3dident", "--out", out),
             f"{store}: chunk 2 of images is corrupt", f"run `ident3d check {store} --repair`")
    assert not (tmp_path / "new").exists()


def test_cli_round_trip_on_a_dask_scheduler_and_export_refuses_to_replace_a_file(tmp_path):
    from dask.distributed import LocalCluster

    src = citris_file(tmp_path / "train.npz")
    store, out = tmp_path / "s.zarr", tmp_path / "e" / "train.npz"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        r = import_cli(tmp_path / "train.npz", store, "--length", LENGTH, "--sequences-per-chunk", 1, "--scheduler",
                       cluster.scheduler_address)
    assert r.returncode == 0 and "4 sequences x 5 frames" in r.stdout and "3 frames at the end" in r.stdout, r.stdout
    g = zarr.open_group(str(store), mode="r")
    assert np.array_equal(g["images"][:], src["imgs"][:20, ..., :3]) and g["done"][:].all()
    assert run_cli("export", store, "--format", "temporal_causal3dident", "--out", out).returncode == 0
    before = out.read_bytes()
    r = run_cli("export", store, "--format", "temporal_causal3dident", "--out", out)
    assert r.returncode == 2 and "--overwrite" in r.stderr and out.read_bytes() == before, r.stderr
