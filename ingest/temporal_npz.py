"""The published Temporal Causal3DIdent files (CITRIS, Lippe et al. 2022) <-> ident3d sequence stores.

The layout, as CITRIS's loader (``experiments/datasets.py``, ``Causal3DDataset``) and its factor generator
(``data_generation/temporal_causal3dident/data_generation_causal3dident.py``) define it: one ``{split}.npz`` per
split holding ONE long sequence of N frames:

- ``imgs``: N x H x W x C uint8 (the loader keeps the first 3 channels);
- ``raw_latents``: N x 10, columns pos-x, pos-y, pos-z in [-2, 2], then rot-alpha, rot-beta, rot-gamma, rot-spot,
  hue-object, hue-spot, hue-back in radians [0, 2 pi) (rot-gamma is excluded by the generator: constant 0);
- ``shape_latents``: N x 2, the object shape (0-6: Teapot, Armadillo, Hare, Cow, Dragon, Head, Horse) and the
  material (excluded: 0);
- ``interventions``: 12 columns (the 10 above, shape, material); row t says which factors were intervened on in
  the step from frame t to t + 1 (the generator writes N - 1 rows).

An import first checks the whole file (every member's type, shape and values, and that the images' payload reads
to its end with the bytes its header promises and the zip's CRC), then cuts the chain into sequences of ``length``
frames (the remainder, fewer than ``length`` frames, is left out and reported), converts the factors into the
``temporal_causal3dident`` SCM's units (positions / 2, angles as pi x value in [-1, 1]) and shapes into its class
order, and moves the targets to our convention (row t: the
step that reached frame t; none at a sequence's step 0). An export writes the store's sequences back as one chain;
a transition from one sequence into the next is recorded as an intervention on every factor (a new sequence
starts from values drawn uniformly and independently of the last frame, which is what a joint hard intervention
with uniform values does in CITRIS's generator).

Not verified against a real download (none was available): the units of ``raw_latents`` and whether a file holds
N - 1 or N rows of ``interventions`` (both are accepted; an N-th row is ignored).
"""

from __future__ import annotations

import hashlib
import io
import os
import time
import uuid
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import numpy as np

from ident3d.causal import SCM, load_scm
from ident3d.causal.errors import UserError
from ident3d.causal.loading import load_dynamic_scm
from ident3d.ingest.published import make_parents, remove_folders, write_failed
from ident3d.jobs.cluster import CONNECT_TIMEOUT_S, ChunkFailure, cluster_client
from ident3d.render.latents_io import GivenLatents
from ident3d.store.attrs import StoreAttrs, read_attrs
from ident3d.store.zarr_io import (
    IMAGE_LEVEL,
    ChunkData,
    chunk_bounds,
    decode_error,
    done_mask,
    open_store,
    prepare,
    read_rows,
    sequence_layout,
    store_group,
    write_chunk,
    write_given,
)

FORMAT = "temporal_causal3dident"
SPEC = "temporal_causal3dident"  # the dynamic SCM whose units and names the store uses
COLUMNS = ("pos-x", "pos-y", "pos-z", "rot-alpha", "rot-beta", "rot-gamma", "rot-spot", "hue-object", "hue-spot",
           "hue-back", "obj-shape", "obj-material")  # CITRIS's target order; raw_latents are the first 10
NODE = {"pos-x": "pos_x", "pos-y": "pos_y", "pos-z": "pos_z", "rot-alpha": "rot_alpha", "rot-beta": "rot_beta",
        "rot-spot": "spot_angle", "hue-object": "obj_hue", "hue-spot": "spot_hue", "hue-back": "bg_hue",
        "obj-shape": "class"}  # rot-gamma and obj-material are constant in the published set: not factors
POSITIONS = ("pos-x", "pos-y", "pos-z")
POSITION_RANGE = 2.0
SHAPES = ("Teapot", "Armadillo", "Hare", "Cow", "Dragon", "Head", "Horse")  # CITRIS's shape indices
KEYS = ("imgs", "raw_latents", "shape_latents", "interventions")


# ----- units ---------------------------------------------------------------------------------------
def factors_to_ours(raw: np.ndarray) -> dict[str, np.ndarray]:
    """CITRIS's raw latents (N x 10) -> {node: values in [-1, 1]}: positions / 2, angles in (-pi, pi] / pi."""
    out = {}
    for j, col in enumerate(COLUMNS[:10]):
        if col not in NODE:
            continue
        v = raw[:, j].astype(np.float64)
        if col in POSITIONS:
            out[NODE[col]] = v / POSITION_RANGE
        else:
            turn = np.mod(v, 2 * np.pi) / np.pi  # [0, 2)
            out[NODE[col]] = np.where(turn > 1.0, turn - 2.0, turn)
    return out


def factors_to_citris(values: dict[str, np.ndarray]) -> np.ndarray:
    """{node: values in [-1, 1]} -> CITRIS's raw latents (N x 10 float32; rot-gamma 0): the inverse of
    :func:`factors_to_ours`."""
    n = len(next(iter(values.values())))
    raw = np.zeros((n, 10), dtype=np.float64)
    for j, col in enumerate(COLUMNS[:10]):
        if col not in NODE:
            continue
        v = np.asarray(values[NODE[col]], dtype=np.float64)
        raw[:, j] = v * POSITION_RANGE if col in POSITIONS else np.mod(np.pi * v, 2 * np.pi)
    return raw.astype(np.float32)


# ----- reading a file --------------------------------------------------------------------------------
NUMERIC = "biuf"  # dtype kinds a factor array may hold: bool, signed and unsigned integers, floats
BLOCK = 1 << 24  # bytes of imgs read at a time when checking its payload (memory stays bounded)
READ_ERRORS = (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError)  # a damaged member or not an .npy


def _npy_header(fh: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran order, dtype) of the .npy stream ``fh``, which is left at the start of the data."""
    version = np.lib.format.read_magic(fh)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    return read(fh)


def _member(zf: zipfile.ZipFile, key: str, path: Path) -> str:
    """The zip member holding ``key``, or one line listing what the file holds."""
    name = f"{key}.npy"
    if name not in zf.namelist():
        raise UserError(f"{path} has no {key!r} array (found: {', '.join(n[:-4] for n in zf.namelist())}); a "
                        f"Temporal Causal3DIdent file holds {', '.join(KEYS)}")
    return name


@contextmanager
def _reading(path: Path, key: str) -> Iterator[None]:
    """Turn a failure to read member ``key`` (bad CRC, truncated or corrupt data, not an .npy) into one line."""
    try:
        yield
    except UserError:
        raise
    except READ_ERRORS as exc:
        raise UserError(f"{path}: {key} cannot be read ({decode_error(exc)}); the file is damaged: download it "
                        "again") from None


def _factor_array(zf: zipfile.ZipFile, key: str, path: Path) -> np.ndarray:
    """A small member (raw_latents, shape_latents, interventions) read whole, so its CRC is checked, and refused
    unless it holds numbers (strings, objects and records are named in one line; objects are never unpickled)."""
    name = _member(zf, key, path)
    with _reading(path, key):
        fh = io.BytesIO(zf.read(name))
        _, _, dtype = _npy_header(fh)
        if dtype.kind not in NUMERIC:
            raise UserError(f"{path}: {key} holds {dtype} values; expected numbers")
        fh.seek(0)
        return np.load(fh, allow_pickle=False)


def _image_header(zf: zipfile.ZipFile, path: Path) -> tuple[int, int, int, int]:
    """(N, H, W, C) from imgs' .npy header: N >= 1 frames of H x W x 3 (or 4) uint8 in C order."""
    with _reading(path, "imgs"), zf.open(_member(zf, "imgs", path)) as fh:
        shape, fortran, dtype = _npy_header(fh)
    if len(shape) != 4 or dtype != np.uint8 or shape[3] not in (3, 4) or fortran:
        raise UserError(f"{path}: imgs is {dtype} {shape}; expected N x H x W x 3 (or 4) uint8 in C order")
    if shape[0] == 0:
        raise UserError(f"{path}: imgs holds no frames; a Temporal Causal3DIdent file holds a chain of frames")
    return shape


def _check_image_payload(zf: zipfile.ZipFile, path: Path, shape: tuple[int, ...]) -> None:
    """Read imgs to its end in blocks (memory stays bounded): it must hold exactly the bytes its header promises
    and pass the zip's CRC, so a short or damaged member is refused before any store exists."""
    want = int(np.prod(shape))
    got = 0
    with _reading(path, "imgs"), zf.open("imgs.npy") as fh:
        _npy_header(fh)
        for block in iter(lambda: fh.read(BLOCK), b""):
            got += len(block)
    if got != want:
        raise UserError(f"{path}: imgs holds {got} bytes of pixels but its header promises {want} ({shape}); the "
                        "file is truncated or damaged: download it again")


@dataclass(frozen=True)
class TemporalFile:
    """A validated Temporal Causal3DIdent file: its frames' shape, the factors in our units (static SCM column
    order), our class indices, and the per-step targets in CITRIS's convention (row t: step t -> t + 1)."""

    path: Path
    n: int
    height: int
    width: int
    channels: int
    latents: np.ndarray  # (n, 9) float32, the temporal_causal3dident step-0 SCM's column order
    classes: np.ndarray  # (n,) int64, its class order
    steps: np.ndarray  # (n - 1, 12) bool, CITRIS's interventions
    sha256: str


def read_temporal(src: str | Path) -> TemporalFile:
    """Open and check a whole Temporal Causal3DIdent ``.npz``: every member's type, shape and values, and the
    images' full payload (read once, in blocks, not kept); the first problem is one line naming it."""
    path = Path(src).expanduser()
    if not path.is_file():
        raise UserError(f"{path} is not a file; give a Temporal Causal3DIdent split file such as train.npz")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"{path} is not an .npz (zip) file ({exc}); give a Temporal Causal3DIdent split file") \
            from None
    with zf:
        n, h, w, c = _image_header(zf, path)
        raw, shapes, steps = (_factor_array(zf, k, path) for k in KEYS[1:])
        shapes = _check_factors(path, n, raw, shapes, steps)
        _check_image_payload(zf, path, (n, h, w, c))
    static = _static_scm()
    ours = factors_to_ours(raw)
    latents = np.stack([ours[name] for name in static.names], axis=1).astype(np.float32)
    order = [static.class_names.index(name) for name in SHAPES]
    classes = np.asarray(order, dtype=np.int64)[shapes]
    return TemporalFile(path.resolve(), n, h, w, c, latents, classes, steps[: n - 1].astype(bool), _sha256(path))


def _check_factors(path: Path, n: int, raw: np.ndarray, shapes: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Shapes, finiteness and ranges of the factor arrays for n frames; returns the shape indices (n,) int64."""
    if shapes.ndim == 1:
        shapes = shapes[:, None]
    if raw.shape != (n, 10) or shapes.ndim != 2 or shapes.shape[0] != n or shapes.shape[1] < 1 or steps.ndim != 2 \
            or steps.shape[1] != 12 or steps.shape[0] not in (n - 1, n):
        raise UserError(f"{path}: raw_latents {raw.shape}, shape_latents {shapes.shape}, interventions "
                        f"{steps.shape} for {n} frames; expected ({n}, 10), ({n}, 2), ({n - 1} or {n}, 12)")
    if not np.isfinite(raw).all():
        raise UserError(f"{path}: raw_latents has non-finite values")
    _check_range(path, raw)
    index = shapes[:, 0]
    whole = np.isfinite(index) & (index == np.round(index)) & (index >= 0) & (index < len(SHAPES))
    if not whole.all():
        bad = int(np.flatnonzero(~whole)[0])
        raise UserError(f"{path}: shape_latents[{bad}, 0] is {index[bad]}; shape indices are whole numbers "
                        f"0..{len(SHAPES) - 1} ({', '.join(SHAPES)})")
    if not np.isin(steps, (0, 1)).all():
        raise UserError(f"{path}: interventions holds values other than 0 and 1")
    return index.astype(np.int64)


def _check_range(path: Path, raw: np.ndarray) -> None:
    """Positions in [-2, 2] and angles in [0, 2 pi] (the generator's ranges), else one line naming the column."""
    tol = 1e-4
    for j, col in enumerate(COLUMNS[:10]):
        lo, hi = (-POSITION_RANGE, POSITION_RANGE) if col in POSITIONS else (0.0, 2 * np.pi)
        if raw[:, j].min() < lo - tol or raw[:, j].max() > hi + tol:
            raise UserError(f"{path}: raw_latents column {col} spans [{raw[:, j].min():.3g}, {raw[:, j].max():.3g}],"
                            f" outside [{lo:g}, {hi:.4g}]; is this a Temporal Causal3DIdent file?")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _static_scm() -> SCM:
    return load_scm(load_dynamic_scm(SPEC).step0_spec())


def _chunk_frames(f: TemporalFile, spans: list[tuple[int, int]]) -> Iterator[np.ndarray]:
    """The RGB frames of each (start, stop) span (ascending), read forward through one open stream of imgs: every
    byte is decompressed once (a zip member seeks only by reading on from its start)."""
    row = f.height * f.width * f.channels
    with _reading(f.path, "imgs"), zipfile.ZipFile(f.path) as zf, zf.open("imgs.npy") as fh:
        _npy_header(fh)
        base = fh.tell()
        for start, stop in spans:
            fh.seek(base + start * row)
            data = fh.read((stop - start) * row)
            if len(data) != (stop - start) * row:
                raise UserError(f"{f.path}: imgs ended at frame {start + len(data) // row} of {f.n}: the file changed "
                                "during the import; check it, then re-run the same command")
            frames = np.frombuffer(data, np.uint8).reshape(stop - start, f.height, f.width, f.channels)
            yield np.ascontiguousarray(frames[..., :3])


# ----- import -----------------------------------------------------------------------------------------
@dataclass
class TemporalImport:
    """What an import did: chunks written now, chunks already done, frames left out (the chain's remainder)."""

    out: str
    sequences: int
    length: int
    n_chunks: int
    imported: list[int]
    skipped: list[int]
    dropped: int
    seconds: float = 0.0


def sequence_targets(steps: np.ndarray, n_seq: int, length: int) -> np.ndarray:
    """CITRIS's per-step targets (row t: step t -> t + 1, 12 columns) -> ours for ``n_seq`` sequences of
    ``length`` cut from the chain: (n_seq * length, nodes) bool, row t = the step that reached frame t, the nodes in
    the dynamic spec's order; a sequence's first row is all False."""
    names = load_dynamic_scm(SPEC).names
    out = np.zeros((n_seq * length, len(names)), dtype=bool)
    rows = np.arange(n_seq * length)
    reached = rows[rows % length != 0]  # frame r was reached by step r - 1 -> r of the chain
    for j, col in enumerate(COLUMNS):
        if col in NODE:
            out[reached, names.index(NODE[col])] = steps[reached - 1, j]
    return out


def import_temporal(src: str | Path, out: str | Path, length: int = 50, sequences_per_chunk: int = 8,
                    overwrite: bool = False, progress: bool = True, compression_level: int = IMAGE_LEVEL,
                    workers: int | None = None, scheduler: str | None = None,
                    connect_timeout: float = CONNECT_TIMEOUT_S) -> TemporalImport:
    """Import a Temporal Causal3DIdent ``.npz`` as a sequence store of ``length``-frame sequences, or resume one
    (chunks already done are skipped; a complete store of the same file and settings is left as it is).

    Checks the whole file first (one-line errors, nothing created), then contacts ``scheduler`` (given up after
    ``connect_timeout`` seconds). The frames are read in file order in this process and written (zstd
    ``compression_level``) in this process (``workers`` None or 1), or by ``workers`` local Dask processes or the
    scheduler's workers, one task per chunk."""
    from ident3d.ingest.published import check_whole
    from ident3d.ingest.published_import import check_import_options, check_same_import
    from ident3d.jobs.cluster import connect
    from ident3d.render.api import store_path

    check_whole(length, "length", least=2, why="(a sequence holds a transition)")
    check_whole(sequences_per_chunk, "sequences_per_chunk")
    check_import_options(compression_level, workers, connect_timeout)
    out = store_path(out)
    f = read_temporal(src)
    attrs, layout, given, extra = _store_plan(f, length, sequences_per_chunk, compression_level)
    client = connect(scheduler, float(connect_timeout)) if scheduler else None  # before anything is created
    try:
        group = prepare(out, attrs, layout, overwrite)
        check_same_import(group, out, attrs, compression_level)
        done = done_mask(group)
        report = TemporalImport(out, attrs.n // length, length, len(done), [], [int(k) for k in np.flatnonzero(done)],
                                f.n - attrs.n)
        todo = [k for k in range(len(done)) if not done[k]]
        write_given(group, given.latents, given.classes, todo, extra)
        if todo:
            _write_frames(f, report, layout["chunk_size"], todo, workers, client, progress)
    finally:
        if client is not None:
            client.close()
    return report


def _store_plan(f: TemporalFile, length: int, sequences_per_chunk: int,
                level: int) -> tuple[StoreAttrs, dict[str, Any], GivenLatents, dict[str, np.ndarray]]:
    """The store a file becomes: its attributes, array layout, given latents and per-row sequence arrays."""
    n_seq = f.n // length
    if n_seq == 0:
        raise UserError(f"{f.path} has {f.n} frames, fewer than one sequence of length {length}; give a smaller "
                        "--length")
    n = n_seq * length
    dynamic = load_dynamic_scm(SPEC)
    given = GivenLatents(f.latents[:n], f.classes[:n], FORMAT)
    layout_record = {"file": f.path.name, "frames": f.n, "columns": list(COLUMNS), "length": length,
                     "left_out": f.n - n}
    attrs = StoreAttrs.imported(FORMAT, str(f.path), layout_record, {f.path.name: f.sha256}, _static_scm(),
                                f.height, n, sequences_per_chunk * length, f"{f.path.name}: raw_latents, shape_latents",
                                given.sha256())
    names = list(dynamic.names)
    attrs = replace(attrs, sequences={"spec": dynamic.spec, "sequences": n_seq, "length": length, "seed": None,
                                      "intervention_names": names, "imported_from": f.path.name})
    extra = {"sequence": np.repeat(np.arange(n_seq, dtype=np.int64), length),
             "time": np.tile(np.arange(length, dtype=np.int64), n_seq),
             "interventions": sequence_targets(f.steps, n_seq, length)}
    layout = {"n": n, "chunk_size": sequences_per_chunk * length, "height": f.height, "width": f.width,
              "n_latents": f.latents.shape[1], "has_classes": True, "views": [], "image_level": level,
              "extra": sequence_layout(len(names))}
    return attrs, layout, given, extra


def write_frames(out: str, k: int, images: np.ndarray) -> tuple[int, int] | ChunkFailure:
    """Write chunk k's frames (read by the driver) and then set ``done[k]``: (k, frames), or a ChunkFailure (one
    line; the chunk stays not done, so a re-run writes it again). Runs in a Dask worker or in the driver."""

    try:
        write_chunk(store_group(out, mode="r+"), k, ChunkData(images, None, None), {})
        return k, len(images)
    except Exception as exc:  # noqa: BLE001 - every write failure is one line for the driver
        return ChunkFailure(k, f"chunk {k} of {out} could not be written ({decode_error(exc)}); re-run the same "
                               "command to resume")


def _write_frames(f: TemporalFile, report: TemporalImport, chunk_size: int, todo: list[int], workers: int | None,
                  client: Any, progress: bool) -> None:
    """Read the frames of the chunks in ``todo`` in file order and write them: in this process without a ``client``
    and more than one ``workers``, else one Dask task per chunk (its frames travel with it) on ``client`` or on a
    LocalCluster of ``workers`` processes started here."""
    from tqdm import tqdm

    n = report.sequences * report.length
    spans = [chunk_bounds(k, chunk_size, n) for k in todo]
    t0 = time.perf_counter()
    try:
        with closing(_chunk_frames(f, spans)) as chunks, tqdm(total=sum(b - a for a, b in spans), unit="img",
                                                              desc="import", disable=not progress) as bar:
            if client is None and (workers or 1) == 1:
                for k, images in zip(todo, chunks, strict=True):
                    _record(write_frames(report.out, k, images), report, bar)
            else:
                with cluster_client(client, workers or 1, 1, progress) as (dask_client, _):
                    _write_on(dask_client, report, todo, chunks, progress, bar)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"interrupted: {len(report.skipped) + len(report.imported)} of {report.n_chunks} "
                                "chunks done; re-run the same command to resume") from None
    finally:
        report.seconds = time.perf_counter() - t0


def _write_on(client: Any, report: TemporalImport, todo: list[int], chunks: Iterator[np.ndarray], progress: bool,
              bar: Any) -> None:
    """One Dask task per chunk, its frames taken from ``chunks`` as it is submitted (in ``todo`` order), at most two
    per worker thread in flight (memory stays bounded); stops at the first failure."""
    from ident3d.jobs.cluster import drain

    run = uuid.uuid4().hex[:8]

    def submit(k: int) -> Any:
        return client.submit(write_frames, report.out, k, next(chunks), pure=False, key=f"import-{run}-{k}")

    def collect(fut: Any, k: int, _: Any) -> None:
        try:
            result = fut.result()
        except Exception as exc:  # noqa: BLE001 - e.g. a worker process that died mid-chunk
            result = ChunkFailure(k, f"chunk {k} failed in its Dask worker ({decode_error(exc)}); re-run the same "
                                     f"command to resume ({report.out} keeps the finished chunks)")
        _record(result, report, bar)

    window = 2 * max(1, sum(client.nthreads().values()))
    drain(client, submit, todo, 0, "import", False, collect, lambda: "interrupted", window=window)
    report.imported.sort()


def _record(result: tuple[int, int] | ChunkFailure, report: TemporalImport, bar: Any) -> None:
    """One written chunk into the report and the progress bar, or its failure as a one-line UserError."""
    if isinstance(result, ChunkFailure):
        raise UserError(result.message)
    report.imported.append(result[0])
    bar.update(result[1])


# ----- export -----------------------------------------------------------------------------------------
def _sequence_attrs(group: Any, store: str) -> Any:
    """The store's attributes, if it is a complete sequence store of the temporal_causal3dident factors."""
    attrs = read_attrs(group, store)
    if not attrs.sequences:
        raise UserError(f"{store} is not a sequence store; export --format {FORMAT} needs one rendered with "
                        "`ident3d render --sequences` or imported from this format")
    static = _static_scm()
    if list(attrs.latent_names) != list(static.names) or list(attrs.class_names or []) != list(static.class_names):
        raise UserError(f"{store} has latents {', '.join(attrs.latent_names)}; the {FORMAT} layout needs the "
                        f"{SPEC} factors ({', '.join(static.names)} and the class)")
    if not done_mask(group, store).all():
        raise UserError(f"{store} is not complete; finish it (re-run its command) before exporting")
    return attrs


def chain_steps(targets: np.ndarray, time_index: np.ndarray, names: list[str]) -> np.ndarray:
    """Our per-frame targets (row t: the step that reached frame t) -> CITRIS's per-step rows for one chain
    (N - 1 rows x 12, int64): row t = targets of frame t + 1, or every factor where frame t + 1 starts a sequence."""
    n = len(targets)
    steps = np.zeros((n - 1, len(COLUMNS)), dtype=np.int64)
    starts = time_index[1:] == 0
    for j, col in enumerate(COLUMNS):
        if col in NODE:
            steps[:, j] = targets[1:, names.index(NODE[col])] | starts
    return steps


def export_temporal(store: str | Path, out: str | Path, overwrite: bool = False, rows_per_read: int = 4096) -> Path:
    """Write a sequence store as a Temporal Causal3DIdent ``.npz`` (``out``, e.g. ``exports/train.npz``): frames
    streamed into the file in store order, the factors in CITRIS's units, the sequences joined into one chain.
    An existing file is replaced only with ``overwrite``; the file appears whole or not at all (a damaged chunk or
    a failed write is one line, and removes the partial file and the folders made for it)."""
    store = str(store)
    group = open_store(store)
    attrs = _sequence_attrs(group, store)
    out = _check_out(out, overwrite)
    names = list(attrs.sequences["intervention_names"])
    latents, classes, targets, time_index = (read_rows(group[key], slice(None), store)
                                             for key in ("latents", "classes", "interventions", "time"))
    static = _static_scm()
    raw = factors_to_citris({name: latents[:, i] for i, name in enumerate(static.names)})
    citris_shape = np.asarray([SHAPES.index(static.class_names[c]) for c in range(len(static.class_names))])
    shapes = np.stack([citris_shape[classes], np.zeros_like(classes)], axis=1).astype(np.uint8)
    arrays = {"raw_latents": raw, "shape_latents": shapes, "interventions": chain_steps(targets, time_index, names)}
    made = make_parents(out)
    tmp = out.with_name(f".{out.name}.partial")
    try:
        _write_npz(tmp, group, store, arrays, rows_per_read)
        os.replace(tmp, out)
    except OSError as exc:
        raise write_failed(out, exc) from None
    finally:
        with suppress(OSError):  # a read-only file system refuses even the unlink of a file it never made (EROFS)
            tmp.unlink(missing_ok=True)
        if not out.exists():
            remove_folders(made)
    return out


def _check_out(out: str | Path, overwrite: bool) -> Path:
    """``out`` names a new .npz file (or an existing one, with ``overwrite``), not a folder or a path under a file."""
    out = Path(out).expanduser()
    if out.suffix != ".npz":
        raise UserError(f"--out {out}: name the split file, e.g. {out / 'train.npz'}")
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; name the split file, e.g. {out / 'train.npz'}")
    if out.exists() and not overwrite:
        raise UserError(f"{out} exists; pass --overwrite to replace it")
    folder = next(q for q in out.parents if q.exists())
    if not folder.is_dir():
        raise UserError(f"cannot write --out {out}: {folder} is a file, not a folder; choose another path")
    return out


def _write_npz(path: Path, group: Any, store: str, arrays: dict[str, np.ndarray], rows_per_read: int) -> None:
    """The .npz at ``path``: ``imgs`` streamed from the store's images (``rows_per_read`` rows at a time, a damaged
    chunk a one-line CorruptChunkError naming it), then the factor ``arrays``."""
    images = group["images"]
    n = images.shape[0]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        with zf.open("imgs.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_2_0(fh, {"descr": "|u1", "fortran_order": False,
                                                      "shape": tuple(images.shape)})
            for start in range(0, n, rows_per_read):
                block = read_rows(images, slice(start, start + rows_per_read), store)
                fh.write(np.ascontiguousarray(block).tobytes())
        for key, value in arrays.items():
            with zf.open(f"{key}.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, value, allow_pickle=False)
