"""Encode a store with a trained run (``ident3d.training.run_dir.LoadedRun``): the encoder's inner layer (``features``),
its output and any further layers the objective names."""

from __future__ import annotations

import numpy as np
import torch

from ident3d.store.info import StoreInfo
from ident3d.store.zarr_io import chunk_bounds, read_rows, store_group
from ident3d.training.run_dir import LoadedRun
from ident3d.training.views import to_float


def encode_store(run: LoadedRun, info: StoreInfo, rows: np.ndarray, device: str = "cpu",
                 batch_size: int = 256) -> dict[str, np.ndarray]:
    """{"inner": (N, H), "output": (N, D), "latents": (N, L), "classes": (N,) or absent} for ``rows``, plus any
    further layers the objective's ``representations`` names (e.g. CRL-TAC's top-crop averages).

    A damaged chunk is a one-line :class:`store.zarr_io.CorruptChunkError` naming it, not a codec traceback.
    """
    objective = run.objective(device, image_size=info.image_size)
    norm = run.normalize()
    g = store_group(info.path, mode="r")
    layers: dict[str, list[np.ndarray]] = {}
    chunks = np.unique(rows // info.chunk_size)
    keep = []
    with torch.no_grad():
        for k in chunks:
            lo, hi = chunk_bounds(int(k), info.chunk_size, info.n)
            sel = rows[(rows >= lo) & (rows < hi)]
            images = read_rows(g["images"], slice(lo, hi), info.path)[sel - lo]
            keep.append(sel)
            for i in range(0, len(images), batch_size):
                x = norm(to_float(torch.from_numpy(images[i:i + batch_size]).to(device)))
                for name, z in objective.representations(x).items():
                    layers.setdefault(name, []).append(z.float().cpu().numpy())
    order = np.concatenate(keep)
    out = {**{name: np.concatenate(zs) for name, zs in layers.items()}, "rows": order,
           "latents": read_rows(g["latents"], slice(None), info.path)[order]}
    if info.class_names:
        out["classes"] = read_rows(g["classes"], slice(None), info.path)[order]
    return out
