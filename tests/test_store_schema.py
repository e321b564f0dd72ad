"""One store format for every writer: a rendered, an imported, a converted and an imported sequence store carry exactly the fields of
``ident3d.store.attrs.StoreAttrs`` (software, meshes and hashes included), read back to equal values, and readers get a
one-line error for a store whose attributes are missing or mistyped; stores written before the typed format
(fewer keys) still read, and resume checks compare the fingerprint fields only."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import zarr
from test_published import make_3dident
from test_temporal_npz import citris_file

from ident3d.causal.errors import UserError
from ident3d.ingest.datasets import ImageDataset, write_dataset_store
from ident3d.ingest.published_import import import_published
from ident3d.ingest.temporal_npz import import_temporal
from ident3d.render import render_store
from ident3d.store.attrs import FINGERPRINT_KEYS, StoreAttrs, read_attrs
from ident3d.store.info import store_info
from ident3d.store.zarr_io import open_store, prepare

FIELDS = {f.name for f in dataclasses.fields(StoreAttrs)}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """One store from each writer: Blender render, published-folder import, labelled-dataset conversion."""
    root = tmp_path_factory.mktemp("schema")
    assert render_store(root / "rendered.zarr", scene="3dident", n=4, settings={"resolution": 16, "samples": 2},
                        chunk_size=2, workers=1, progress=False).ok
    make_3dident(root / "published", n=6, size=16)
    import_published(root / "published", root / "imported.zarr", "3dident", chunk_size=4, workers=1, progress=False)
    rng = np.random.default_rng(0)
    ds = ImageDataset("toy", rng.integers(0, 256, (10, 8, 8, 3), np.uint8),
                      {"digit": rng.integers(0, 3, 10), "size": rng.integers(0, 2, 10)},
                      {"digit": ["a", "b", "c"], "size": ["small", "large"]})
    write_dataset_store(ds, root / "converted.zarr", chunk_size=4)
    citris_file(root / "train.npz")
    import_temporal(root / "train.npz", root / "sequences.zarr", length=5, progress=False)
    return {k: str(root / f"{k}.zarr") for k in ("rendered", "imported", "converted", "sequences")}


@pytest.mark.parametrize("writer", ["rendered", "imported", "converted", "sequences"])
def test_every_writer_writes_every_field_and_reads_back_equal(stores, writer):
    raw = dict(zarr.open_group(stores[writer], mode="r").attrs)
    assert set(raw) == FIELDS
    attrs = read_attrs(open_store(stores[writer]))
    assert attrs.to_attrs() == json.loads(json.dumps(raw))
    assert attrs.software["python"] and attrs.software["zarr"] == zarr.__version__ and attrs.created
    info = store_info(stores[writer])
    assert info.attrs == attrs and info.latent_names == attrs.latent_names and info.n == attrs.n


def test_each_writer_says_what_it_is(stores):
    r, i, c = (read_attrs(open_store(stores[k])) for k in ("rendered", "imported", "converted"))
    assert r.scene == "3dident" and r.latents_source == "scm" and r.render["resolution"] == 16
    assert set(r.meshes) == {"Teapot"} and len(r.latent_names) == 10 and r.source_format is None
    assert i.scene == "imported" and i.source_format == "3dident" and i.latent_names == r.latent_names
    assert i.source == str(Path(stores["imported"]).parent / "published") and len(i.latents_sha256) == 64
    assert c.scene == "dataset:toy" and c.latent_names == ["digit", "size"] and c.class_names == ["a", "b", "c"]
    assert c.label_names == {"digit": ["a", "b", "c"], "size": ["small", "large"]}
    assert [n["name"] for n in c.scm["nodes"]] == ["class", "digit", "size"]
    t = read_attrs(open_store(stores["sequences"]))
    assert t.source_format == "temporal_causal3dident" and t.sequences["imported_from"] == "train.npz"
    assert t.sequences["length"] == 5 and t.sequences["spec"]["name"] == "temporal_causal3dident"


def test_fingerprint_is_the_resume_keys(stores):
    assert set(FINGERPRINT_KEYS) == {"format_version", "scene_spec", "scm", "render", "seed", "n", "chunk_size",
                                     "views", "view_seeds", "latents_sha256", "mesh_sha256", "sequences", "placement",
                                     "text", "view_mechanisms", "view_blocks"}
    attrs = read_attrs(open_store(stores["rendered"]))
    assert "sequences" not in attrs.fingerprint()  # a key added later: digests of older stores are unchanged
    assert "placement" not in attrs.fingerprint()  # likewise: a render without placement rules
    assert "text" not in attrs.fingerprint()  # and a render without captions
    assert "view_mechanisms" not in attrs.fingerprint()  # and one without views of a second mechanism
    seq = dataclasses.replace(attrs, sequences={"length": 4})
    assert seq.fingerprint()["sequences"] == {"length": 4} and seq.differences(attrs) == ["sequences"]
    metal = dataclasses.replace(attrs, views={"metal": []}, view_mechanisms={"metal": {"material": "metallic"}})
    assert metal.fingerprint()["view_mechanisms"] == {"metal": {"material": "metallic"}}
    assert metal.differences(dataclasses.replace(metal, view_mechanisms=None)) == ["view_mechanisms"]
    # view blocks: left out while they are what the views' change sets imply, or absent (a store made before them)
    names = ["class", "pos_x", "hue"]
    lt = dataclasses.replace(attrs, latent_names=names[1:], class_node="class", views={"h": ["hue"]})
    implied = {"h": {"shared": ["class", "pos_x"], "perturbed": ["hue"], "specific": []}}
    assert lt.blocks == implied and "view_blocks" not in lt.fingerprint()
    recorded = dataclasses.replace(lt, view_blocks=implied)
    assert "view_blocks" not in recorded.fingerprint() and recorded.differences(lt) == []
    declared = dataclasses.replace(lt, view_blocks={"h": {**implied["h"], "shared": ["class"], "specific": ["pos_x"]}})
    assert declared.fingerprint()["view_blocks"] == declared.view_blocks and declared.differences(lt) == ["view_blocks"]


def test_missing_and_mistyped_attributes_are_one_line(stores):
    raw = dict(zarr.open_group(stores["converted"], mode="r").attrs)
    with pytest.raises(UserError, match=r"^x\.zarr lacks the attribute\(s\) scm; re-render or re-import it$"):
        StoreAttrs.from_attrs({k: v for k, v in raw.items() if k != "scm"}, "x.zarr")
    with pytest.raises(UserError, match=r"^x\.zarr: attribute 'latent_names' should be a list, got str"):
        StoreAttrs.from_attrs({**raw, "latent_names": "digit"}, "x.zarr")
    with pytest.raises(UserError, match="not an ident3d store of format v1"):
        StoreAttrs.from_attrs({**raw, "format_version": 2}, "x.zarr")


def test_a_store_written_before_the_typed_format_still_reads(stores, tmp_path):
    """Stores of format v1 made before software/meshes/label_names existed: missing keys take their defaults."""
    raw = dict(zarr.open_group(stores["converted"], mode="r").attrs)
    old = {k: v for k, v in raw.items() if k not in ("software", "meshes", "mesh_sha256", "label_names", "created")}
    attrs = StoreAttrs.from_attrs(old, "old.zarr")
    assert attrs.software == {} and attrs.meshes == {} and attrs.mesh_sha256 is None
    assert attrs.fingerprint() == StoreAttrs.from_attrs(raw).fingerprint()


def test_resume_compares_fingerprints_only(stores, tmp_path):
    """A store whose non-fingerprint fields differ (a later `created`) resumes; a different seed is refused."""
    path = str(tmp_path / "c.zarr")
    attrs = read_attrs(open_store(stores["converted"]))
    layout = {"n": attrs.n, "chunk_size": attrs.chunk_size, "height": 8, "width": 8, "n_latents": 2,
              "has_classes": True, "views": []}
    prepare(path, attrs, layout, overwrite=False)
    prepare(path, dataclasses.replace(attrs, created="later", software={}), layout, overwrite=False)
    with pytest.raises(UserError, match="rendered with different seed"):
        prepare(path, dataclasses.replace(attrs, seed=1), layout, overwrite=False)
