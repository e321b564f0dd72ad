"""Sequence stores (issue 24, part 2): a dynamic SCM's rollout rendered through real Blender into a Zarr store in
(sequence x time) order with sequence / time / interventions arrays, chunked by whole sequences, bit-identical
however the work is split (workers and sequences per chunk), resumable, shown as strips with interventions
marked, and bad settings refused in one line before anything is written."""

import json

import numpy as np
import pytest
import zarr
from helpers import read_png, run_cli

from ident3d.causal.loading import load_dynamic_scm
from ident3d.pipelines.show_sequences import intervened_factors
from ident3d.render.sequences import plan_sequences, render_sequences
from ident3d.store.attrs import read_attrs
from ident3d.store.zarr_io import open_store

SETTINGS = {"resolution": 16, "samples": 2}
S, T = 3, 3


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """3 sequences x 3 steps, one sequence per chunk, rendered in this process."""
    out = tmp_path_factory.mktemp("seq") / "one.zarr"
    assert render_sequences(out, sequences=S, length=T, seed=5, settings=SETTINGS, sequences_per_chunk=1,
                            workers=1, progress=False).ok
    return out


def test_store_holds_the_rollout_in_sequence_time_order(reference):
    g = zarr.open_group(str(reference), mode="r")
    roll = load_dynamic_scm("temporal_causal3dident").rollout(S, T, seed=5)
    attrs = read_attrs(open_store(str(reference)))
    assert attrs.scene == "temporal_causal3dident" and attrs.sequences["length"] == T
    assert attrs.chunk_size % T == 0  # chunks hold whole sequences: no transition straddles a chunk
    assert g["images"].shape == (S * T, 16, 16, 3) and g["done"][:].all()
    assert list(g["sequence"][:]) == [0, 0, 0, 1, 1, 1, 2, 2, 2] and list(g["time"][:]) == [0, 1, 2] * S
    np.testing.assert_array_equal(g["interventions"][:], roll.targets.reshape(S * T, -1))
    cols = [roll.names.index(n) for n in attrs.latent_names]
    np.testing.assert_array_equal(g["latents"][:], roll.latents.reshape(S * T, -1)[:, cols])
    np.testing.assert_array_equal(g["classes"][:], roll.latents.reshape(S * T, -1)[:, roll.names.index("class")])
    frames = g["images"][:].astype(float)
    assert np.abs(frames[1:] - frames[:-1]).mean() > 1.0  # the frames move: not one image repeated


def test_any_split_renders_bit_identical_frames(reference, tmp_path):
    """Two worker processes, three sequences per chunk: the same bytes in every array as the reference."""
    other = tmp_path / "two.zarr"
    assert render_sequences(other, sequences=S, length=T, seed=5, settings=SETTINGS, sequences_per_chunk=3,
                            workers=2, progress=False).ok
    a, b = zarr.open_group(str(reference), mode="r"), zarr.open_group(str(other), mode="r")
    for name in ("images", "latents", "classes", "sequence", "time", "interventions"):
        assert np.array_equal(a[name][:], b[name][:]), name
    c = render_sequences(tmp_path / "seed6.zarr", sequences=S, length=T, seed=6, settings=SETTINGS,
                         workers=1, progress=False)
    assert c.ok and not np.array_equal(zarr.open_group(str(tmp_path / "seed6.zarr"))["images"][:], a["images"][:])


def test_an_interrupted_render_resumes_to_the_same_store(reference, tmp_path):
    """A chunk whose done flag was never set (the state a kill leaves) is rendered again, identically; a re-run of
    a complete store renders nothing."""
    import shutil

    copy = tmp_path / "copy.zarr"
    shutil.copytree(reference, copy)
    g = zarr.open_group(str(copy), mode="r+")
    g["done"][1] = False
    g["images"][T:2 * T] = 0
    report = render_sequences(copy, sequences=S, length=T, seed=5, settings=SETTINGS, sequences_per_chunk=1,
                              workers=1, progress=False)
    assert report.rendered == [1] and sorted(report.skipped) == [0, 2]
    assert np.array_equal(g["images"][:], zarr.open_group(str(reference), mode="r")["images"][:])
    again = render_sequences(copy, sequences=S, length=T, seed=5, settings=SETTINGS, sequences_per_chunk=1,
                             workers=1, progress=False)
    assert again.rendered == [] and len(again.skipped) == S


def test_show_draws_strips_with_the_interventions_marked(reference, tmp_path):
    from ident3d.pipelines.show_sequences import factor_of, save_strips

    attrs = read_attrs(open_store(str(reference)))
    captions = save_strips(open_store(str(reference)), attrs, tmp_path / "s.png", count=S, path=str(reference))
    targets = zarr.open_group(str(reference), mode="r")["interventions"][:]
    factors = factor_of(attrs)
    assert "position" in factors and factors.count("position") == 3  # x, y, z are one causal factor
    want = [intervened_factors(row, factors) for row in targets]
    got = [line[2][4:].split(", ") if len(line) > 2 else [] for line in captions]
    assert got == want and any(want)  # every marked frame is an intervened one, and the rollout has some
    height, width, colours = read_png(tmp_path / "s.png")
    assert height > 100 and width > 100 and colours > 200
    r = run_cli("show", str(reference), "--out", str(tmp_path / "cli.png"))
    assert r.returncode == 0 and "3 x 3 steps of temporal_causal3dident" in r.stdout, r.stdout[-2000:]


def test_factor_marks_fail_on_shuffled_targets():
    """The marking reads the targets it is given: shuffling the rows changes the marks (so the test above could
    fail)."""
    roll = load_dynamic_scm("temporal_causal3dident").rollout(20, 6, seed=1)
    flat = roll.targets.reshape(-1, len(roll.names))
    factors = list(roll.names)
    marks = [intervened_factors(r, factors) for r in flat]
    shuffled = [intervened_factors(r, factors) for r in np.random.default_rng(0).permutation(flat)]
    assert marks != shuffled


@pytest.mark.parametrize("args,fragment", [
    (["--sequences", "0"], "sequences must be a whole number >= 1, got 0"),
    (["--sequences", "2", "--length", "1"], "length must be a whole number >= 2, got 1"),
    (["--sequences", "2", "--sequences-per-chunk", "0"], "sequences per chunk must be a whole number >= 1"),
    (["--sequences", "2", "--scm", "causal3dident"], "is a static SCM"),
    (["--sequences", "2", "--n", "5"], "--n does not go with --sequences"),
    (["--sequences", "2", "--scene", "causal3dident"], "scene causal3dident binds latents"),
])
def test_bad_sequence_settings_are_one_line_and_write_nothing(tmp_path, args, fragment):
    out = tmp_path / "bad.zarr"
    r = run_cli("render", "--out", str(out), "--resolution", "16", "--no-progress", *args)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and fragment in lines[0], (r.returncode, r.stderr[-1500:])
    assert not out.exists()


def test_plan_is_a_pure_function_of_seed_and_sequence():
    a = plan_sequences("/tmp/x.zarr", sequences=4, length=3, seed=2, settings=SETTINGS)
    b = plan_sequences("/tmp/x.zarr", sequences=2, length=3, seed=2, settings=SETTINGS)
    np.testing.assert_array_equal(a.latents[:6], b.latents)  # sequence i does not depend on how many are drawn
    assert json.dumps(a.attrs.sequences, sort_keys=True) != json.dumps(b.attrs.sequences, sort_keys=True)


def _chunk_files(store, name):
    """The chunk files of a top-level array, {row band: path} (an all-fill-value band has none: Zarr skips it)."""
    return {int(p.relative_to(store / name / "c").parts[0]): p for p in sorted((store / name / "c").rglob("*"))
            if p.is_file()}


def test_check_finds_damage_in_every_per_row_array_of_a_sequence_store(reference, tmp_path):
    """`check` decodes every per-row array the store format declares (issue 32.3: it read only images, latents and
    classes): a cut-off chunk of each, sequence ids and steps that do not match their rows, and a deleted sequence
    array are found; --repair and the same render command give back the reference bytes."""
    import shutil

    from ident3d.store.check import check_store
    from ident3d.store.zarr_io import row_arrays

    declared = [p for p, _ in row_arrays(open_store(str(reference)), read_attrs(open_store(str(reference))))]
    assert declared == ["images", "latents", "classes", "sequence", "time", "interventions"]
    for name in declared:
        copy = tmp_path / f"cut_{name}.zarr"
        shutil.copytree(reference, copy)
        k, f = max(_chunk_files(copy, name).items())
        f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])
        report = check_store(str(copy))
        assert [(b.chunk, b.array) for b in report.bad] == [(k, name)], (name, report.bad)
    copy = tmp_path / "values.zarr"
    shutil.copytree(reference, copy)
    g = zarr.open_group(str(copy), mode="r+")
    g["time"][2 * T:] = 0
    g["sequence"][:T] = 1
    bad = check_store(str(copy)).bad
    assert [(b.chunk, b.array, b.error) for b in bad] == [(0, "sequence", "sequence ids are not those of the rows"),
                                                          (2, "time", "steps are not those of the rows")]
    shutil.rmtree(copy / "sequence")
    r = run_cli("check", str(copy), "--no-progress")
    assert r.returncode == 1 and "chunk 1: sequence: array missing" in r.stdout and "3 bad chunks (0-2)" in r.stdout
    assert run_cli("check", str(copy), "--repair", "--no-progress").returncode == 1
    assert check_store(str(copy)).ok and check_store(str(copy)).not_done == [0, 1, 2]
    assert render_sequences(copy, sequences=S, length=T, seed=5, settings=SETTINGS, sequences_per_chunk=1,
                            workers=1, progress=False).rendered == [0, 1, 2]
    a, b = zarr.open_group(str(reference), mode="r"), zarr.open_group(str(copy), mode="r")
    for name in declared:
        assert np.array_equal(a[name][:], b[name][:]), name
    assert run_cli("check", str(copy), "--no-progress").returncode == 0


def test_a_users_dynamic_scm_without_lag_parents_renders_with_the_scene_given(tmp_path):
    """The README's dynamic-SCM example (a node without lag parents has no `initial`: its mechanism is step 0's) renders
    with a scene binding its latents; without --scene it is one line asking for one (issue 32.2: a KeyError)."""
    import yaml

    spec = {"dynamic": True, "nodes": [
        {"name": "x", "range": [-1, 1], "lag_parents": ["x"], "initial": {"type": "uniform"},
         "mechanism": {"type": "truncnorm", "mean": "0.9 * x_prev", "scale": 0.1},
         "intervention": {"p": 0.5, "kind": "hard", "dist": {"type": "uniform"}}},
        {"name": "y", "parents": ["x"], "range": [-1, 1], "mechanism": {"type": "truncnorm", "mean": "x", "scale": 0.2}}]}
    scene = {"name": "xy", "camera": {"location": [8, 0, 8], "look_at": [0, 0, 0]},
             "lights": [{"name": "sun", "type": "SUN", "energy": 3}], "classes": [{"name": "teapot", "mesh": "builtin:teapot"}],
             "latents": [{"name": "x", "target": "object.x", "scale": 3.0}, {"name": "y", "target": "object.hue", "scale": 0.25}]}
    (tmp_path / "dyn.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "xy.yaml").write_text(yaml.safe_dump(scene))
    base = ["render", "--sequences", "2", "--length", "3", "--scm", tmp_path / "dyn.yaml", "--resolution", "16",
            "--samples", "1", "--no-progress", "--out"]
    r = run_cli(*base, tmp_path / "none.zarr")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "give --scene" in r.stderr and not (tmp_path / "none.zarr").exists()
    r = run_cli(*base, tmp_path / "x.zarr", "--scene", tmp_path / "xy.yaml")
    assert r.returncode == 0, r.stderr[-2000:]
    g = zarr.open_group(str(tmp_path / "x.zarr"), mode="r")
    roll = load_dynamic_scm(str(tmp_path / "dyn.yaml")).rollout(2, 3, seed=0)
    np.testing.assert_array_equal(g["latents"][:], roll.latents.reshape(6, 2))
    assert g["interventions"][:].any() and g["images"][:].std() > 5
