"""Whole-array checks of a store against its declared layout (``ident3d.store.zarr_io.declared_arrays``): every
per-row array present, of its declared dtype, shape (the images' rows; masks of the images' pixels; a column per
object slot, latent or node) and row chunking. One owner for ``check`` and every reader (``store_info``,
``ident3d.open_store``, ``show``, the object metrics), so a damaged store is one line saying what is wrong and what
to do, never a traceback of whatever first trips on it.

What ``check --repair`` and a re-render can fix (a declared array that is missing: repair re-creates it empty and
the render refills every chunk) says so; what they cannot (a whole array of another dtype, shape, row count or
chunking: no chunk re-render changes an array's metadata) asks to render the store again with ``--overwrite``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import zarr

from ident3d.causal.errors import UserError
from ident3d.store.attrs import StoreAttrs
from ident3d.store.zarr_io import STRING, ArraySpec, declared_arrays, decode_error, is_string_dtype

UNREPAIRABLE = ("images", "latents")  # a store without its anchors' images or latents has nothing to re-render from


@dataclass
class Layout:
    """What a store holds of its declared per-row arrays: ``present`` (paths, as declared), ``missing`` (required
    paths absent), ``broken`` ((path, problem) of arrays that are there but not as declared) and every ``spec``."""

    present: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    broken: list[tuple[str, str]] = field(default_factory=list)
    specs: dict[str, ArraySpec] = field(default_factory=dict)


def array_problem(spec: ArraySpec, node: object, n: int, chunk_size: int) -> str | None:
    """What is wrong with ``node`` as the declared array ``spec`` of a store of ``n`` rows in chunks of
    ``chunk_size`` (a few words starting with its path), or None when it is as declared."""
    if not isinstance(node, zarr.Array):
        return f"{spec.path} is not an array"
    shape, want = tuple(node.shape), (n, *spec.tail)
    if spec.dtype == STRING:
        if not is_string_dtype(node.dtype):
            return f"{spec.path} holds {node.dtype} values, the store format declares variable-length strings"
    elif np.dtype(node.dtype) != np.dtype(spec.dtype):
        return f"{spec.path} holds {node.dtype} values, the store format declares {spec.dtype}"
    if shape[:1] != want[:1]:
        return f"{spec.path} has {shape[0] if shape else 0} rows for the store's {n}"
    if shape != want:
        return f"{spec.path} has shape {shape}, the store format declares {want} ({spec.meaning})"
    if int(node.chunks[0]) != chunk_size:
        return f"{spec.path} is chunked by {node.chunks[0]} rows, the store by {chunk_size}"
    return None


def store_layout(group: zarr.Group, attrs: StoreAttrs, path: str) -> Layout:
    """Hold every declared per-row array of the store against its spec (metadata only: no chunk is read). The
    reference is the anchors' images: their rows, chunking and pixels. A store whose images are not a
    (rows, H, W, 3) array, or whose array metadata does not read, is a :class:`UserError`."""
    try:
        images = group["images"]
        n, chunk_size = int(images.shape[0]), int(images.chunks[0])
    except Exception as exc:  # noqa: BLE001 - missing or unreadable: nothing to hold the rest against
        raise UserError(f"{path} lacks a readable images array ({decode_error(exc)}); "
                        "render it again with --overwrite") from None
    if images.ndim != 4 or images.shape[-1] != 3:
        raise UserError(whole_array(path, f"images has shape {tuple(images.shape)}, not (rows, height, width, 3)"))
    layout = Layout(specs={spec.path: spec for spec in declared_arrays(group, attrs)})
    for spec in layout.specs.values():
        try:
            node = group[spec.path]
        except KeyError:
            if spec.required:
                layout.missing.append(spec.path)
            continue
        except Exception as exc:  # noqa: BLE001 - unreadable array metadata
            layout.broken.append((spec.path, f"the metadata of {spec.path} is unreadable ({decode_error(exc)})"))
            continue
        problem = array_problem(spec, node, n, chunk_size)
        if problem:
            layout.broken.append((spec.path, problem))
        else:
            layout.present.append(spec.path)
    return layout


def whole_array(path: str, problem: str) -> str:
    """The one line for an array that no chunk re-render can fix: render the store again."""
    return (f"{path}: {problem}; `ident3d check --repair` re-renders chunks, not whole arrays: render the store "
            "again with --overwrite")


def missing_array(path: str, name: str) -> str:
    """The one line for a declared array that is missing: what to run (a store without images or latents cannot be
    repaired; any other array ``check --repair`` re-creates for the render to refill)."""
    if name.rsplit("/", 1)[-1] in UNREPAIRABLE:
        return f"{path} has no {name} array; it cannot be checked or repaired, render it again with --overwrite"
    return (f"{path} has no {name} array, which the store format declares; run `ident3d check {path} --repair`, then "
            "re-run the render command")


def require_layout(group: zarr.Group, attrs: StoreAttrs, path: str, names: Iterable[str] | None = None) -> Layout:
    """The store's :class:`Layout`, or a one-line :class:`UserError` for the first declared array among ``names``
    (default: all) that is not as declared or missing: what every reader calls before it reads per-row arrays.
    ``names`` that the store format does not declare for this store are left to the caller."""
    layout = store_layout(group, attrs, path)
    wanted = None if names is None else set(names)
    for name, problem in layout.broken:
        if wanted is None or name in wanted:
            raise UserError(whole_array(path, problem))
    for name in layout.missing:
        if wanted is None or name in wanted:
            raise UserError(missing_array(path, name))
    return layout
