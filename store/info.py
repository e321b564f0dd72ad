"""What a reader needs to know about a store: its typed attributes, shape and usable rows (done chunks within a
split), plus the image statistics and latents that training and evaluation read whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import zarr

from ident3d.causal.errors import UserError
from ident3d.store.attrs import StoreAttrs, read_attrs
from ident3d.store.layout import require_layout
from ident3d.store.zarr_io import chunk_bounds, done_mask, open_store, read_rows


@dataclass(frozen=True)
class StoreInfo:
    """A store's path, shape, typed attributes and usable row ids (done chunks, within the split)."""

    path: str
    n: int
    chunk_size: int
    image_size: int
    attrs: StoreAttrs
    rows: np.ndarray

    @property
    def latent_names(self) -> list[str]:
        return self.attrs.latent_names

    @property
    def latent_groups(self) -> dict[str, list[str]]:
        return self.attrs.latent_groups

    @property
    def class_names(self) -> list[str] | None:
        return self.attrs.class_names

    @property
    def views(self) -> dict[str, list[str]]:
        return self.attrs.views

    @property
    def scene(self) -> str:
        return self.attrs.scene

    @property
    def scm(self) -> dict[str, Any]:
        return self.attrs.scm


def split_range(n: int, split: str | None, unit: int = 1) -> tuple[int, int]:
    """``None`` -> all rows; ``"train:0.9"`` -> first 90%; ``"test:0.9"`` -> the rest. The cut falls between whole
    blocks of ``unit`` rows (a sequence store's sequences, so no frame is paired across the split)."""
    if not split:
        return 0, n
    part, _, frac = split.partition(":")
    try:
        f = float(frac)
    except ValueError:
        f = -1.0
    if part not in ("train", "test") or not 0 < f < 1:
        raise UserError(f"bad split {split!r}; use train:F or test:F with 0 < F < 1, e.g. train:0.9")
    cut = int(round(n // unit * f)) * unit
    return (0, cut) if part == "train" else (cut, n)


def store_info(path: str, allow_partial: bool = False, split: str | None = None) -> StoreInfo:
    """Open a store and list its usable rows; an unfinished store is refused unless ``allow_partial``. A store whose
    per-row arrays are not as the format declares (missing, another dtype, shape or row count) is refused in one line
    saying what to run (``ident3d.store.layout.require_layout``), before any reader trips on it."""
    group = open_store(path)
    attrs = read_attrs(group, path)
    require_layout(group, attrs, path)
    done = done_mask(group, path)
    n, c = group["images"].shape[0], group["images"].chunks[0]
    if not done.all() and not allow_partial:
        raise UserError(f"{path} is incomplete ({int(done.sum())}/{len(done)} chunks done); finish it by re-running "
                        "`ident3d render`, or pass --allow-partial to train on the done chunks")
    rows = np.concatenate([np.arange(*chunk_bounds(k, c, n)) for k in np.flatnonzero(done)] or [np.zeros(0, int)])
    lo, hi = split_range(n, split, int(attrs.sequences["length"]) if attrs.sequences else 1)
    rows = rows[(rows >= lo) & (rows < hi)].astype(np.int64)
    if rows.size == 0:
        raise UserError(f"{path} has no finished rows in split {split or 'all'}")
    return StoreInfo(path, n, c, int(group["images"].shape[1]), attrs, rows)


def image_stats(info: StoreInfo, max_images: int = 2048) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and std of the store's images (a deterministic subset of whole chunks).

    A damaged chunk is a one-line :class:`store.zarr_io.CorruptChunkError` naming it.
    """
    images = zarr.open_group(info.path, mode="r")["images"]
    chunks = np.unique(info.rows // info.chunk_size)
    take = chunks[np.linspace(0, len(chunks) - 1, min(len(chunks), max(1, max_images // info.chunk_size))).astype(int)]
    x = np.concatenate([read_rows(images, slice(*chunk_bounds(k, info.chunk_size, info.n)), info.path)
                        for k in np.unique(take)])
    x = x.reshape(-1, 3).astype(np.float64) / 255.0
    return tuple(x.mean(0).round(6).tolist()), tuple(np.maximum(x.std(0), 1e-3).round(6).tolist())


def store_text(info: StoreInfo, what: str = "this objective") -> np.ndarray:
    """The captions of the store's usable rows (N,) as Python strings; a store without captions is one line."""
    if not info.attrs.text:
        raise UserError(f"{what} needs a store with captions; {info.path} has none (render one with `ident3d render "
                        "--text SPEC`, or a scene that declares captions, e.g. --scene multimodal3dident)")
    return read_rows(open_store(info.path)["text"], slice(None), info.path).astype(object)[info.rows]


def store_latents(info: StoreInfo) -> np.ndarray:
    """The latents of the store's usable rows (N, D), float64: small enough to read whole."""
    return np.asarray(zarr.open_group(info.path, mode="r")["latents"][:], dtype=np.float64)[info.rows]
