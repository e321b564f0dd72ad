"""Store integrity: hold every per-row array of the store against what the store format declares, decode every chunk
of every array of the chunks marked done, report the bad ones, and repair a store by clearing exactly their ``done``
flags (and deleting their damaged chunk files), so that re-running the same render command renders exactly those
chunks again.

Whole arrays first (``ident3d.store.layout``): every declared per-row array (``ident3d.store.zarr_io.declared_arrays``:
images, latents, classes; a multi-object store's masks, visibility, present and attempts; each view's; a sequence
store's sequence, time, interventions) must be there with its declared dtype, shape (the images' rows; masks of the
images' pixels; a column per object slot) and row chunking. An array of another dtype, shape or row count is no
damage a chunk re-render fixes: that is one line asking to render the store again with ``--overwrite`` (exit 2). A
missing array makes every done chunk bad, and ``--repair`` re-creates it empty for the render to refill.

Then chunks: a chunk is bad when one of its arrays does not decode (a truncated or garbled file; stores made since
the zstd checksum was switched on detect any changed byte), when a file of it is missing, when it holds values no
writer produces (latents not finite, classes out of range, a mask value above the slot count, visible pixels
negative or more than the image has, no draw in ``attempts``, a sequence store's ``sequence``/``time`` not those of
their rows or an intervention at step 0), when a multi-object row's arrays disagree (``visibility`` is each slot's
pixel count in ``masks``, and only present objects have pixels), or when its ``done`` flag itself does not decode.

A missing chunk file: Zarr reads a chunk without a file as its fill value (zeros), silently. Stores made since
issue 42 write every chunk of every per-row array, also an all-zero one (``ident3d.store.zarr_io.every_chunk``;
arrays carry the attribute ``write_empty_chunks: true``), so a done chunk without a file of any per-row array lost
it. Arrays of stores made before lack the attribute and legitimately miss chunks that were all zeros (e.g. a
sequence store's interventions): for them a missing file is damage only where zeros are impossible (images,
attempts), and the values checks above catch the rest of what is lost (a deleted masks chunk no longer matches
visibility; a deleted present chunk leaves visible objects marked absent).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zarr
from zarr.core.sync import sync

from ident3d.causal.errors import UserError
from ident3d.store.attrs import StoreAttrs, read_attrs
from ident3d.store.layout import UNREPAIRABLE, Layout, missing_array, store_layout, whole_array
from ident3d.store.masks import visibility as slot_visibility
from ident3d.store.masks import visible_but_absent
from ident3d.store.zarr_io import (
    EVERY_CHUNK,
    OBJECT_ARRAYS,
    chunk_bounds,
    declared_arrays,
    decode_error,
    image_shape,
    is_url,
    n_chunks,
    object_slots,
    open_store,
    recreate,
    url_target,
)


@dataclass(frozen=True)
class BadChunk:
    """One damaged array of one chunk: chunk index, array path (e.g. ``views/hues/images``), what is wrong."""

    chunk: int
    array: str
    error: str


@dataclass
class CheckReport:
    """What :func:`check_store` found: chunks done and not done, and every damaged (chunk, array)."""

    path: str
    n: int
    chunk_size: int
    arrays: list[str]
    done: list[int] = field(default_factory=list)
    not_done: list[int] = field(default_factory=list)
    bad: list[BadChunk] = field(default_factory=list)

    @property
    def bad_chunks(self) -> list[int]:
        """Indices of the chunks with at least one damaged array, sorted."""
        return sorted({b.chunk for b in self.bad})

    @property
    def ok(self) -> bool:
        return not self.bad


def refuse_inner_node(path: str) -> None:
    """A path or URL to an array or group inside a store (``STORE/images``, ``s3://bucket/STORE/views/hues``) is one
    line naming the store to give instead (Zarr's own words would be "An array already exists ... at path .")."""
    chain, read = _node_chain(path)
    node = _zarr_node(read, chain[0][0])
    if node is None or node.get("attributes", {}).get("format_version") is not None:
        return
    for where, name in chain[1:]:
        outer = _zarr_node(read, where)
        if outer is None:
            return
        if outer.get("node_type") == "group" and outer.get("attributes", {}).get("format_version") is not None:
            inner = chain[0][0][len(where):].strip("/")
            raise UserError(f"{path} is the {node.get('node_type', 'node')} {inner!r} inside the store {name}, not "
                            f"a store; give the store: ident3d check {name}")


def _node_chain(path: str) -> tuple[list[tuple[str, str]], Callable[[str], bytes]]:
    """The folders from ``path`` up to the top, as (location, name to print), and how to read a file at a location:
    resolved local folders, or the prefixes of a URL (``s3://b/x.zarr/images``, ``s3://b/x.zarr``, ``s3://b``)."""
    if not is_url(path):
        here = Path(path).resolve()
        return [(str(q), str(q)) for q in [here, *here.parents]], lambda f: Path(f).read_bytes()
    fs, root = url_target(path)
    parts = root.rstrip("/").split("/")
    prefixes = ["/".join(parts[:i]) for i in range(len(parts), 0, -1) if parts[:i] != [""]]
    return [(q, fs.unstrip_protocol(q)) for q in prefixes], fs.cat_file


def _zarr_node(read: Callable[[str], bytes], folder: str) -> dict | None:
    """The metadata of the Zarr node at ``folder`` (its zarr.json, read with ``read``), or None when there is none
    (or it cannot be read: opening the store then says why)."""
    try:
        data = json.loads(read(f"{folder.rstrip('/')}/zarr.json"))
    except Exception:  # noqa: BLE001 - missing, unreadable or not JSON: not a node
        return None
    return data if isinstance(data, dict) else None


MISSING = "array missing"  # a declared per-row array that is not in the store (every done chunk lacks it)
# arrays that a writer never leaves all zeros in a chunk: a missing chunk file is damage even in stores made before
# every chunk was written
NEVER_ZERO = ("images", "attempts")


def store_arrays(group: zarr.Group, attrs: StoreAttrs, path: str = "the store") -> Layout:
    """The declared per-row arrays of the store (``ident3d.store.layout.store_layout``), ``done`` excluded. A missing
    one (``missing``) is damage that ``--repair`` re-creates; a store without its images or latents, or with an array
    that is not as declared (dtype, shape, rows, chunking), is not something a re-render can fix: a
    :class:`UserError` (the first problem, and how many more there are)."""
    layout = store_layout(group, attrs, path)
    if layout.broken:
        more = f" (and {len(layout.broken) - 1} more)" if len(layout.broken) > 1 else ""
        raise UserError(whole_array(path, layout.broken[0][1] + more))
    for name in layout.missing:
        if name.rsplit("/", 1)[-1] in UNREPAIRABLE:
            raise UserError(missing_array(path, name))
    return layout


def _chunk_keys(array: zarr.Array, k: int) -> list[str]:
    """Store keys of every Zarr chunk in row band k of ``array`` (one per chunk of the other axes)."""
    encode = array.metadata.chunk_key_encoding.encode_chunk_key
    others = [range(s) for s in array.cdata_shape[1:]]
    return [f"{array.path}/{encode((k, *rest))}" for rest in itertools.product(*others)]


@dataclass(frozen=True)
class Bounds:
    """What a store's values may be: classes (``n_classes``), a sequence store's ``length``, object ``slots`` and
    ``pixels`` per image."""

    n_classes: int | None = None
    length: int | None = None
    slots: int = 0
    pixels: int = 0


def _sanity(name: str, values: np.ndarray, rows: slice, bounds: Bounds) -> str | None:
    """Values no writer produces (a silent corruption, a lost chunk file read as zeros, or a store made before
    checksums): or None. Sequence stores hold whole sequences in row order, so row r is step r mod T of sequence
    r div T, and no step 0 is intervened on."""
    if name == "latents" and not np.isfinite(values).all():
        return "non-finite latents"
    if name == "classes" and bounds.n_classes and ((values < 0) | (values >= bounds.n_classes)).any():
        return f"class index outside 0..{bounds.n_classes - 1}"
    if name == "masks" and values.size and int(values.max()) > bounds.slots:
        return f"mask value {int(values.max())} above the {bounds.slots} object slots (0: background, k + 1: slot k)"
    if name == "visibility" and (values < 0).any():
        return "negative visible pixel counts"
    if name == "visibility" and (values > bounds.pixels).any():
        return f"visible pixel counts above the {bounds.pixels} pixels of an image"
    if name == "attempts" and (values < 1).any():
        return "rows without a draw (attempts below 1; a lost chunk file reads as 0)"
    return _sequence_sanity(name, values, rows, bounds.length)


def _sequence_sanity(name: str, values: np.ndarray, rows: slice, length: int | None) -> str | None:
    """A sequence store's ``sequence``, ``time`` and ``interventions`` that are not those of their rows, or None."""
    if not length:
        return None
    index = np.arange(rows.start, rows.stop)
    if name == "sequence" and not np.array_equal(values, index // length):
        return "sequence ids are not those of the rows"
    if name == "time" and not np.array_equal(values, index % length):
        return "steps are not those of the rows"
    if name == "interventions" and values[index % length == 0].any():
        return "an intervention at a sequence's step 0"
    return None


def _files_required(array: zarr.Array) -> bool:
    """Whether every done chunk of ``array`` must have its files: arrays written with every chunk stored (their
    ``write_empty_chunks`` attribute), and, in stores made before, the arrays that are never all zeros."""
    return array.attrs.get(EVERY_CHUNK) is True or array.path.rsplit("/", 1)[-1] in NEVER_ZERO


def _read_band(array: zarr.Array, k: int) -> tuple[np.ndarray | None, str | None]:
    """Row band k of ``array`` as (values, None), or (None, why) when it does not decode."""
    rows = slice(*chunk_bounds(k, array.chunks[0], array.shape[0]))
    try:
        return array[rows], None
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - every decoder/store error is a finding
        return None, decode_error(exc)


def stored_keys(array: zarr.Array) -> set[str] | None:
    """The store keys of every chunk file ``array`` has (one listing, instead of a question per chunk: on object
    storage each question is a request); None where the store cannot list (each chunk is then looked up)."""
    async def listed() -> set[str]:
        return {key async for key in array.store.list_prefix(f"{array.path}/")}

    try:
        return sync(listed())
    except Exception:  # noqa: BLE001 - a store without listing: chunk_error asks per key
        return None


def chunk_error(array: zarr.Array, k: int, bounds: Bounds | None = None, values: np.ndarray | None = None,
                stored: set[str] | None = None) -> str | None:
    """Why row band k of ``array`` is damaged, in a few words, or None when it decodes, looks sane and has its files
    (``values``: the band already read; ``stored``: the array's chunk files, :func:`stored_keys`, else each is
    looked up)."""
    bounds = bounds or Bounds()
    if values is None:
        values, why = _read_band(array, k)
        if why:
            return why
    rows = slice(*chunk_bounds(k, array.chunks[0], array.shape[0]))
    why = _sanity(array.path.rsplit("/", 1)[-1], values, rows, bounds)
    if why:
        return why
    if _files_required(array):
        def has(key: str) -> bool:
            return key in stored if stored is not None else bool(sync(array.store.exists(key)))

        if not all(has(key) for key in _chunk_keys(array, k)):
            return "chunk file missing (reads as zeros)"
    return None


def objects_disagree(masks: np.ndarray, visibility: np.ndarray, present: np.ndarray) -> tuple[str, str] | None:
    """(array, why) where a multi-object chunk's arrays disagree: ``visibility`` is each slot's pixel count in
    ``masks`` and only present objects have pixels, as every render writes them; None when they agree."""
    if not np.array_equal(slot_visibility(masks, visibility.shape[1]), visibility):
        return "masks", "visibility is not each slot's pixel count in masks (one of them was lost or changed)"
    if visible_but_absent(visibility, present).any():
        return "present", "objects with visible pixels are marked absent"
    return None


def _done_flags(group: zarr.Group, report: CheckReport) -> None:
    """Read the ``done`` flags one chunk at a time; a flag that does not decode makes its chunk bad."""
    done = group["done"]
    for k in range(done.shape[0]):
        try:
            flag = bool(done[k])
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001
            report.bad.append(BadChunk(k, "done", decode_error(exc)))
            continue
        (report.done if flag else report.not_done).append(k)


def check_store(path: str, progress: Callable[[Iterable[int]], Iterable[int]] | None = None) -> CheckReport:
    """Hold the store at ``path`` against its declared layout, decode every array of every done chunk and report
    what is damaged.

    Reads one chunk of one array at a time (memory stays at one chunk, plus a multi-object chunk's masks,
    visibility and presence, checked together). ``progress`` wraps the iteration over done chunks (e.g. ``tqdm``).
    Raises :class:`UserError` when ``path`` is not a readable store, or holds an array that a chunk re-render cannot
    fix.
    """
    refuse_inner_node(str(path))
    group = open_store(path)
    try:
        n, c = int(group["images"].shape[0]), int(group["images"].chunks[0])
        group["done"]
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"{path} lacks a readable images or done array ({decode_error(exc)}); "
                        "render it again with --overwrite") from None
    attrs = read_attrs(group, str(path))
    layout = store_arrays(group, attrs, str(path))
    report = CheckReport(str(path), n, c, layout.present + layout.missing)
    _done_flags(group, report)
    if group["done"].shape[0] != n_chunks(n, c):
        raise UserError(f"{path}: done has {group['done'].shape[0]} flags for {n_chunks(n, c)} chunks; "
                        "render it again with --overwrite")
    h, w = image_shape(group)
    bounds = Bounds(len(attrs.class_names or []) or None,
                    int(attrs.sequences["length"]) if attrs.sequences else None, object_slots(attrs), h * w)
    opened = {name: group[name] for name in layout.present}
    stored = {name: stored_keys(array) for name, array in opened.items() if _files_required(array)}
    report.bad += [BadChunk(k, name, MISSING) for name in layout.missing for k in report.done]
    for k in (progress or (lambda it: it))(report.done):
        report.bad += _chunk_findings(opened, k, bounds, stored)
    report.bad.sort(key=lambda b: (b.chunk, b.array))
    return report


def _chunk_findings(opened: dict[str, zarr.Array], k: int, bounds: Bounds,
                    stored: dict[str, set[str] | None]) -> list[BadChunk]:
    """Every damaged array of done chunk k: each array on its own, then each multi-object row's arrays together
    (where all three are sound on their own). ``stored``: each array's chunk files (:func:`stored_keys`)."""
    found, values = [], {}
    for name, array in opened.items():
        band, why = _read_band(array, k)
        why = why or chunk_error(array, k, bounds, band, stored.get(name))
        if why:
            found.append(BadChunk(k, name, why))
        elif name.rsplit("/", 1)[-1] in OBJECT_ARRAYS:  # kept for the check together (memory: no images kept)
            values[name] = band
    for pre in {name[: -len("masks")] for name in values if name.rsplit("/", 1)[-1] == "masks"}:
        parts = [values.get(f"{pre}{name}") for name in ("masks", "visibility", "present")]
        disagree = None if any(p is None for p in parts) else objects_disagree(*parts)
        if disagree:
            found.append(BadChunk(k, f"{pre}{disagree[0]}", disagree[1]))
    return found


def repair_store(path: str, report: CheckReport) -> list[int]:
    """Clear the ``done`` flags of exactly the report's bad chunks, then re-create its missing arrays empty and delete
    the damaged chunk files.

    The flag goes first: if this is interrupted, the chunk is already marked to be rendered again, and a
    render writes whole chunks, so leftover files are simply replaced. Returns the repaired chunks.
    """
    group = open_store(path, mode="r+")
    done = group["done"]
    for k in report.bad_chunks:
        done[k] = False  # a whole one-flag chunk: written without decoding the damaged one
    specs = {spec.path: spec for spec in declared_arrays(group, read_attrs(group, path))}
    for name in sorted({b.array for b in report.bad if b.error == MISSING}):  # re-created empty: the render refills it
        recreate(group, specs[name], report.n, report.chunk_size)
    for bad in report.bad:
        if bad.array == "done" or bad.error == MISSING:
            continue
        array = group[bad.array]
        for key in _chunk_keys(array, bad.chunk):
            sync(array.store.delete(key))
    return report.bad_chunks


def ranges(ks: Iterable[int]) -> str:
    """Chunk indices as compact ranges: ``0-3, 7, 9-10`` (``-`` for none)."""
    parts: list[list[int]] = []
    for k in sorted(ks):
        if parts and parts[-1][1] == k - 1:
            parts[-1][1] = k
        else:
            parts.append([k, k])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts) or "-"


def describe(report: CheckReport, repairing: bool = False) -> list[str]:
    """The report as printable lines: the store, one line per damaged (chunk, array), the verdict (with the
    way out, unless ``repairing``)."""
    n_ch = n_chunks(report.n, report.chunk_size)
    lines = [f"store {report.path}: {report.n} rows in {n_ch} chunks of {report.chunk_size}; arrays "
             f"{', '.join(report.arrays)}; {len(report.done)} chunks done, not done: {ranges(report.not_done)}"]
    lines += [f"chunk {b.chunk}: {b.array}: {b.error}" for b in report.bad]
    if report.ok:
        lines.append(f"ok: every array of the {len(report.done)} done chunks decodes")
    else:
        hint = "" if repairing else (f"; run `ident3d check {report.path} --repair`, then re-run the render "
                                     "command")
        lines.append(f"{len(report.bad_chunks)} bad chunks ({ranges(report.bad_chunks)}){hint}")
    return lines

