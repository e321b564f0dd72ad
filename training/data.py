"""Training data from ident3d stores: chunk-wise reads, batches shuffled across chunks, and
batch b a pure function of (seed, b) so a resumed run sees exactly the batches it would have seen.

Each batch draws a few random chunks, reads each once (whole Zarr chunks, never image by image),
and takes a random subset of their rows; small stores are held in memory instead. The loader runs
in DataLoader worker processes (worker i makes batches i, i + W, ...; the DataLoader interleaves
them back in order).

``batch_size`` is the GLOBAL batch: under DDP with ``world`` ranks, rank r reads slice r (of
batch_size / world rows) of the very rows a single process would use at that step, so the ranks'
batches concatenated in rank order are the single-process batch.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
import zarr
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from ident3d.causal.errors import UserError
from ident3d.store.info import StoreInfo
from ident3d.store.zarr_io import chunk_bounds, read_rows, store_group

IN_MEMORY_BYTES = 2 * 2**30  # stores up to this size (images) are read once and kept in memory


class StoreBatches(IterableDataset):
    """An endless stream of training batches (dicts of tensors) from one store.

    ``keys``: arrays to read besides ``images``/``latents``/``classes`` (e.g. ``views/hues/images``).
    ``pairing``: an optional callable (rows, arrays, batch) -> extra arrays (LT nearest-neighbour pairs).
    ``tokenize``: an optional callable (captions) -> int64 token ids (N, L), set by a view maker that reads the
    store's ``text``: its batches then hold ``tokens`` (the strings themselves never become tensors).
    ``lanes``: the number of DataLoader workers that will read it (batch contents depend on it).
    ``batch_size``: the global batch over all ``world`` DDP ranks (divisible by ``world``); this rank yields
    its slice ``rank`` of batch_size / world rows.
    """

    def __init__(self, info: StoreInfo, batch_size: int, seed: int, start_batch: int = 0,
                 keys: Sequence[str] = (), pairing: Any = None, in_memory: bool | None = None,
                 rank: int = 0, world: int = 1, lanes: int = 1):
        super().__init__()
        if batch_size > info.rows.size:
            raise UserError(f"--batch-size {batch_size} is larger than the {info.rows.size} images available; "
                            "use a smaller batch or a larger store")
        if batch_size < 2:
            raise UserError("--batch-size must be at least 2")
        if batch_size % world:
            raise UserError(f"--batch-size {batch_size} (the global batch) is not divisible by the {world} "
                            "processes; use a multiple of the number of processes/GPUs")
        self.info, self.batch_size, self.seed, self.start_batch = info, batch_size, seed, start_batch
        self.keys = ["images", "latents"] + (["classes"] if info.class_names else []) + list(keys)
        self.pairing, self.rank, self.world, self.lanes = pairing, rank, world, max(1, lanes)
        self.tokenize: Any = None
        size = info.rows.size * info.image_size**2 * 3 * (1 + len(keys))
        self.in_memory = size <= IN_MEMORY_BYTES if in_memory is None else in_memory
        self._memory: dict[str, np.ndarray] | None = None
        self._cache: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._chunks = np.unique(info.rows // info.chunk_size)

    # ----- reading ------------------------------------------------------------------------------------
    def _group(self) -> zarr.Group:
        return store_group(self.info.path, mode="r")

    def _chunk(self, k: int) -> dict[str, np.ndarray]:
        """All arrays of chunk k (a small LRU cache avoids decompressing hot chunks twice); a damaged chunk is
        a one-line :class:`store.zarr_io.CorruptChunkError` naming it, also from DataLoader workers."""
        if k in self._cache:
            self._cache.move_to_end(k)
            return self._cache[k]
        g, sl = self._group(), slice(*chunk_bounds(k, self.info.chunk_size, self.info.n))
        data = {key: read_rows(g[key], sl, self.info.path) for key in self.keys}
        self._cache[k] = data
        if len(self._cache) > self._window_width():  # the current window's chunks, nothing more
            self._cache.popitem(last=False)
        return data

    def rows(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Arrays for arbitrary row ids (reads the chunks that hold them; one copy into the output)."""
        if self.in_memory:
            if self._memory is None:
                g = self._group()
                self._memory = {key: read_rows(g[key], slice(None), self.info.path) for key in self.keys}
            return {key: arr[rows] for key, arr in self._memory.items()}
        chunk_of = rows // self.info.chunk_size
        out: dict[str, np.ndarray] = {}
        for k in np.unique(chunk_of):
            where = np.flatnonzero(chunk_of == k)
            data = self._chunk(int(k))
            for key in self.keys:
                if key not in out:
                    out[key] = np.empty((rows.size, *data[key].shape[1:]), data[key].dtype)
                out[key][where] = data[key][rows[where] - k * self.info.chunk_size]
        return out

    # ----- batches ------------------------------------------------------------------------------------
    def _window_width(self) -> int:
        """Chunks per shuffling window: enough for 4 batches."""
        return int(min(len(self._chunks), max(2, math.ceil(4 * self.batch_size / self.info.chunk_size))))

    def batch_rows(self, step: int) -> np.ndarray:
        """This rank's row ids at ``step``: slice ``rank`` of ``global_batch_rows(step)``."""
        share = self.batch_size // self.world
        return self.global_batch_rows(step)[self.rank * share:(self.rank + 1) * share]

    def global_batch_rows(self, step: int) -> np.ndarray:
        """Sorted row ids of the global batch at ``step``: a pure function of (seed, step, lanes).

        The same on every DDP rank (and in a single process), whatever the number of ranks.
        In memory: B random rows. Streaming: the chunks are shuffled per epoch and cut into windows of
        W chunks whose rows are shuffled and cut into batches; each loader lane (a DataLoader worker)
        walks its own windows, so a chunk is read about once per epoch, and batches still mix rows of W
        different chunks. (The trailing 0 in the in-memory seed keeps the rows of runs made before
        batches were global, when it was the rank.)
        """
        if self.in_memory:
            rng = np.random.default_rng([self.seed, step, 0])
            return np.sort(rng.choice(self.info.rows, self.batch_size, replace=False))
        chunks, c = self._chunks, self.info.chunk_size
        width = self._window_width()
        per_window = max(1, (width * c) // self.batch_size)
        j = step // self.lanes
        window = (j // per_window) * self.lanes + step % self.lanes
        epoch, w = divmod(window, max(1, len(chunks) // width))
        picked = np.random.default_rng([self.seed, epoch]).permutation(chunks)[w * width:(w + 1) * width]
        pool = self.info.rows[np.isin(self.info.rows // c, picked)]
        order = np.random.default_rng([self.seed, epoch, w]).permutation(pool)
        if order.size < self.batch_size:
            order = np.random.default_rng([self.seed, step]).choice(self.info.rows, self.batch_size, replace=False)
        off = (j % per_window) * self.batch_size % max(1, order.size - self.batch_size + 1)
        return np.sort(order[off:off + self.batch_size])

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        rows = self.batch_rows(step)
        arrays = self.rows(rows)
        arrays["index"] = rows
        if self.pairing is not None:  # LT-NN partners: drawn per rank (per-sample draws differ from 1 process)
            arrays.update(self.pairing(rows, arrays, step * self.world + self.rank))
        if "text" in arrays:  # captions: their token ids, not the strings
            text = arrays.pop("text")
            if self.tokenize is not None:
                arrays["tokens"] = np.asarray(self.tokenize(list(text)), dtype=np.int64)
        return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        wi = get_worker_info()
        wid, nw = (wi.id, wi.num_workers) if wi else (0, 1)
        step = self.start_batch + wid  # the DataLoader takes one batch from each worker in turn
        while True:
            yield self.batch(step)
            step += nw


def make_loader(dataset: StoreBatches, num_workers: int = 0) -> DataLoader:
    """A DataLoader over pre-made batches (batch_size=None), with worker processes if asked."""
    return DataLoader(dataset, batch_size=None, num_workers=num_workers, persistent_workers=num_workers > 0,
                      prefetch_factor=2 if num_workers > 0 else None)
