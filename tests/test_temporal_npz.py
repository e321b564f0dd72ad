"""The published Temporal Causal3DIdent .npz <-> sequence stores: units, target alignment, round trip, bad files."""

from __future__ import annotations

import math

import numpy as np
import pytest
import zarr
from helpers import run_cli

from ingest.temporal_npz import COLUMNS, SHAPES, export_temporal, import_temporal

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


def test_import_resumes_and_refuses_a_finished_store(tmp_path):
    citris_file(tmp_path / "train.npz")
    out = tmp_path / "s.zarr"
    import_temporal(tmp_path / "train.npz", out, length=LENGTH, sequences_per_chunk=1, progress=False)
    g = zarr.open_group(str(out), mode="r+")
    g["done"][2] = False
    g["images"][10:15] = 0
    r = import_temporal(tmp_path / "train.npz", out, length=LENGTH, sequences_per_chunk=1, progress=False)
    assert r.imported == [2] and r.skipped == [0, 1, 3]
    assert g["images"][10:15].any()
    r = run_cli("import", "--format", "temporal_causal3dident", tmp_path / "train.npz", "--out", out,
                "--length", LENGTH, "--sequences-per-chunk", 1, "--no-progress")
    assert r.returncode == 2 and "already a complete store" in r.stderr and "--overwrite" in r.stderr, r.stderr


@pytest.mark.parametrize("override, message", [
    ({"raw_latents": np.full((N, 10), 7.0, np.float32)}, "raw_latents column pos-x spans [7, 7]"),
    ({"interventions": np.zeros((N - 1, 10), int)}, "interventions (22, 10)"),
    ({"imgs": np.zeros((N, 6, 6), np.uint8)}, "expected N x H x W x 3"),
    ({"shape_latents": np.full((N, 2), 9, np.uint8)}, "shape indices outside 0..6"),
])
def test_bad_files_are_one_line_exit_2_and_write_nothing(tmp_path, override, message):
    citris_file(tmp_path / "bad.npz", **override)
    out = tmp_path / "s.zarr"
    r = run_cli("import", "--format", "temporal_causal3dident", tmp_path / "bad.npz", "--out", out, "--no-progress")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and message in lines[0], r.stderr
    assert not out.exists()


def test_cli_round_trip_and_export_refuses_to_replace_a_file(tmp_path):
    citris_file(tmp_path / "train.npz")
    store, out = tmp_path / "s.zarr", tmp_path / "e" / "train.npz"
    r = run_cli("import", "--format", "temporal_causal3dident", tmp_path / "train.npz", "--out", store, "--length",
                LENGTH, "--no-progress")
    assert r.returncode == 0 and "4 sequences x 5 frames" in r.stdout and "3 frames at the end" in r.stdout, r.stdout
    assert run_cli("export", store, "--format", "temporal_causal3dident", "--out", out).returncode == 0
    before = out.read_bytes()
    r = run_cli("export", store, "--format", "temporal_causal3dident", "--out", out)
    assert r.returncode == 2 and "--overwrite" in r.stderr and out.read_bytes() == before, r.stderr
