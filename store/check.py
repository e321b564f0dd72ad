"""Store integrity: decode every chunk of every array of the chunks marked done, report the bad ones,
and repair a store by clearing exactly their ``done`` flags (and deleting their damaged chunk files),
so that re-running the same render command renders exactly those chunks again.

A chunk is bad when one of its arrays does not decode (a truncated or garbled file; stores made since
the zstd checksum was switched on detect any changed byte), when its images file is missing (an
unwritten chunk reads as zeros), when its latents are not finite or its classes out of range, when a sequence
store's ``sequence``/``time`` do not match their rows or it has an intervention at step 0, or when its ``done``
flag itself does not decode. The arrays checked are the store format's list (``ident3d.store.zarr_io.row_arrays``); a
missing sequence array makes every done chunk bad, and ``--repair`` re-creates it empty for the render to refill.
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
from ident3d.store.zarr_io import (
    chunk_bounds,
    create_extra,
    decode_error,
    is_url,
    n_chunks,
    open_store,
    row_arrays,
    sequence_layout,
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


def store_arrays(group: zarr.Group, attrs: StoreAttrs) -> tuple[list[str], list[str]]:
    """Paths of the per-row arrays the store format declares for this store (``ident3d.store.zarr_io.row_arrays``),
    ``done`` excluded: (present, missing). A missing sequence array is damage that ``--repair`` re-creates; a store
    without its images or latents is not something a re-render can fix, so that is a :class:`UserError`."""
    present, missing = [], []
    for path, required in row_arrays(group, attrs):
        try:
            node = group[path]
        except KeyError:
            if not required:
                continue
            if path.rsplit("/", 1)[-1] in ("images", "latents"):
                raise UserError(f"the store has no {path} array; it cannot be checked or repaired, "
                                "render it again with --overwrite") from None
            missing.append(path)
            continue
        except Exception as exc:  # noqa: BLE001 - unreadable array metadata
            raise UserError(f"the metadata of {path} is unreadable ({decode_error(exc)}); "
                            "render the store again with --overwrite") from None
        if isinstance(node, zarr.Array):
            present.append(path)
    return present, missing


def _chunk_keys(array: zarr.Array, k: int) -> list[str]:
    """Store keys of every Zarr chunk in row band k of ``array`` (one per chunk of the other axes)."""
    encode = array.metadata.chunk_key_encoding.encode_chunk_key
    others = [range(s) for s in array.cdata_shape[1:]]
    return [f"{array.path}/{encode((k, *rest))}" for rest in itertools.product(*others)]


def _sanity(name: str, values: np.ndarray, rows: slice, n_classes: int | None, length: int | None) -> str | None:
    """Values no writer produces (a silent corruption, or a store made before checksums): or None. Sequence stores
    hold whole sequences in row order, so row r is step r mod T of sequence r div T, and no step 0 is intervened on."""
    if name == "latents" and not np.isfinite(values).all():
        return "non-finite latents"
    if name == "classes" and n_classes and ((values < 0) | (values >= n_classes)).any():
        return f"class index outside 0..{n_classes - 1}"
    if length:
        index = np.arange(rows.start, rows.stop)
        if name == "sequence" and not np.array_equal(values, index // length):
            return "sequence ids are not those of the rows"
        if name == "time" and not np.array_equal(values, index % length):
            return "steps are not those of the rows"
        if name == "interventions" and values[index % length == 0].any():
            return "an intervention at a sequence's step 0"
    return None


def chunk_error(array: zarr.Array, k: int, n_classes: int | None = None, length: int | None = None) -> str | None:
    """Why row band k of ``array`` is damaged, in a few words, or None when it decodes and looks sane
    (``length``: the sequence length of a sequence store)."""
    rows = slice(*chunk_bounds(k, array.chunks[0], array.shape[0]))
    try:
        values = array[rows]
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - every decoder/store error is a finding
        return decode_error(exc)
    name = array.path.rsplit("/", 1)[-1]
    if name == "images" and not all(sync(array.store.exists(key)) for key in _chunk_keys(array, k)):
        return "chunk file missing (reads as zeros)"
    return _sanity(name, values, rows, n_classes, length)


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
    """Decode every array of every done chunk of the store at ``path`` and report what is damaged.

    Reads one chunk of one array at a time (memory stays at one chunk). ``progress`` wraps the iteration
    over done chunks (e.g. ``tqdm``). Raises :class:`UserError` when ``path`` is not a readable store.
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
    arrays, missing = store_arrays(group, attrs)
    report = CheckReport(str(path), n, c, arrays + missing)
    _done_flags(group, report)
    if group["done"].shape[0] != n_chunks(n, c):
        raise UserError(f"{path}: done has {group['done'].shape[0]} flags for {n_chunks(n, c)} chunks; "
                        "render it again with --overwrite")
    n_classes = len(attrs.class_names or []) or None
    length = int(attrs.sequences["length"]) if attrs.sequences else None
    opened = {name: group[name] for name in arrays}
    report.bad += [BadChunk(k, name, MISSING) for name in missing for k in report.done]
    for k in (progress or (lambda it: it))(report.done):
        for name, array in opened.items():
            why = chunk_error(array, k, n_classes, length)
            if why:
                report.bad.append(BadChunk(k, name, why))
    report.bad.sort(key=lambda b: (b.chunk, b.array))
    return report


def repair_store(path: str, report: CheckReport) -> list[int]:
    """Clear the ``done`` flags of exactly the report's bad chunks, then delete their damaged chunk files.

    The flag goes first: if this is interrupted, the chunk is already marked to be rendered again, and a
    render writes whole chunks, so leftover files are simply replaced. Returns the repaired chunks.
    """
    group = open_store(path, mode="r+")
    done = group["done"]
    for k in report.bad_chunks:
        done[k] = False  # a whole one-flag chunk: written without decoding the damaged one
    attrs = read_attrs(group, path)
    for name in sorted({b.array for b in report.bad if b.error == MISSING}):  # a sequence array: the render refills it
        layout = sequence_layout(len(attrs.sequences["intervention_names"]))
        create_extra(group, name, layout[name], report.n, report.chunk_size)
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

