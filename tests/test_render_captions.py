"""Captioned renders through real Blender and real Zarr stores: the built-in multimodal3dident scene's captions state
every row's shape, position and colour; a user's own SCM and caption spec word its rows by its own rules; captions
are the same however the chunks are split; the Multimodal3DIdent export has exactly the published columns and
imports back identical; bad caption specs, and bad folders, are one line with exit 2 and nothing written."""

import csv
import shutil

import numpy as np
import pytest
import yaml
from helpers import assert_refused, benchmark, run_cli

import ident3d
from ident3d.ingest.multimodal3dident import IMAGE_COLUMNS, TEXT_COLUMNS
from ident3d.render import render_store
from ident3d.render.captions import hue_rgb, nearest_colour
from ident3d.render.scene import load_scene

SHAPES = ("teapot", "hare", "dragon", "cow", "armadillo", "horse", "head")
XS, YS = ("left", "center", "right"), ("top", "mid", "bottom")


@pytest.fixture(scope="module")
def mm_store(tmp_path_factory):
    """A 64 px multimodal3dident store of 24 rows in 3 chunks: the scene declares its captions."""
    out = tmp_path_factory.mktemp("mm") / "mm.zarr"
    assert render_store(out, scene="multimodal3dident", n=24, settings={"resolution": 64, "samples": 4},
                        chunk_size=8, workers=1, progress=False).ok
    return out


def test_every_caption_states_its_images_shape_position_and_colour(mm_store):
    view = ident3d.open_store(mm_store)
    assert view.image_size == 64 and view.text_latent_names == ["shape", "x", "y", "colour", "colour_palette",
                                                                "template"]
    text, stated, z, classes = view.text(), view.text_latents(), view.latents(), view.classes()
    names = view.latent_names
    x, y, hue = (z[:, names.index(n)] for n in ("pos_x", "pos_y", "obj_hue"))
    spec = view.attrs.text["spec"]
    palettes = [p for p in spec["states"]["colour"]["colour"]]
    from ident3d.render.captions import Palette, State

    colour = State("colour", "obj_hue", "colour", palettes=tuple(Palette(builtin=p) for p in palettes))
    all_names = colour.colour_names()
    for i, caption in enumerate(text):  # every row: the words of its own latents
        assert f" {SHAPES[classes[i]]}" in caption and f"{YS[int(y[i])]}-{XS[int(x[i])]}" in caption, caption
        name = all_names[int(stated[i, 3])]
        assert f'"{name}"' in caption, (caption, name)
        table = dict(colour.palettes[int(stated[i, 4])].colours())
        assert name in table  # the name is the drawn palette's nearest entry to the image's hue
        rgb = np.array([[int(table[k][j:j + 2], 16) / 255 for j in (1, 3, 5)] for k in table])
        assert list(table)[nearest_colour(hue_rgb(hue[i:i + 1]), rgb)[0]] == name or \
            np.allclose(rgb[list(table).index(name)], rgb[nearest_colour(hue_rgb(hue[i:i + 1]), rgb)[0]])
    assert np.array_equal(stated[:, :3], np.stack([classes, x, y], 1))
    assert len(set(stated[:, 5])) > 1 and len(set(text)) == len(text)  # sentence forms vary; captions differ
    shuffled = np.roll(classes, 1)  # negative control: another row's shape is not stated
    assert sum(f" {SHAPES[s]} " in t or f" {SHAPES[s]}," in t for s, t in zip(shuffled, text, strict=True)) < len(text)


def test_captions_do_not_depend_on_how_the_chunks_are_split(mm_store, tmp_path):
    other = tmp_path / "split.zarr"
    assert render_store(other, scene="multimodal3dident", n=24, settings={"resolution": 8, "samples": 1},
                        chunk_size=5, workers=1, progress=False).ok
    a, b = ident3d.open_store(mm_store), ident3d.open_store(other)
    assert np.array_equal(a.text(), b.text()) and np.array_equal(a.text_latents(), b.text_latents())
    seeded = tmp_path / "seed1.zarr"
    assert render_store(seeded, scene="multimodal3dident", n=24, settings={"resolution": 8, "samples": 1},
                        chunk_size=8, seed=1, workers=1, progress=False).ok
    assert not np.array_equal(ident3d.open_store(seeded).text(), a.text())


def test_a_users_own_scm_and_caption_spec(tmp_path):
    """3DIdent's SCM (continuous latents in [-1, 1]) with a spec of our own: x and z in bins, the ground's hue named
    from an inline palette; the hue mapping comes from the scene's binding (ground.hue: raw / 4 turns)."""
    spec = {"name": "mine", "states": {
        "x": {"latent": "pos_x", "bins": 3, "words": ["west", "middle", "east"]},
        "z": {"latent": "pos_z", "bins": [-1, 0, 1], "words": ["low", "high"]},
        "ground": {"latent": "bg_hue", "colour": {"warm": "#ff0000", "cool": "#0000ff", "leafy": "#00ff00"}}},
        "templates": ["{x} and {z} over {ground} ground", "a {ground} floor, object {z}, {x}"]}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    r = run_cli("render", "--scene", "3dident", "--n", "12", "--resolution", "8", "--samples", "1", "--text",
                tmp_path / "mine.yaml", "--out", tmp_path / "s.zarr", "--workers", "1", "--no-progress")
    assert r.returncode == 0, r.stderr
    view = ident3d.open_store(tmp_path / "s.zarr")
    z = view.latents()
    px, pz, bg = (z[:, view.latent_names.index(n)] for n in ("pos_x", "pos_z", "bg_hue"))
    hue = (0.25 * bg) % 1.0  # the scene's binding of bg_hue
    assert load_scene("3dident").latents[view.latent_names.index("bg_hue")].scale == 0.25
    rgb = {"warm": (1, 0, 0), "cool": (0, 0, 1), "leafy": (0, 1, 0)}
    for i, caption in enumerate(view.text()):
        x_word = ("west", "middle", "east")[min(2, int((px[i] + 1) / (2 / 3)))]
        z_word = "low" if pz[i] < 0 else "high"
        colour = min(rgb, key=lambda k: np.linalg.norm(hue_rgb(np.array([hue[i]]))[0] - rgb[k]))
        assert x_word in caption and z_word in caption and colour in caption, (caption, px[i], pz[i], hue[i])
    assert view.text_latent_names == ["x", "z", "ground", "ground_palette", "template"]
    assert view.attrs.text["spec"]["states"]["ground"]["hue"] == {"scale": 0.25, "offset": 0.0}
    plain = tmp_path / "plain.zarr"  # the same render without --text: no caption arrays, no text attribute
    assert render_store(plain, scene="3dident", n=12, settings={"resolution": 8, "samples": 1}, workers=1,
                        progress=False).ok
    assert "text" not in ident3d.open_store(plain).arrays and ident3d.open_store(plain).attrs.text is None


@pytest.mark.parametrize(("spec", "fragment"), [
    ({"states": {"x": {"latent": "pos_q", "words": ["a"]}}, "templates": ["{x}"]}, "'pos_q' is not a latent"),
    ({"states": {"x": {"latent": "pos_x", "bins": 2, "words": ["a", "b"]}}, "templates": ["{y}"]}, "{y}"),
    ({"states": {"x": {"latent": "pos_x", "bins": 1, "words": []}}, "templates": ["{x}"]}, "words"),
    ({"states": {"x": {"latent": "pos_x", "bins": [0, 1], "words": ["a"]}}, "templates": ["{x}"]}, "cover"),
])
def test_a_bad_caption_spec_is_one_line_and_writes_nothing(tmp_path, spec, fragment):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "s.zarr"
    r = run_cli("render", "--scene", "3dident", "--n", "4", "--resolution", "8", "--text", tmp_path / "bad.yaml",
                "--out", out, "--workers", "1", "--no-progress")
    assert_refused(r, fragment, "bad.yaml")
    assert not out.exists()


def test_text_flags_are_refused_where_they_mean_nothing(tmp_path):
    r = run_cli("render", "--sequences", "2", "--length", "2", "--text", "multimodal3dident", "--out",
                tmp_path / "q.zarr", "--no-progress")
    assert_refused(r, "--text does not go with --sequences")
    r = run_cli("render", "--scene", "3dident", "--n", "2", "--text", "nosuch", "--out", tmp_path / "q.zarr")
    assert_refused(r, "nosuch")
    assert not (tmp_path / "q.zarr").exists()
    from ident3d.causal.errors import UserError

    with pytest.raises(UserError, match="scene 3dident declares no captions"):  # text=True: the scene's, required
        render_store(tmp_path / "q.zarr", scene="3dident", n=2, text=True, workers=1, progress=False)
    assert not (tmp_path / "q.zarr").exists()


def test_export_has_the_published_columns_and_imports_back_identical(mm_store, tmp_path):
    out = tmp_path / "exp"
    r = run_cli("export", mm_store, "--format", "multimodal3dident", "--out", out, "--no-progress")
    assert r.returncode == 0, r.stderr
    with (out / "latents_image.csv").open() as fh:
        assert tuple(next(csv.reader(fh))) == IMAGE_COLUMNS
    with (out / "latents_text.csv").open() as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == TEXT_COLUMNS and len(rows) == 25
    lines = (out / "text" / "text_raw.txt").read_text().split("\n")
    view = ident3d.open_store(mm_store)
    assert lines == list(view.text()) and sorted(p.name for p in (out / "images").iterdir())[:2] == ["00.png", "01.png"]
    assert all(f'"{row[4]}"' in line for row, line in zip(rows[1:], lines, strict=True))
    back = tmp_path / "back.zarr"
    r = run_cli("import", "--format", "multimodal3dident", out, "--out", back, "--chunk-size", "8", "--workers", "1",
                "--no-progress")
    assert r.returncode == 0, r.stderr
    again = ident3d.open_store(back)
    assert again.arrays == view.arrays and again.text_latent_names == view.text_latent_names
    for name in view.arrays:
        assert np.array_equal(again.read(name), view.read(name)), name
    assert again.attrs.source_format == "multimodal3dident" and again.class_names == view.class_names


def test_bad_published_folders_are_one_line(mm_store, tmp_path):
    out = tmp_path / "exp"
    assert run_cli("export", mm_store, "--format", "multimodal3dident", "--out", out, "--no-progress").returncode == 0
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    text = (broken / "latents_text.csv").read_text().splitlines()
    row = text[3].split(",")
    row[5] = str(int(row[5]) + 1)  # a colour index that names another colour
    (broken / "latents_text.csv").write_text("\n".join(text[:3] + [",".join(row)] + text[4:]) + "\n")
    r = run_cli("import", "--format", "multimodal3dident", broken, "--out", tmp_path / "b.zarr", "--no-progress")
    assert_refused(r, "row 2", "object_color_index")
    (broken / "text" / "text_raw.txt").write_text("one line\n")
    shutil.copy(out / "latents_text.csv", broken / "latents_text.csv")
    r = run_cli("import", "--format", "multimodal3dident", broken, "--out", tmp_path / "b.zarr", "--no-progress")
    assert_refused(r, "1 captions for the 24 rows")
    assert not (tmp_path / "b.zarr").exists()
    plain = tmp_path / "plain.zarr"
    assert render_store(plain, scene="multimodal3dident", n=4, settings={"resolution": 8, "samples": 1}, text=False,
                        workers=1, progress=False).ok
    r = run_cli("export", plain, "--format", "multimodal3dident", "--out", tmp_path / "e2", "--no-progress")
    assert_refused(r, "needs a store with captions")


def test_the_goldens_digest_of_a_caption_array_is_its_text(mm_store, tmp_path):
    """benchmarks/goldens.py hashes strings by their UTF-8 bytes (an object array's memory holds pointers): the same
    store digests alike in two reads and in a copy, and one changed caption changes the digest."""
    goldens = benchmark("goldens")
    array_digest, value_bytes = goldens.array_digest, goldens.value_bytes
    copy = tmp_path / "copy.zarr"
    shutil.copytree(mm_store, copy)
    assert array_digest(mm_store) == array_digest(mm_store) == array_digest(copy)
    text = ident3d.open_store(copy).text()
    assert value_bytes(text) == value_bytes(np.array(list(text), dtype=object))
    import zarr

    zarr.open_group(str(copy), mode="r+")["text"][0:1] = np.array([text[0] + "!"], dtype=object)
    assert array_digest(copy) != array_digest(mm_store)
