"""A typed, read-only view of a store for users' own code (``ident3d.open_store``): its attributes, its finished rows
and every per-row array the format declares (``ident3d.store.zarr_io.row_arrays``), read as numpy, as lazy dask
arrays or as one xarray Dataset. Every read goes through :func:`ident3d.store.zarr_io.read_rows`, so a damaged chunk
is the one-line :class:`ident3d.store.zarr_io.CorruptChunkError` naming it, from numpy, dask and xarray alike.
A local path or any fsspec URL opens the same way (``ident3d.store.zarr_io.open_store``)::

    view = ident3d.open_store("stores/c3d.zarr")
    view.latent_names, view.class_names, view.views   # names, classes, stored LT views
    view.view_mechanisms, view.view_blocks             # views of a second mechanism; shared/perturbed/specific
    x, z = view.images(slice(0, 256)), view.latents(slice(0, 256))
    ds = view.to_xarray()                              # dims sample, y, x, channel, latent (, node)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import zarr

from ident3d.causal.errors import UserError
from ident3d.store import zarr_io
from ident3d.store.info import StoreInfo, store_info
from ident3d.store.memory import check_fits

Rows = int | slice | np.ndarray | list[int] | None  # a row selection: None = the finished rows (of the split)


class _RowReader:
    """A Zarr array as dask sees an array (shape, dtype, ``[key]``), read through ``read_rows`` so a damaged chunk is
    one line naming it; picklable, for dask workers."""

    def __init__(self, array: zarr.Array, path: str):
        self.array, self.path = array, path
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim

    def __getitem__(self, key: Any) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        return zarr_io.read_rows(self.array, key[0], self.path)[(slice(None), *key[1:])]


@dataclass(frozen=True, eq=False, repr=False)
class StoreView(StoreInfo):
    """One store, read-only: what :class:`ident3d.store.info.StoreInfo` says (path, ``n`` rows, chunk and image size,
    typed ``attrs``, ``rows``: the row ids of finished chunks within the split, latent and class names, stored views),
    its chunks' ``done`` flags, and readers for its per-row arrays (``arrays``) as numpy, dask or xarray."""

    group: zarr.Group
    done: np.ndarray
    arrays: list[str]

    @property
    def complete(self) -> bool:
        """Whether every chunk is finished."""
        return bool(self.done.all())

    @property
    def text_latent_names(self) -> list[str]:
        """A captioned store's text latents (the columns of ``text_latents``); empty without captions."""
        return zarr_io.text_latent_names(self.attrs)

    @property
    def view_mechanisms(self) -> dict[str, dict[str, Any]]:
        """The views rendered by a second mechanism, {view: {knob: value}} (``ident3d.render.mechanisms``); the other
        views (and every view of a store without mechanisms) show the anchors' scene."""
        return dict(self.attrs.view_mechanisms or {})

    @property
    def view_blocks(self) -> dict[str, dict[str, list[str]]]:
        """Each view's latent blocks, {view: {"shared"|"perturbed"|"specific": names}}: as the store records them, else
        (stores made before blocks were) perturbed = the view's change set, shared = the rest."""
        return self.attrs.blocks

    @property
    def sequences(self) -> dict[str, Any] | None:
        """A sequence store's record (dynamic spec, sequences, length, seed, intervention_names); None otherwise."""
        return self.attrs.sequences

    def __repr__(self) -> str:
        views = ", ".join(self.views) or "none"
        classes = len(self.class_names) if self.class_names else "none"
        return (f"StoreView({self.path!r}: {self.rows.size:,}/{self.n:,} rows finished, {self.image_size} px, "
                f"latents {', '.join(self.latent_names)}; classes {classes}; views {views})")

    # ----- reading ----------------------------------------------------------------------------------------
    def read(self, name: str, rows: Rows = None) -> np.ndarray:
        """Per-row array ``name`` (one of ``arrays``, e.g. ``images``, ``views/hues/latents``, ``time``) at ``rows``:
        None (the finished rows), a row id, a slice or row ids; refused in one line if it would not fit in memory."""
        array = self._array(name)
        sel = self._selection(rows)
        count = len(range(*sel.indices(self.n))) if isinstance(sel, slice) else np.size(sel)
        row_bytes = int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize
        check_fits(count * row_bytes, f"reading {count:,} rows of {name} would need",
                   f"read fewer rows (e.g. rows=slice(0, 1000)) or use .dask({name!r})")
        if isinstance(sel, int | slice):
            return zarr_io.read_rows(array, sel, self.path)
        return self.dask(name)[sel].compute(scheduler="threads")

    def images(self, rows: Rows = None, view: str | None = None) -> np.ndarray:
        """uint8 (N, H, W, 3) images of ``rows`` (of the stored LT ``view``, e.g. "hues", when given)."""
        return self.read(self._key("images", view), rows)

    def latents(self, rows: Rows = None, view: str | None = None) -> np.ndarray:
        """float32 (N, D) latents of ``rows``, columns in ``latent_names`` order (of the stored LT ``view``)."""
        return self.read(self._key("latents", view), rows)

    def classes(self, rows: Rows = None, view: str | None = None) -> np.ndarray | None:
        """int64 (N,) class indices into ``class_names`` of ``rows``; None for a store without classes."""
        return self.read(self._key("classes", view), rows) if self.class_names else None

    def text(self, rows: Rows = None) -> np.ndarray:
        """A captioned store's (N,) captions of ``rows``, as Python strings (dtype object, on every Zarr line)."""
        return self.read(self._text_key("text"), rows).astype(object)

    def text_latents(self, rows: Rows = None) -> np.ndarray:
        """A captioned store's float32 (N, T) values its captions state (columns: ``text_latent_names``)."""
        return self.read(self._text_key("text_latents"), rows)

    def sequence(self, rows: Rows = None) -> np.ndarray:
        """A sequence store's sequence index of each row (N,)."""
        return self.read(self._sequence_key("sequence"), rows)

    def time(self, rows: Rows = None) -> np.ndarray:
        """A sequence store's step within its sequence of each row (N,)."""
        return self.read(self._sequence_key("time"), rows)

    def interventions(self, rows: Rows = None) -> np.ndarray:
        """A sequence store's bool (N, nodes) intervention targets of the step that reached each row (columns:
        ``sequences["intervention_names"]``; never at step 0)."""
        return self.read(self._sequence_key("interventions"), rows)

    def dask(self, name: str) -> Any:
        """Per-row array ``name`` as a lazy dask array, one block per store chunk (all ``n`` rows: select
        ``view.rows`` for the finished ones)."""
        import dask.array as da

        array = self._array(name)
        return da.from_array(_RowReader(array, self.path), chunks=array.chunks, name=False,
                             meta=np.empty((0,) * array.ndim, array.dtype))

    def to_xarray(self) -> Any:
        """Every per-row array as one lazy ``xarray.Dataset`` (the store's dimension names; coordinates ``sample``
        (row id), ``latent`` (names), ``node`` (a sequence store's intervention names); ``finished``: a bool per row).
        Needs xarray (``pip install xarray``, or the dev extra)."""
        try:
            import xarray as xr
        except ImportError:
            raise UserError("StoreView.to_xarray needs xarray: pip install xarray (or ident3d's dev extra)") from None
        data = {name: (_dimensions(name, self._array(name)), self.dask(name)) for name in self.arrays}
        finished = np.zeros(self.n, bool)
        finished[self.rows] = True
        coords: dict[str, Any] = {"sample": np.arange(self.n), "latent": list(self.latent_names)}
        if self.sequences:
            coords["node"] = list(self.sequences["intervention_names"])
        if self.attrs.text:
            coords["text_latent"] = self.text_latent_names
        attrs = {k: v for k, v in self.attrs.to_attrs().items() if isinstance(v, str | int | float)}
        return xr.Dataset({**data, "finished": ("sample", finished)}, coords=coords, attrs=attrs)

    # ----- helpers ----------------------------------------------------------------------------------------
    def _array(self, name: str) -> zarr.Array:
        """The per-row array ``name``, or one line listing the ones the store has."""
        if name not in self.arrays:
            raise UserError(f"{self.path} has no per-row array {name!r}; it has {', '.join(self.arrays)}")
        return self.group[name]

    def _key(self, name: str, view: str | None) -> str:
        """The anchors' array ``name``, or that of the stored LT view ``view``."""
        if view is None:
            return name
        if view not in self.views:
            raise UserError(f"{self.path} has no stored view {view!r}; it has {', '.join(self.views) or 'none'} "
                            "(render one with `ident3d render ... --views NAME:CHANGESET`)")
        return f"views/{view}/{name}"

    def _text_key(self, name: str) -> str:
        """A captioned store's array ``name``; one line for a store without captions."""
        if not self.attrs.text:
            raise UserError(f"{self.path} has no captions (render them with `ident3d render ... --text SPEC`, or a "
                            "scene that declares them)")
        return name

    def _sequence_key(self, name: str) -> str:
        """A sequence store's array ``name``; one line for a store of i.i.d. images."""
        if not self.sequences:
            raise UserError(f"{self.path} holds i.i.d. images, not sequences: it has no {name} (render sequences "
                            "with `ident3d render --sequences N --length T`)")
        return name

    def _selection(self, rows: Rows) -> int | slice | np.ndarray:
        """``rows`` as read_rows takes it (an int or slice; a run of consecutive ids becomes a slice) or row ids."""
        if rows is None:
            rows = self.rows
        if isinstance(rows, int | np.integer) and not isinstance(rows, bool):
            if not -self.n <= rows < self.n:
                raise UserError(f"row {rows} is out of range: {self.path} has {self.n:,} rows")
            return int(rows) % self.n
        if isinstance(rows, slice):
            return rows
        ids = np.asarray(rows)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise UserError(f"rows must be a row id, a slice or a 1-D array of row ids, got {_describe(rows)}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.n):
            raise UserError(f"row ids must be in [0, {self.n}); got {int(ids.min())}..{int(ids.max())}")
        if ids.size and np.array_equal(ids, np.arange(ids[0], ids[0] + ids.size)):
            return slice(int(ids[0]), int(ids[0]) + ids.size)
        return ids.astype(np.int64)


def _members(group: zarr.Group) -> set[str]:
    """Paths of every array below ``group`` (``views/hues/images``, ...)."""
    return {path for path, node in group.members(max_depth=None) if isinstance(node, zarr.Array)}


def _dimensions(name: str, array: zarr.Array) -> tuple[str, ...]:
    """An array's dimension names as the store records them (``zarr_io.DIMENSIONS``), else ``sample`` and
    ``NAME_1``, ... (a store written without them)."""
    dims = array.metadata.dimension_names
    if dims and all(dims):
        return tuple(dims)
    return ("sample", *(f"{name}_{i}" for i in range(1, array.ndim)))


def _describe(value: Any) -> str:
    """A value for a message: its type and, for arrays, shape and dtype."""
    arr = np.asarray(value) if isinstance(value, list | tuple | np.ndarray) else None
    return f"an array of shape {arr.shape} and dtype {arr.dtype}" if arr is not None else type(value).__name__


def open_store(path: str | os.PathLike, split: str | None = None) -> StoreView:
    """A read-only :class:`StoreView` of the store at ``path`` (a local path or any fsspec URL, e.g. s3://b/x.zarr);
    ``split`` ("train:0.9", "test:0.9") limits ``rows`` as ``ident3d train --split`` does. An unfinished store opens
    (``complete`` is False; ``rows`` holds the finished rows); a store with no finished row, or whose per-row arrays
    are not as the store format declares (missing, another dtype, shape or row count: ``ident3d.store.layout``), is
    refused in one line saying what to run."""
    info = store_info(str(path), allow_partial=True, split=split)
    group = zarr_io.open_store(info.path)
    arrays = [name for name, _ in zarr_io.row_arrays(group, info.attrs) if name in _members(group)]
    return StoreView(**{f.name: getattr(info, f.name) for f in fields(info)}, group=group,
                     done=zarr_io.done_mask(group, info.path), arrays=arrays)


__all__ = ["StoreView", "open_store"]
