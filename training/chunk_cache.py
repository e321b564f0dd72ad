"""A byte-bounded LRU cache of decoded chunks of one store array, for reads scattered over a whole store
(LT nearest-neighbour partners can sit in any chunk of a 250k-image store).

``rows(ids)`` groups the ids by chunk, so each distinct chunk is decoded at most once per call, and keeps the
most recently used decoded chunks up to ``max_bytes`` (never more: a chunk larger than the budget is used and
dropped). Decodes go through :func:`store.zarr_io.read_rows`, so a damaged chunk is the one-line
:class:`store.zarr_io.CorruptChunkError`. The cache never changes values, only how often chunks are decoded;
each loader process (DataLoader worker) holds its own.
"""

from __future__ import annotations

import os
from collections import OrderedDict

import numpy as np
import zarr

from ident3d.causal.errors import UserError
from ident3d.store.zarr_io import chunk_bounds, read_rows, store_group

DEFAULT_CACHE_BYTES = 256 * 2**20  # ~1,300 chunks of 64 images at 32 px, ~80 at 64 px, per loader process


class ChunkCache:
    """Decoded chunks of ``path``/``key`` (chunks of ``chunk_size`` rows out of ``n``), least recently used
    dropped first once they would exceed ``max_bytes``. ``decodes`` and ``hits`` count chunk look-ups."""

    def __init__(self, path: str, key: str, chunk_size: int, n: int, max_bytes: int = DEFAULT_CACHE_BYTES):
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int | np.integer) or max_bytes < 0:
            raise UserError(f"chunk cache size must be a whole number of bytes >= 0 (0: no cache), got {max_bytes!r}")
        self.path, self.key, self.chunk_size, self.n, self.max_bytes = path, key, chunk_size, n, int(max_bytes)
        self._chunks: OrderedDict[int, np.ndarray] = OrderedDict()
        self.nbytes = 0
        self.decodes = 0
        self.hits = 0
        self._array: zarr.Array | None = None
        self._pid = -1

    def __getstate__(self) -> dict:
        """Pickle (spawned loader workers) without the open array or the decoded chunks."""
        state = dict(self.__dict__)
        state.update(_array=None, _pid=-1, _chunks=OrderedDict(), nbytes=0)
        return state

    def _open(self) -> zarr.Array:
        """The Zarr array, opened once per process (a forked worker opens its own)."""
        if self._array is None or self._pid != os.getpid():
            self._array, self._pid = store_group(self.path, mode="r")[self.key], os.getpid()
        return self._array

    def _decode(self, k: int) -> np.ndarray:
        """Read and decode chunk k (the only place this class touches the store)."""
        self.decodes += 1
        return read_rows(self._open(), slice(*chunk_bounds(k, self.chunk_size, self.n)), self.path)

    def chunk(self, k: int) -> np.ndarray:
        """All rows of chunk k: from the cache (marked most recently used) or decoded and kept within budget."""
        if k in self._chunks:
            self.hits += 1
            self._chunks.move_to_end(k)
            return self._chunks[k]
        data = self._decode(k)
        if data.nbytes <= self.max_bytes:
            while self._chunks and self.nbytes + data.nbytes > self.max_bytes:
                self.nbytes -= self._chunks.popitem(last=False)[1].nbytes
            self._chunks[k] = data
            self.nbytes += data.nbytes
        return data

    def empty(self, m: int) -> np.ndarray:
        """An uninitialised (m, *row shape) array of the array's dtype, to gather rows into."""
        array = self._open()
        return np.empty((m, *array.shape[1:]), array.dtype)

    def cached(self) -> list[int]:
        """Chunk ids held now, least recently used first."""
        return list(self._chunks)

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """``array[rows]`` for arbitrary row ids, decoding each distinct chunk at most once (chunks in order)."""
        rows = np.asarray(rows, dtype=np.int64)
        out = self.empty(rows.size)
        chunk_of = rows // self.chunk_size
        for k in np.unique(chunk_of):
            where = np.flatnonzero(chunk_of == k)
            out[where] = self.chunk(int(k))[rows[where] - int(k) * self.chunk_size]
        return out
