"""Latent-transformation pairs the original way: draw z~ from the store's SCM, then snap it to the
nearest stored image of the same class (a k-d tree per class over the pool's latents), skipping the
anchor itself. The snap distance ||z~ - z_nn|| is the approximation error exact pairs avoid."""

from __future__ import annotations

import numpy as np
import zarr
from scipy.spatial import cKDTree

from causal import Samples, load_scm
from causal.rng import stream_key


class NearestNeighbourPairs:
    """Callable (rows, arrays, batch) -> {"pair/images", "pair/latents", "pair/snap"} for a StoreBatches."""

    def __init__(self, dataset, change: str, seed: int):
        info = dataset.info
        self.dataset, self.seed = dataset, seed
        self.scm = load_scm(info.scm)
        self.change = self.scm.resolve(change)
        g = zarr.open_group(info.path, mode="r")
        self.pool = info.rows
        self.latents = g["latents"][:][self.pool]
        classes = g["classes"][:][self.pool] if info.class_names else np.zeros(self.pool.size, np.int64)
        self.trees = {int(k): (np.flatnonzero(classes == k), cKDTree(self.latents[classes == k]))
                      for k in np.unique(classes)}

    def __call__(self, rows: np.ndarray, arrays: dict[str, np.ndarray], batch: int) -> dict[str, np.ndarray]:
        classes = arrays.get("classes")
        anchors = Samples(arrays["latents"], classes, self.dataset.info.latent_names, rows,
                          self.scm.class_node, self.scm.class_names)
        moved = self.scm.transform(anchors, self.change, seed=stream_key(self.seed, "lt_nn", batch) % 2**31)
        partners = np.empty(rows.size, np.int64)
        snap = np.empty(rows.size, np.float32)
        cls = classes if classes is not None else np.zeros(rows.size, np.int64)
        for i, (z, k) in enumerate(zip(moved.latents, cls, strict=True)):
            members, tree = self.trees[int(k)]
            dist, idx = tree.query(z, k=min(2, members.size))
            dist, idx = np.atleast_1d(dist), np.atleast_1d(idx)
            j = 0 if self.pool[members[idx[0]]] != rows[i] or idx.size == 1 else 1
            partners[i], snap[i] = self.pool[members[idx[j]]], dist[j]
        other = self.dataset.rows(partners)
        return {"pair/images": other["images"], "pair/latents": other["latents"], "pair/snap": snap}
