"""LT nearest-neighbour pairs at scale, on a real Zarr store written by the project's writer (3,000 rows of
16 px numpy images with Causal3DIdent latents, chunks of 64): partners are the brute-force nearest neighbours,
their images are the store's rows, a batch decodes each partner chunk at most once, the chunk cache keeps
to its byte budget, batches do not depend on loader workers or cache size, and a damaged latents chunk is
one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import zarr

import ident3d.training.chunk_cache as chunk_cache
import ident3d.training.data as data
from ident3d.causal import load_scm
from ident3d.causal.errors import UserError
from ident3d.pipelines.cli import main
from ident3d.render.api import plan_render
from ident3d.store.info import store_info
from ident3d.store.zarr_io import ChunkData, CorruptChunkError, n_chunks, prepare, write_chunk
from ident3d.training.chunk_cache import ChunkCache
from ident3d.training.data import StoreBatches, make_loader
from ident3d.training.pairs import NearestNeighbourPairs

N, CHUNK, SIZE, BATCH = 3000, 64, 16, 256  # 47 chunks, the last one partial
CHANGE = "positions+hues"


def numpy_images(latents: np.ndarray) -> np.ndarray:
    """uint8 (n, SIZE, SIZE, 3) images that depend on every latent (a stand-in for renders, made in numpy)."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE] / SIZE
    z = (latents.astype(np.float64) + 1) / 2
    blob = np.exp(-((xx - z[:, 0, None, None]) ** 2 + (yy - z[:, 1, None, None]) ** 2) / (0.01 + 0.05 * z[:, 2, None, None]))
    chans = [255 * (z[:, 9 - c, None, None] * (1 - blob) + z[:, 3 + c, None, None] * blob) for c in range(3)]
    return np.clip(np.stack(chans, -1), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """The store, written chunk by chunk with store.zarr_io's writer (prepare + write_chunk)."""
    path = str(tmp_path_factory.mktemp("pairs") / "c3d16.zarr")
    plan = plan_render(path, scene="causal3dident", n=N, settings={"resolution": SIZE}, chunk_size=CHUNK)
    group = prepare(path, plan.attrs, plan.layout, overwrite=False)
    s = load_scm("causal3dident").sample(N, seed=0)
    for k in range(n_chunks(N, CHUNK)):
        sl = slice(k * CHUNK, min(N, (k + 1) * CHUNK))
        write_chunk(group, k, ChunkData(numpy_images(s.latents[sl]), s.latents[sl], s.classes[sl]), {})
    return path


@pytest.fixture(scope="module")
def truth(store) -> dict[str, np.ndarray]:
    """The store's arrays read plainly with zarr (the reference the tests compare with)."""
    g = zarr.open_group(store, mode="r")
    return {"images": g["images"][:], "latents": g["latents"][:], "classes": g["classes"][:]}


def streaming(store: str, seed: int = 0, lanes: int = 1, batch: int = BATCH) -> StoreBatches:
    """A dataset that reads chunk by chunk (as stores beyond the in-memory limit are read)."""
    return StoreBatches(store_info(store), batch, seed, in_memory=False, lanes=lanes)


def brute_force(z: np.ndarray, cls: np.ndarray, rows: np.ndarray, latents: np.ndarray, classes: np.ndarray,
                allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Reference nearest neighbour: for each target, the same-class row (other than the anchor, and within
    ``allowed`` rows if given) at the smallest Euclidean distance, by an exhaustive numpy scan."""
    ids, dist = np.empty(len(z), np.int64), np.empty(len(z))
    for i in range(len(z)):
        d = np.sqrt(((latents.astype(np.float64) - z[i].astype(np.float64)) ** 2).sum(1))
        d[(classes != cls[i]) | (np.arange(len(latents)) == rows[i])] = np.inf
        if allowed is not None:
            d[~allowed] = np.inf
        ids[i], dist[i] = d.argmin(), d.min()
    return ids, dist


def test_partners_are_the_brute_force_nearest_neighbours(store, truth):
    ds = streaming(store)
    pairing = NearestNeighbourPairs(ds, CHANGE, seed=0)
    changed = [ds.info.latent_names.index(n) for n in load_scm("causal3dident").resolve(CHANGE)]
    kept = [j for j in range(len(ds.info.latent_names)) if j not in changed]
    for step in (0, 3):
        rows = ds.batch_rows(step)
        arrays = ds.rows(rows)
        z, cls = pairing.targets(rows, arrays, step)
        assert np.array_equal(z[:, kept], truth["latents"][rows][:, kept])  # only the change set moves
        assert (z[:, changed] != truth["latents"][rows][:, changed]).mean() > 0.5
        assert np.array_equal(cls, truth["classes"][rows])
        out = pairing(rows, arrays, step)
        ids, dist = brute_force(z, cls, rows, truth["latents"], truth["classes"])
        assert np.array_equal(out["pair/index"], ids)
        np.testing.assert_allclose(out["pair/snap"], dist, rtol=1e-5)
        assert np.array_equal(out["pair/latents"], truth["latents"][ids])
        assert (ids != rows).all() and np.array_equal(truth["classes"][ids], truth["classes"][rows])


def test_batch_scope_is_nearest_within_the_anchors_chunks_and_snaps_further(store, truth):
    ds = streaming(store)
    local = NearestNeighbourPairs(ds, CHANGE, seed=0, scope="batch")
    rows = ds.batch_rows(1)
    arrays = ds.rows(rows)
    z, cls = local.targets(rows, arrays, 1)
    out = local(rows, arrays, 1)
    allowed = np.isin(np.arange(N) // CHUNK, np.unique(rows // CHUNK))
    ids, dist = brute_force(z, cls, rows, truth["latents"], truth["classes"], allowed)
    assert np.array_equal(out["pair/index"], ids)
    np.testing.assert_allclose(out["pair/snap"], dist, rtol=1e-5)
    glob = NearestNeighbourPairs(ds, CHANGE, seed=0)(rows, arrays, 1)
    assert (out["pair/snap"] >= glob["pair/snap"] - 1e-6).all()
    assert out["pair/snap"].mean() > glob["pair/snap"].mean()


def test_partner_images_are_the_stores_rows(store, truth):
    stream, memory = streaming(store), StoreBatches(store_info(store), BATCH, 0, in_memory=True)
    rows = stream.batch_rows(2)
    arrays = stream.rows(rows)
    a = NearestNeighbourPairs(stream, CHANGE, seed=0)(rows, arrays, 2)
    b = NearestNeighbourPairs(memory, CHANGE, seed=0)(rows, memory.rows(rows), 2)
    assert np.array_equal(a["pair/images"], truth["images"][a["pair/index"]])
    assert np.isin(a["pair/index"] // CHUNK, np.unique(rows // CHUNK)).mean() < 0.9  # most come from other chunks
    for key in a:
        assert np.array_equal(a[key], b[key]), key


def test_a_batch_decodes_each_partner_chunk_at_most_once(store, monkeypatch):
    decoded: list[tuple[str, int]] = []

    def spy(module):
        real = module.read_rows

        def counting(array, sel, path):
            decoded.append((array.path, sel.start))
            return real(array, sel, path)
        return counting

    monkeypatch.setattr(chunk_cache, "read_rows", spy(chunk_cache))
    monkeypatch.setattr(data, "read_rows", spy(data))
    ds = streaming(store)
    pairing = NearestNeighbourPairs(ds, CHANGE, seed=0)
    rows = ds.batch_rows(0)
    arrays = ds.rows(rows)
    decoded.clear()
    out = pairing(rows, arrays, 0)
    partner_chunks = np.unique(out["pair/index"] // CHUNK)
    foreign = np.setdiff1d(partner_chunks, np.unique(rows // CHUNK))
    images = [start // CHUNK for key, start in decoded if key == "images"]
    assert len(images) <= partner_chunks.size < BATCH
    assert sorted(images) == foreign.tolist()  # a cold cache decodes exactly the chunks the anchors did not bring
    assert [key for key, _ in decoded] == ["images"] * len(images)  # partner latents come from memory
    decoded.clear()
    again = pairing(rows, arrays, 0)
    assert decoded == [] and np.array_equal(again["pair/images"], out["pair/images"])  # all cached now
    nocache = NearestNeighbourPairs(ds, CHANGE, seed=0, cache_bytes=0)
    for _ in range(2):
        decoded.clear()
        nocache(rows, arrays, 0)
        assert sorted(start // CHUNK for _, start in decoded) == foreign.tolist()


def test_chunk_cache_keeps_to_its_byte_bound(store, truth):
    chunk_bytes = CHUNK * SIZE * SIZE * 3
    cache = ChunkCache(store, "images", CHUNK, N, max_bytes=int(3.5 * chunk_bytes))
    rng = np.random.default_rng(0)
    for _ in range(20):
        rows = rng.choice(N, 40, replace=False)
        assert np.array_equal(cache.rows(rows), truth["images"][rows])
        assert cache.nbytes <= cache.max_bytes and len(cache.cached()) <= 3
        assert cache.nbytes == sum(cache.chunk(k).nbytes for k in cache.cached())
    before = cache.decodes
    last = cache.cached()[-1]
    cache.rows(np.array([last * CHUNK]))
    assert cache.decodes == before and cache.cached()[-1] == last  # a hit, and most recently used
    cache.rows(np.array([(last + 1) % 46 * CHUNK, (last + 2) % 46 * CHUNK, (last + 3) % 46 * CHUNK]))
    assert last not in cache.cached() and cache.decodes == before + 3  # the oldest went first
    off = ChunkCache(store, "images", CHUNK, N, max_bytes=0)
    assert np.array_equal(off.rows(np.arange(100, 300)), truth["images"][100:300])
    assert off.cached() == [] and off.nbytes == 0 and off.decodes == 4
    with pytest.raises(UserError, match="whole number of bytes"):
        ChunkCache(store, "images", CHUNK, N, max_bytes=-1)
    with pytest.raises(UserError, match="scope"):
        NearestNeighbourPairs(streaming(store), CHANGE, seed=0, scope="window")


def test_batches_do_not_depend_on_workers_or_cache(store):
    steps = 4
    one = streaming(store, seed=5, lanes=2, batch=128)
    one.pairing = NearestNeighbourPairs(one, CHANGE, seed=5)
    expected = [one.batch(s) for s in range(steps)]
    two = streaming(store, seed=5, lanes=2, batch=128)
    two.pairing = NearestNeighbourPairs(two, CHANGE, seed=5, cache_bytes=0)
    it = iter(make_loader(two, num_workers=2))
    got = [next(it) for _ in range(steps)]
    for a, b in zip(expected, got, strict=True):
        assert a.keys() == b.keys() and "pair/images" in a
        for key in a:
            assert torch.equal(a[key], b[key]), key
    assert not torch.equal(expected[0]["pair/images"], expected[1]["pair/images"])


def test_a_damaged_latents_chunk_is_one_line(store, tmp_path, capsys):
    bad = tmp_path / "bad.zarr"
    shutil.copytree(store, bad)
    target = Path(bad) / "latents" / "c" / "5" / "0"
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    target.write_bytes(bytes(raw))
    ds = streaming(str(bad))
    with pytest.raises(CorruptChunkError) as err:
        NearestNeighbourPairs(ds, CHANGE, seed=0)
    text = str(err.value)
    assert "\n" not in text and "chunk 5 of latents is corrupt" in text and "--repair" in text
    code = main(["train", "--data", str(bad), "--out", str(tmp_path / "run"), "--encoder", "cnn", "--views",
                 f"lt_nn:{CHANGE}", "--steps", "1", "--batch-size", "32", "--no-progress"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "chunk 5 of latents is corrupt" in lines[0], lines
