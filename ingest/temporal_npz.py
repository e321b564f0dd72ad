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

An import cuts the chain into sequences of ``length`` frames (the remainder, fewer than ``length`` frames, is left
out and reported), converts the factors into the ``temporal_causal3dident`` SCM's units (positions / 2, angles
as pi x value in [-1, 1]) and shapes into its class order, and moves the targets to our convention (row t: the
step that reached frame t; none at a sequence's step 0). An export writes the store's sequences back as one chain;
a transition from one sequence into the next is recorded as an intervention on every factor (a new sequence
starts from values drawn uniformly and independently of the last frame, which is what a joint hard intervention
with uniform values does in CITRIS's generator).

Not verified against a real download (none was available): the units of ``raw_latents`` and whether a file holds
N - 1 or N rows of ``interventions`` (both are accepted; an N-th row is ignored).
"""

from __future__ import annotations

import hashlib
import os
import time
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import numpy as np

from causal import SCM, load_scm
from causal.errors import UserError
from causal.loading import load_dynamic_scm
from render.latents_io import GivenLatents
from render.sequences import SEQUENCE_ARRAYS
from store.attrs import StoreAttrs, read_attrs
from store.zarr_io import IMAGE_LEVEL, ChunkData, chunk_bounds, done_mask, open_store, prepare, write_chunk, write_given

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
def _npy_header(fh: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran order, dtype) of the .npy stream ``fh``, which is left at the start of the data."""
    version = np.lib.format.read_magic(fh)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    return read(fh)


def _member(zf: zipfile.ZipFile, key: str, path: Path) -> str:
    name = f"{key}.npy"
    if name not in zf.namelist():
        raise UserError(f"{path} has no {key!r} array (found: {', '.join(n[:-4] for n in zf.namelist())}); a "
                        f"Temporal Causal3DIdent file holds {', '.join(KEYS)}")
    return name


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
    """Open and check a Temporal Causal3DIdent ``.npz`` (one line naming what is wrong; the images are not read)."""
    path = Path(src).expanduser()
    if not path.is_file():
        raise UserError(f"{path} is not a file; give a Temporal Causal3DIdent split file such as train.npz")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"{path} is not an .npz (zip) file ({exc}); give a Temporal Causal3DIdent split file") \
            from None
    with zf:
        with zf.open(_member(zf, "imgs", path)) as fh:
            shape, fortran, dtype = _npy_header(fh)
        arrays = {k: np.load(zf.open(_member(zf, k, path)), allow_pickle=False) for k in KEYS[1:]}
    if len(shape) != 4 or dtype != np.uint8 or shape[3] not in (3, 4) or fortran:
        raise UserError(f"{path}: imgs is {dtype} {shape}; expected N x H x W x 3 (or 4) uint8 in C order")
    n, h, w, c = shape
    raw, shapes, steps = arrays["raw_latents"], arrays["shape_latents"], arrays["interventions"]
    if shapes.ndim == 1:
        shapes = shapes[:, None]
    if raw.shape != (n, 10) or shapes.shape[0] != n or steps.ndim != 2 or steps.shape[1] != 12 \
            or steps.shape[0] not in (n - 1, n):
        raise UserError(f"{path}: raw_latents {raw.shape}, shape_latents {shapes.shape}, interventions "
                        f"{steps.shape} for {n} frames; expected ({n}, 10), ({n}, 2), ({n - 1} or {n}, 12)")
    if not np.isfinite(raw).all():
        raise UserError(f"{path}: raw_latents has non-finite values")
    _check_range(path, raw)
    if shapes[:, 0].min() < 0 or shapes[:, 0].max() >= len(SHAPES):
        raise UserError(f"{path}: shape_latents[:, 0] has shape indices outside 0..{len(SHAPES) - 1}")
    if not np.isin(steps, (0, 1)).all():
        raise UserError(f"{path}: interventions holds values other than 0 and 1")
    static = _static_scm()
    ours = factors_to_ours(raw)
    latents = np.stack([ours[name] for name in static.names], axis=1).astype(np.float32)
    order = [static.class_names.index(name) for name in SHAPES]
    classes = np.asarray(order, dtype=np.int64)[shapes[:, 0].astype(np.int64)]
    return TemporalFile(path.resolve(), n, h, w, c, latents, classes, steps[: n - 1].astype(bool), _sha256(path))


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


def frames(path: Path, start: int, stop: int) -> np.ndarray:
    """Frames start..stop-1 of the file's ``imgs`` (RGB), read from the zip member without loading the rest."""
    with zipfile.ZipFile(path) as zf, zf.open("imgs.npy") as fh:
        shape, _, _ = _npy_header(fh)
        row = int(np.prod(shape[1:]))
        fh.seek(fh.tell() + start * row)
        data = fh.read((stop - start) * row)
    return np.frombuffer(data, dtype=np.uint8).reshape(stop - start, *shape[1:])[..., :3]


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
                    overwrite: bool = False, progress: bool = True,
                    compression_level: int = IMAGE_LEVEL) -> TemporalImport:
    """Import a Temporal Causal3DIdent ``.npz`` as a sequence store of ``length``-frame sequences (or resume one:
    chunks already done are skipped). Checks the whole file first (one-line errors, nothing created)."""
    from ingest.published import check_whole, refuse_finished
    from render.api import store_path

    check_whole(length, "length")
    if length < 2:
        raise UserError(f"length must be at least 2 frames (a transition), got {length}")
    check_whole(sequences_per_chunk, "sequences_per_chunk")
    check_whole(compression_level, "compression_level", 22, "(zstd's levels)")
    out = store_path(out)
    refuse_finished(out, overwrite)
    f = read_temporal(src)
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
              "n_latents": f.latents.shape[1], "has_classes": True, "views": [], "image_level": compression_level,
              "extra": {**SEQUENCE_ARRAYS, "interventions": ("bool", ("sample", "node"), (len(names),))}}
    group = prepare(out, attrs, layout, overwrite)
    done = done_mask(group)
    report = TemporalImport(out, n_seq, length, len(done), [], [int(k) for k in np.flatnonzero(done)], f.n - n)
    todo = [k for k in range(len(done)) if not done[k]]
    write_given(group, given.latents, given.classes, todo, extra)
    t0 = time.perf_counter()
    from tqdm import tqdm

    try:
        for k in tqdm(todo, desc="import", unit="chunk", disable=not progress):
            start, stop = chunk_bounds(k, layout["chunk_size"], n)
            write_chunk(group, k, ChunkData(frames(f.path, start, stop), None, None), {})
            report.imported.append(k)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"interrupted: {len(report.skipped) + len(report.imported)} of {report.n_chunks} "
                                "chunks done; re-run the same command to resume") from None
    finally:
        report.seconds = time.perf_counter() - t0
    return report


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
    An existing file is replaced only with ``overwrite``; the file appears whole or not at all."""
    store = str(store)
    group = open_store(store)
    attrs = _sequence_attrs(group, store)
    out = Path(out).expanduser()
    if out.suffix != ".npz":
        raise UserError(f"--out {out}: name the split file, e.g. {out / 'train.npz'}")
    if out.exists() and not overwrite:
        raise UserError(f"{out} exists; pass --overwrite to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    names = list(attrs.sequences["intervention_names"])
    latents = group["latents"][:]
    classes = group["classes"][:]
    static = _static_scm()
    raw = factors_to_citris({name: latents[:, i] for i, name in enumerate(static.names)})
    citris_shape = np.asarray([SHAPES.index(static.class_names[c]) for c in range(len(static.class_names))])
    shapes = np.stack([citris_shape[classes], np.zeros_like(classes)], axis=1).astype(np.uint8)
    steps = chain_steps(group["interventions"][:], group["time"][:], names)
    images = group["images"]
    n = images.shape[0]
    tmp = out.with_name(f".{out.name}.partial")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        with zf.open("imgs.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_2_0(fh, {"descr": "|u1", "fortran_order": False,
                                                      "shape": tuple(images.shape)})
            for start in range(0, n, rows_per_read):
                fh.write(np.ascontiguousarray(images[start:start + rows_per_read]).tobytes())
        for key, value in (("raw_latents", raw), ("shape_latents", shapes), ("interventions", steps)):
            with zf.open(f"{key}.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, value, allow_pickle=False)
    os.replace(tmp, out)
    return out
