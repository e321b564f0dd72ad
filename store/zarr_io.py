"""The Zarr store's arrays (format v1): images, latents, classes, per-chunk ``done`` flags and optional exact
LT views; creating, resuming and opening a store. Its attributes are ``ident3d.store.attrs.StoreAttrs``.

One Dask task owns one chunk (rows ``k*C .. (k+1)*C``) of every array, so writers never share a
Zarr chunk and need no locks; ``done[k]`` is set only after chunk k's data is written.

How a done chunk proves each array was written: Zarr skips writing a chunk equal to the fill value (0, False) unless
its ``write_empty_chunks`` setting is on, and that setting belongs to an open array, not to the store. Every writer
here (:func:`write_chunk`, :func:`write_given`) opens the per-row arrays with it on (:func:`every_chunk`), so each
chunk written has a file, and every per-row array is created with the attribute ``write_empty_chunks: true``
(:data:`EVERY_CHUNK`) saying so: a done chunk without a file of such an array lost it. Arrays of stores made before
lack the attribute and may legitimately miss all-zero chunks; ``ident3d.store.check`` holds them to what can be
told (images and attempts are never all zero; visibility must count the masks' pixels).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from ident3d.causal.errors import UserError
from ident3d.store.attrs import FORMAT_VERSION, StoreAttrs

# Zarr v3 dimension names of each array (the same under views/NAME/): xarray.open_zarr needs them
DIMENSIONS = {"images": ("sample", "y", "x", "channel"), "latents": ("sample", "latent"), "classes": ("sample",),
              "done": ("chunk",), "masks": ("sample", "y", "x"), "visibility": ("sample", "object"),
              "present": ("sample", "object"), "attempts": ("sample",), "text": ("sample",),
              "text_latents": ("sample", "text_latent")}
ROW_ARRAYS = ("images", "latents", "classes")  # per-row arrays of the anchors and of every views/NAME/, in this order
# per-row arrays of a scene with object slots (attrs.scene_spec has 'objects'), next to each images array: masks
# (0: background, k + 1: object k, from Cycles' object index pass), visible pixels and presence per slot
OBJECT_ARRAYS = ("masks", "visibility", "present")
# per-row array of a render with placement rules (attrs.placement set), next to each images array: the draws each row
# took before it kept the rules (1: accepted at once; render/placement.py)
PLACEMENT_ARRAYS = ("attempts",)
# per-row arrays of a store with captions (attrs.text set), anchors only: each row's caption (variable-length UTF-8)
# and the values it states (columns: attrs.text["names"]; ident3d.render.captions)
TEXT_ARRAYS = ("text", "text_latents")
STRING = "string"  # the declared dtype of a caption array: Zarr's variable-length UTF-8 (numpy object or StringDType)
SEQUENCE_ARRAYS = ("sequence", "time", "interventions")  # per-row arrays of a sequence store (attrs.sequences set)
# the attribute of a per-row array whose every written chunk has a file (written with Zarr's write_empty_chunks on)
EVERY_CHUNK = "write_empty_chunks"
MARKED = {EVERY_CHUNK: True}  # the attributes of every per-row array this module creates
# dtype of each per-row array (the same under views/NAME/; sequence arrays: sequence_layout)
DTYPES = {"images": "uint8", "latents": "float32", "classes": "int64", "masks": "uint8", "visibility": "int64",
          "present": "bool", "attempts": "int64", "text": STRING, "text_latents": "float32"}


def sequence_layout(n_nodes: int) -> dict[str, tuple[str, tuple[str, ...], tuple[int, ...]]]:
    """A sequence store's per-row arrays as a layout's ``extra``: name -> (dtype, dimension names, shape after the
    row axis). ``interventions`` has one column per node of the dynamic SCM."""
    return {"sequence": ("int64", ("sample",), ()), "time": ("int64", ("sample",), ()),
            "interventions": ("bool", ("sample", "node"), (int(n_nodes),))}


@dataclass(frozen=True)
class ArraySpec:
    """One per-row array the store format declares: its path, dtype, shape after the row axis (``tail``), dimension
    names, whether the store must have it, and what its shape means (for messages)."""

    path: str
    dtype: str
    tail: tuple[int, ...]
    dims: tuple[str, ...]
    required: bool = True
    meaning: str = ""

    @property
    def name(self) -> str:
        """The array's name without its view prefix (``masks`` for ``views/pos/masks``)."""
        return self.path.rsplit("/", 1)[-1]


def text_latent_names(attrs: StoreAttrs) -> list[str]:
    """The columns of a store's ``text_latents`` (empty for a store without captions)."""
    return list((attrs.text or {}).get("names") or [])


def is_string_dtype(dtype: Any) -> bool:
    """Whether an array's dtype is how Zarr reads variable-length strings (object on zarr 3.1, StringDType later)."""
    return np.dtype(dtype).kind in "OT"


def object_slots(attrs: StoreAttrs) -> int:
    """How many object slots a store's scene has (``scene_spec.objects.slots``; 0 for a one-object scene)."""
    objects = (attrs.scene_spec or {}).get("objects")
    return int(objects.get("slots", 0)) if isinstance(objects, dict) else 0


def image_shape(group: zarr.Group) -> tuple[int, int]:
    """Height and width of the anchors' images (0, 0 where ``images`` is not a (rows, H, W, 3) array)."""
    shape = tuple(group["images"].shape)
    return (int(shape[1]), int(shape[2])) if len(shape) == 4 else (0, 0)


def declared_arrays(group: zarr.Group, attrs: StoreAttrs) -> list[ArraySpec]:
    """Every per-row array the store format declares for this store, in order: the anchors' and each view's images,
    latents and classes (classes only required where the SCM has a class), masks, visibility and present (a scene
    with object slots), attempts (a render with placement rules), then a sequence store's ``sequence``, ``time`` and
    ``interventions``, and a captioned store's ``text`` and ``text_latents``; each with its dtype and shape after the
    row axis. What ``check`` holds the store to and readers may rely on."""
    h, w = image_shape(group)
    d, slots = len(attrs.latent_names), object_slots(attrs)
    tails = {"images": ((h, w, 3), f"{h}x{w} RGB images"), "latents": ((d,), f"one column per latent ({d})"),
             "classes": ((), "one class per row"), "masks": ((h, w), f"one mask per image, of its {h}x{w} pixels"),
             "visibility": ((slots,), f"one column per object slot ({slots})"),
             "present": ((slots,), f"one column per object slot ({slots})"), "attempts": ((), "one count per row")}
    names = [*ROW_ARRAYS, *(OBJECT_ARRAYS if slots else ()), *(PLACEMENT_ARRAYS if attrs.placement else ())]
    out = []
    for pre in [""] + [f"views/{v}/" for v in view_names(group)]:
        out += [ArraySpec(f"{pre}{name}", DTYPES[name], tails[name][0], DIMENSIONS[name],
                          name != "classes" or bool(attrs.class_names), tails[name][1]) for name in names]
    if attrs.sequences:
        nodes = len(attrs.sequences.get("intervention_names") or [])
        out += [ArraySpec(name, dtype, tail, dims, True, f"one column per node ({nodes})" if tail else "one per row")
                for name, (dtype, dims, tail) in sequence_layout(nodes).items()]
    if attrs.text:
        t = len(text_latent_names(attrs))
        out += [ArraySpec("text", STRING, (), DIMENSIONS["text"], True, "one caption per row"),
                ArraySpec("text_latents", "float32", (t,), DIMENSIONS["text_latents"], True,
                          f"one column per text latent ({t})")]
    return out


def row_arrays(group: zarr.Group, attrs: StoreAttrs) -> list[tuple[str, bool]]:
    """Every per-row array the store format declares for this store, as (path, required)
    (:func:`declared_arrays`)."""
    return [(spec.path, spec.required) for spec in declared_arrays(group, attrs)]


@dataclass(frozen=True)
class ChunkData:
    """One chunk of rendered rows: images (C, H, W, 3) uint8, latents (C, D), classes (C,) or None.

    ``latents=None`` leaves the stored latents and classes as they are (given latents, written by the driver).
    A scene with object slots also gives ``masks`` (C, H, W) uint8, ``visibility`` (C, K) int64 (visible pixels per
    slot) and ``present`` (C, K) bool; None otherwise. A render with placement rules gives ``attempts`` (C,) int64,
    each row's draws (1: accepted at once); None otherwise. A captioned store's anchors give ``text`` (C,) captions
    and ``text_latents`` (C, T); None otherwise (and for views).
    """

    images: np.ndarray
    latents: np.ndarray | None
    classes: np.ndarray | None
    masks: np.ndarray | None = None
    visibility: np.ndarray | None = None
    present: np.ndarray | None = None
    attempts: np.ndarray | None = None
    text: np.ndarray | None = None
    text_latents: np.ndarray | None = None


def chunk_bounds(k: int, chunk_size: int, n: int) -> tuple[int, int]:
    """Row range [start, stop) of chunk k."""
    return k * chunk_size, min(n, (k + 1) * chunk_size)


def n_chunks(n: int, chunk_size: int) -> int:
    return -(-n // chunk_size)


def is_url(path: str) -> bool:
    return "://" in str(path)


def _check_local_target(path: str) -> None:
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(f"{path} exists and is a file, not a store; choose another --out")
    parent = next((q for q in [p, *p.parents] if q.exists()), Path("."))
    if not os.access(parent, os.W_OK):
        raise UserError(f"cannot write the store {path}: {parent} is not writable; choose another --out")


def url_target(path: str) -> tuple[Any, str]:
    """The fsspec file system and root path of a store URL, without cached listings (answers are current, also after
    another process wrote); an unknown protocol or a missing backend (s3fs for ``s3://``) is one line saying what to
    install."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(path, use_listings_cache=False)
    except ImportError as exc:
        raise UserError(f"cannot open {path}: {exc} (for s3:// URLs: pip install 'ident3d[s3]')") from None
    except Exception as exc:  # noqa: BLE001 - an unknown protocol, bad URL options
        raise UserError(f"cannot open {path}: {decode_error(exc)}") from None


def url_failure(path: str, exc: BaseException) -> UserError:
    """A backend error on a store URL as one line with the way out: access denied names the credentials and the
    endpoint to check; anything else is the backend's words and the URL and endpoint to check."""
    why = decode_error(exc)
    if "Credentials" in type(exc).__name__:  # botocore's NoCredentialsError, PartialCredentialsError, ...
        return UserError(f"no credentials to reach {path} ({why}); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                         "(or AWS_PROFILE) for s3://, and AWS_ENDPOINT_URL for a server other than AWS")
    if isinstance(exc, PermissionError):
        return UserError(f"access to {path} was denied ({why}); check the credentials (for s3://: AWS_ACCESS_KEY_ID "
                         "and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and the endpoint (AWS_ENDPOINT_URL)")
    return UserError(f"cannot reach {path} ({why}); check the URL and the endpoint (for s3://: AWS_ENDPOINT_URL)")


def store_exists(path: str) -> bool:
    """Whether ``path`` (local path or fsspec URL) holds a Zarr group (its zarr.json). For a URL, "no" is only
    the backend's "not found": any other error (credentials, network) is a :class:`UserError`, never "absent", so
    a store is never taken for missing and created over."""
    if not is_url(path):
        return (Path(path) / "zarr.json").is_file()
    fs, root = url_target(path)
    try:
        return bool(fs.exists(f"{root}/zarr.json"))
    except Exception as exc:  # noqa: BLE001 - every backend error is one line
        raise url_failure(path, exc) from None


def store_reachable(path: str) -> bool:
    """Whether a store may be read at ``path``: a local path that exists, or a URL holding a store that the
    credentials can read (no error: for optional checks against a store that may be gone, e.g. a run's training
    store)."""
    if not is_url(path):
        return Path(path).exists()
    try:
        return store_exists(path)
    except UserError:
        return False


def _check_url_target(path: str, overwrite: bool) -> None:
    """Refuse, before anything is written, a store URL whose bucket does not exist, that names an object (a file),
    or (without ``overwrite``) a non-empty prefix that is not a store: creating the store there would delete it."""
    fs, root = url_target(path)
    bucket = root.split("/")[0] if not root.startswith("/") and "://" not in root and "/" in root.strip("/") else ""
    try:
        if bucket and not fs.exists(bucket):
            raise UserError(f"the bucket {path.split('://')[0]}://{bucket} of {path} does not exist (or the "
                            "credentials cannot see it); create it first, or choose another --out")
        if fs.isfile(root):
            raise UserError(f"{path} exists and is a file, not a store; choose another --out")
        try:
            held = fs.ls(root, detail=False)
        except FileNotFoundError:
            held = []
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise url_failure(path, exc) from None
    if held and not overwrite:
        raise UserError(f"{path} is a non-empty folder that is not a store; choose another --out")


def open_store(path: str, mode: str = "r") -> zarr.Group:
    """Open an existing ident3d store (local path or fsspec URL)."""
    if not store_exists(path):
        raise UserError(f"{path} is not a Zarr store (no zarr.json); render one with `ident3d render`")
    try:
        group = zarr.open_group(path, mode=mode)
    except Exception as exc:  # noqa: BLE001 - any backend error becomes one line
        raise UserError(f"cannot open the store {path}: {exc}") from None
    if group.attrs.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{path} is not an ident3d store of format v{FORMAT_VERSION}")
    return group


def store_group(path: str, mode: str = "r") -> zarr.Group:
    """The Zarr group of a store this process has already opened and checked (``open_store``, ``store_info``): how
    code outside ``store/`` reaches its arrays again (a Dask worker's reader, a chunk writer), without the checks'
    requests. The one place besides ``open_store`` that opens a store's group."""
    return zarr.open_group(path, mode=mode)


def prepare(path: str, attrs: StoreAttrs, layout: Mapping[str, Any], overwrite: bool) -> zarr.Group:
    """Create the store, or reopen a compatible one to resume; refuse to clobber anything else.

    ``layout``: n, chunk_size, height, width, n_latents, has_classes, views (names); optional slots, placement
    (True: an ``attempts`` array per images array), extra, image_level.
    """
    url = is_url(path)
    if not url:
        _check_local_target(path)
    exists = store_exists(path)
    if url and not exists:
        _check_url_target(path, overwrite)
    if exists and not overwrite:
        group = open_store(path, mode="r+")
        diff = StoreAttrs.from_attrs(dict(group.attrs), path).differences(attrs)
        if diff:
            raise UserError(f"{path} was rendered with different {', '.join(diff)}; use another --out, "
                            "or --overwrite to replace it")
        held, want = tuple(group["images"].shape[1:3]), (int(layout["height"]), int(layout["width"]))
        if held != want:  # what the attributes of a converted dataset do not record
            raise UserError(f"{path} holds {held[0]}x{held[1]} px images, not {want[0]}x{want[1]}; use another --out, "
                            "or --overwrite to replace it")
        return group
    if not url and Path(path).is_dir() and any(Path(path).iterdir()) and not exists and not overwrite:
        raise UserError(f"{path} is a non-empty folder that is not a store; choose another --out")
    if not url and overwrite and Path(path).is_dir():
        shutil.rmtree(path)
    return _create(path, attrs, layout)


IMAGE_LEVEL = 9  # zstd level of image chunks unless a layout says otherwise (imports may trade size for speed)


def _create(path: str, attrs: StoreAttrs, layout: Mapping[str, Any]) -> zarr.Group:
    n, c = int(layout["n"]), int(layout["chunk_size"])
    h, w, d = int(layout["height"]), int(layout["width"]), int(layout["n_latents"])
    try:
        group = zarr.open_group(path, mode="w", attributes=attrs.to_attrs())
    except Exception as exc:  # noqa: BLE001
        if is_url(path):
            raise url_failure(path, exc) from None
        raise UserError(f"cannot create the store {path}: {exc}") from None
    prefixes = [""] + [f"views/{v}/" for v in layout.get("views", [])]
    for pre in prefixes:
        group.create_array(f"{pre}images", shape=(n, h, w, 3), chunks=(c, h, w, 3), dtype="uint8",
                           compressors=_zstd(int(layout.get("image_level", IMAGE_LEVEL))),
                           dimension_names=DIMENSIONS["images"], attributes=MARKED)
        group.create_array(f"{pre}latents", shape=(n, d), chunks=(c, d), dtype="float32",
                           compressors=_zstd(0), dimension_names=DIMENSIONS["latents"], attributes=MARKED)
        if layout["has_classes"]:
            group.create_array(f"{pre}classes", shape=(n,), chunks=(c,), dtype="int64",
                               compressors=_zstd(0), dimension_names=DIMENSIONS["classes"], attributes=MARKED)
        slots = int(layout.get("slots", 0))
        if slots:  # a scene with object slots: masks, visible pixels and presence per slot
            group.create_array(f"{pre}masks", shape=(n, h, w), chunks=(c, h, w), dtype="uint8",
                               compressors=_zstd(int(layout.get("image_level", IMAGE_LEVEL))),
                               dimension_names=DIMENSIONS["masks"], attributes=MARKED)
            for name, dtype in (("visibility", "int64"), ("present", "bool")):
                group.create_array(f"{pre}{name}", shape=(n, slots), chunks=(c, slots), dtype=dtype,
                                   compressors=_zstd(0), dimension_names=DIMENSIONS[name], attributes=MARKED)
        if layout.get("placement"):  # a render with placement rules: each row's draws
            group.create_array(f"{pre}attempts", shape=(n,), chunks=(c,), dtype="int64", compressors=_zstd(0),
                               dimension_names=DIMENSIONS["attempts"], attributes=MARKED)
    if layout.get("text_latents") is not None:  # captions: the text and the values it states
        create_text(group, n, c, int(layout["text_latents"]))
    for name, spec in dict(layout.get("extra", {})).items():  # per-row arrays, e.g. a sequence's index
        create_extra(group, name, spec, n, c)
    group.create_array("done", shape=(n_chunks(n, c),), chunks=(1,), dtype="bool", fill_value=False,
                       compressors=_zstd(0), dimension_names=DIMENSIONS["done"])
    return group


def create_extra(group: zarr.Group, name: str, spec: tuple[str, tuple[str, ...], tuple[int, ...]], n: int,
                 chunk_size: int) -> zarr.Array:
    """Create (or replace) the per-row array ``name`` of a layout's ``extra`` (dtype, dimension names, shape after the
    row axis), chunked as the store's rows."""
    dtype, dims, tail = spec
    return group.create_array(name, shape=(n, *tail), chunks=(chunk_size, *tail), dtype=dtype, compressors=_zstd(0),
                              dimension_names=tuple(dims), overwrite=True, attributes=MARKED)


def create_text(group: zarr.Group, n: int, chunk_size: int, t: int) -> None:
    """Create a captioned store's ``text`` (variable-length UTF-8, one caption per row) and ``text_latents`` (n, t)."""
    group.create_array("text", shape=(n,), chunks=(chunk_size,), dtype=str, compressors=_zstd(0),
                       dimension_names=DIMENSIONS["text"], attributes=MARKED)
    group.create_array("text_latents", shape=(n, t), chunks=(chunk_size, t), dtype="float32", compressors=_zstd(0),
                       dimension_names=DIMENSIONS["text_latents"], attributes=MARKED)


def recreate(group: zarr.Group, spec: ArraySpec, n: int, chunk_size: int) -> zarr.Array:
    """Create (or replace) the declared per-row array ``spec`` empty, for a render to refill (``check --repair`` of an
    array that is missing)."""
    level = IMAGE_LEVEL if spec.name in ("images", "masks") else 0
    dtype = str if spec.dtype == STRING else spec.dtype
    return group.create_array(spec.path, shape=(n, *spec.tail), chunks=(chunk_size, *spec.tail), dtype=dtype,
                              compressors=_zstd(level), dimension_names=spec.dims, overwrite=True, attributes=MARKED)


def every_chunk(group: zarr.Group, name: str) -> zarr.Array:
    """``group[name]`` opened to write every chunk, also one equal to the fill value (which Zarr otherwise skips, or
    deletes): so a chunk written has a file, and a done chunk without one lost it. The setting is held by the open
    array, not stored, so every writer of per-row arrays opens them through here."""
    array, config = group[name], {"write_empty_chunks": True}
    if hasattr(array, "with_config"):  # zarr >= 3.2
        return array.with_config(config)
    from zarr.core.array import AsyncArray  # zarr 3.1: what with_config does there

    held = array._async_array
    return zarr.Array(AsyncArray(held.metadata, held.store_path, config=config))


def _zstd(level: int) -> zarr.codecs.ZstdCodec:
    """Zstd with a content checksum: without it a damaged chunk can decode silently into wrong values
    (zstd's raw literals), with it every damaged byte is a decode error that readers and `check` report.
    Level 0 is Zarr's default, kept for latents, classes and flags; images use the layout's ``image_level``."""
    return zarr.codecs.ZstdCodec(level=level, checksum=True)


def write_chunk(group: zarr.Group, k: int, anchors: ChunkData, views: Mapping[str, ChunkData],
                before_commit: Callable[[], None] | None = None) -> None:
    """Write chunk k of every array, then set ``done[k]`` (the commit point of the chunk).

    ``before_commit`` runs between the data and the flag (tests use it to kill a worker there).
    """
    n, c = group["images"].shape[0], group["images"].chunks[0]
    start, stop = chunk_bounds(k, c, n)
    for pre, data in [("", anchors), *((f"views/{v}/", d) for v, d in views.items())]:
        if data.images.shape[0] != stop - start:
            raise ValueError(f"chunk {k}: expected {stop - start} rows, got {data.images.shape[0]}")
        every_chunk(group, f"{pre}images")[start:stop] = data.images
        if data.masks is not None:
            every_chunk(group, f"{pre}masks")[start:stop] = data.masks
            every_chunk(group, f"{pre}visibility")[start:stop] = data.visibility
            every_chunk(group, f"{pre}present")[start:stop] = data.present
        if data.attempts is not None:
            every_chunk(group, f"{pre}attempts")[start:stop] = data.attempts
        if data.text is not None:
            every_chunk(group, f"{pre}text")[start:stop] = data.text
            every_chunk(group, f"{pre}text_latents")[start:stop] = data.text_latents
        if data.latents is None:
            continue
        every_chunk(group, f"{pre}latents")[start:stop] = data.latents
        if data.classes is not None:
            every_chunk(group, f"{pre}classes")[start:stop] = data.classes
    if before_commit is not None:
        before_commit()
    group["done"][k] = True


def write_given(group: zarr.Group, latents: np.ndarray, classes: np.ndarray | None, chunks: list[int],
                extra: Mapping[str, np.ndarray] | None = None) -> None:
    """Write given latents (and classes, and the layout's ``extra`` per-row arrays) into the store for ``chunks``
    (the ones not done yet).

    Done at every start, not only at creation, so a driver killed while creating the store leaves nothing
    half-written for the workers, which read their rows from here.
    """
    n, c = group["latents"].shape[0], group["latents"].chunks[0]
    for first, last in _runs(sorted(chunks)):
        start, stop = first * c, min(n, (last + 1) * c)
        every_chunk(group, "latents")[start:stop] = latents[start:stop]
        if classes is not None:
            every_chunk(group, "classes")[start:stop] = classes[start:stop]
        for name, values in (extra or {}).items():
            every_chunk(group, name)[start:stop] = values[start:stop]


def _runs(ks: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs in sorted chunk indices, as (first, last) pairs (one write per run)."""
    out: list[tuple[int, int]] = []
    for k in ks:
        if out and out[-1][1] == k - 1:
            out[-1] = (out[-1][0], k)
        else:
            out.append((k, k))
    return out


def done_mask(group: zarr.Group, path: str | None = None) -> np.ndarray:
    """Which chunks are complete (a damaged flag is a :class:`CorruptChunkError` naming its chunk)."""
    return np.asarray(read_rows(group["done"], slice(None), path or store_name(group)), dtype=bool)


# ----- reading with errors that name the chunk ---------------------------------------------------------
class CorruptChunkError(UserError):
    """A chunk that does not decode, as one line naming the store, the chunk and the array.

    A DataLoader worker's exception is re-raised in the main process as ``type(exc)(text with the worker's
    traceback)``; the constructor keeps only that traceback's last line, so the error stays one line.
    """

    def __init__(self, message: str):
        if "\n" in message:
            last = message.rstrip().splitlines()[-1]
            message = last.split(f"{type(self).__name__}: ", 1)[-1]
        super().__init__(message)


def decode_error(exc: BaseException) -> str:
    """A decoder's error in a few words (type and first line, at most 100 characters)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:100].rstrip(": ")


def corrupt_chunk(path: str, array: str, k: int, why: str) -> CorruptChunkError:
    """The one-line error for chunk k of ``array``, with the way out (``check --repair``, re-render)."""
    return CorruptChunkError(f"{path}: chunk {k} of {array} is corrupt ({why}); run `ident3d check {path} --repair`, "
                             "then re-run the render command")


def read_rows(array: zarr.Array, sel: int | slice, path: str) -> np.ndarray:
    """``array[sel]`` (rows along the first axis); a chunk that cannot be decoded becomes a one-line
    :class:`CorruptChunkError` naming the chunk, instead of a codec traceback.

    The read is tried whole first (the normal path costs nothing extra); only on failure are its chunks
    re-read one by one to find the first bad one. Memory errors and interrupts pass through.
    """
    try:
        return array[sel]
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - any codec/store error is located and reported in one line
        first = exc
    n, c = array.shape[0], array.chunks[0]
    lo, hi = (sel, sel + 1) if isinstance(sel, int | np.integer) else sel.indices(n)[:2]
    for k in range(max(0, lo) // c, n_chunks(min(hi, n), c)):
        try:
            array[slice(*chunk_bounds(k, c, n))]
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise corrupt_chunk(path, array.path, k, decode_error(exc)) from None
    raise CorruptChunkError(f"{path}: reading {array.path} failed ({decode_error(first)}); "
                            f"run `ident3d check {path}` to find damaged chunks") from None


def read_at(array: zarr.Array, rows: np.ndarray, path: str) -> np.ndarray:
    """``array[rows]`` for row ids ``rows``, reading only the chunks that hold them, each through :func:`read_rows`
    (a damaged chunk is one line naming it; damage in chunks not asked for, e.g. unfinished ones, is not read)."""
    rows = np.asarray(rows, dtype=np.int64)
    out = np.empty((rows.size, *array.shape[1:]), dtype=array.dtype)
    c, n = array.chunks[0], array.shape[0]
    for k in np.unique(rows // c):
        lo, hi = chunk_bounds(int(k), c, n)
        where = np.flatnonzero((rows >= lo) & (rows < hi))
        out[where] = read_rows(array, slice(lo, hi), path)[rows[where] - lo]
    return out


def store_name(group: zarr.Group) -> str:
    """A readable name of a group's store for messages (its local path or URL)."""
    store = group.store
    root = getattr(store, "root", None)
    if root is not None:
        return str(root)
    fs, where = getattr(store, "fs", None), getattr(store, "path", None)  # an fsspec store: its URL
    return fs.unstrip_protocol(where) if fs is not None and where is not None else str(store)


def view_names(group: zarr.Group) -> list[str]:
    """Names of the exact-LT views stored next to the anchors."""
    return list(StoreAttrs.from_attrs(dict(group.attrs), store_name(group)).views)
