"""Latent-transformation pairs the original way: draw z~ from the store's SCM, then snap it to the
nearest stored image of the same class, skipping the anchor itself. The snap distance ||z~ - z_nn|| is the
approximation error exact pairs avoid.

Scale: the latents (read once through :func:`store.zarr_io.read_rows`, so a damaged chunk is one line) live in
memory with a k-d tree per class (250k x 10 float32 is 10 MB), and a batch's searches are one vectorised query
per class. Partner images come from the batch's own chunks when they are there, otherwise from a byte-bounded
LRU cache of decoded chunks (:class:`training.chunk_cache.ChunkCache`), so a batch decodes each distinct partner
chunk at most once. ``scope="batch"`` snaps within the chunks the batch's anchors already occupy instead: no
extra decoding at all, at the price of a larger snap distance (``benchmarks/ltnn_scale_bench.py`` measures it).
Partners are a pure function of (seed, batch index, rows): caches and loader workers never change them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.spatial import cKDTree

from ident3d.causal import Samples, load_scm
from ident3d.causal.errors import UserError
from ident3d.causal.rng import stream_key
from ident3d.store.zarr_io import read_rows, store_group
from ident3d.training.chunk_cache import DEFAULT_CACHE_BYTES, ChunkCache

if TYPE_CHECKING:
    from ident3d.training.data import StoreBatches

SCOPES = ("store", "batch")  # where partners are searched: the whole store, or the chunks of the batch's anchors


class NearestNeighbourPairs:
    """Callable (rows, arrays, batch) -> {"pair/images", "pair/latents", "pair/snap", "pair/index"} for a
    StoreBatches. ``scope``: "store" (the original method, global nearest neighbour) or "batch" (nearest among
    the rows of the chunks the batch already read). ``cache_bytes``: budget of decoded partner chunks per loader
    process (streaming stores only; 0 turns the cache off)."""

    def __init__(self, dataset: StoreBatches, change: str, seed: int, scope: str = "store",
                 cache_bytes: int = DEFAULT_CACHE_BYTES):
        if scope not in SCOPES:
            raise UserError(f"lt_nn partner scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        info = dataset.info
        self.dataset, self.seed, self.scope = dataset, seed, scope
        self.scm = load_scm(info.scm)
        self.change = self.scm.resolve(change)
        self.pool = info.rows  # sorted usable row ids; the arrays below are indexed by position in it
        self.latents, self.classes = self._read_latents()
        self.trees = {int(k): (members, cKDTree(self.latents[members], leafsize=32))
                      for k in np.unique(self.classes) for members in [np.flatnonzero(self.classes == k)]}
        self.images = ChunkCache(info.path, "images", info.chunk_size, info.n, cache_bytes)

    def _read_latents(self) -> tuple[np.ndarray, np.ndarray]:
        """The pool's latents and classes (zeros without a class node), read whole; a damaged chunk is a one-line
        CorruptChunkError naming it."""
        info = self.dataset.info
        g = store_group(info.path, mode="r")
        latents = read_rows(g["latents"], slice(None), info.path)[self.pool]
        if info.class_names:
            return latents, read_rows(g["classes"], slice(None), info.path)[self.pool].astype(np.int64)
        return latents, np.zeros(self.pool.size, np.int64)

    # ----- search -------------------------------------------------------------------------------------
    def targets(self, rows: np.ndarray, arrays: dict[str, np.ndarray], batch: int) -> tuple[np.ndarray, np.ndarray]:
        """(z~, class) per anchor: the change set redrawn by the SCM, seeded by (seed, batch) and the row ids."""
        classes = arrays.get("classes")
        anchors = Samples(arrays["latents"], classes, self.dataset.info.latent_names, rows,
                          self.scm.class_node, self.scm.class_names)
        moved = self.scm.transform(anchors, self.change, seed=stream_key(self.seed, "lt_nn", batch) % 2**31)
        cls = moved.classes if moved.classes is not None else np.zeros(rows.size, np.int64)
        return moved.latents, cls.astype(np.int64)

    def search(self, rows: np.ndarray, z: np.ndarray, cls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(partner row ids, snap distances) for targets ``z`` of class ``cls`` of anchors ``rows``, in ``scope``."""
        if self.scope == "batch":
            return self._nearest_in_chunks(rows, z, cls)
        return self._nearest_in_store(rows, z, cls)

    def _nearest_in_store(self, rows: np.ndarray, z: np.ndarray, cls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Global nearest same-class neighbour other than the anchor: one k=2 k-d tree query per class."""
        partners, snap = np.empty(rows.size, np.int64), np.empty(rows.size, np.float32)
        for k in np.unique(cls):
            sel = np.flatnonzero(cls == k)
            if int(k) not in self.trees:
                raise UserError(f"lt_nn: {self.dataset.info.path} has no image of class {self._class_name(k)} to "
                                "snap to in the rows used; use a larger store or split")
            members, tree = self.trees[int(k)]
            kk = min(2, members.size)
            dist, idx = tree.query(z[sel], k=kk)
            dist, idx = dist.reshape(sel.size, kk), idx.reshape(sel.size, kk)
            found = self.pool[members[idx]]
            j = ((found[:, 0] == rows[sel]) & (kk == 2)).astype(np.int64)  # skip the anchor itself
            at = np.arange(sel.size)
            partners[sel], snap[sel] = found[at, j], dist[at, j]
        return partners, snap

    def _nearest_in_chunks(self, rows: np.ndarray, z: np.ndarray, cls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Nearest same-class row other than the anchor among the rows of the anchors' chunks (exhaustive, per
        class); an anchor with no such row falls back to the global search."""
        c = self.dataset.info.chunk_size
        near = np.flatnonzero(np.isin(self.pool // c, np.unique(rows // c)))  # positions in the pool
        partners, snap = np.full(rows.size, -1, np.int64), np.zeros(rows.size, np.float32)
        for k in np.unique(cls):
            sel = np.flatnonzero(cls == k)
            cand = near[self.classes[near] == k]
            if cand.size == 0:
                continue
            d2 = ((z[sel, None, :].astype(np.float64) - self.latents[cand][None].astype(np.float64)) ** 2).sum(-1)
            d2[self.pool[cand][None, :] == rows[sel, None]] = np.inf
            best = d2.argmin(1)
            ok = np.isfinite(d2[np.arange(sel.size), best])
            partners[sel[ok]] = self.pool[cand[best[ok]]]
            snap[sel[ok]] = np.sqrt(d2[np.flatnonzero(ok), best[ok]])
        missing = np.flatnonzero(partners < 0)
        if missing.size:
            partners[missing], snap[missing] = self._nearest_in_store(rows[missing], z[missing], cls[missing])
        return partners, snap

    def _class_name(self, k: int) -> str:
        """A class index as its name, for messages."""
        names = self.dataset.info.class_names
        return names[int(k)] if names and 0 <= int(k) < len(names) else str(int(k))

    # ----- reading ------------------------------------------------------------------------------------
    def partner_images(self, partners: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Images of ``partners``: those in the chunks of the batch's anchors (or in memory) through the dataset,
        which holds them already; the rest through the chunk cache, one decode per distinct uncached chunk."""
        if self.dataset.in_memory:
            return self.dataset.rows(partners)["images"]
        c = self.dataset.info.chunk_size
        local = np.isin(partners // c, np.unique(rows // c))
        out = self.images.empty(partners.size)
        if local.any():
            out[local] = self.dataset.rows(partners[local])["images"]
        if not local.all():
            out[~local] = self.images.rows(partners[~local])
        return out

    def __call__(self, rows: np.ndarray, arrays: dict[str, np.ndarray], batch: int) -> dict[str, np.ndarray]:
        """The partners of a batch's anchors: their images, latents, row ids and snap distances."""
        z, cls = self.targets(rows, arrays, batch)
        partners, snap = self.search(rows, z, cls)
        return {"pair/images": self.partner_images(partners, rows),
                "pair/latents": self.latents[np.searchsorted(self.pool, partners)],
                "pair/snap": snap, "pair/index": partners}
