"""The published 3DIdent and Causal3DIdent folders (PNGs + numpy latents) <-> ident3d stores (format v1).

Layouts, as the papers' loaders read them (image names are the row index zero-padded to
``ceil(log10(N))`` digits, N the rows of the latents file):

- ``3dident`` (paper 001): ``images/NNNNNN.png``, ``raw_latents.npy`` (N x 10 in [-1, 1], our 3dident
  column order) and ``latents.npy`` (the same latents scaled to scene units). The download has
  ``trainset/`` and ``testset/``: give one of them, or their parent and a ``split``.
- ``causal3dident`` (paper 000): per class k in 0..6 (our causal3dident class order) ``raw_latents_{k}.npy``
  (N_k x 10), ``latents_{k}.npy`` (scaled) and ``images_{k}/NNNN.png``.

``import_published`` checks the latents and every image's PNG header before it creates the store, then
decodes the PNGs in parallel Dask tasks (one task decodes and writes one chunk, then sets its ``done``
flag), so an interrupted or failed import resumes where it stopped. ``export_published`` writes a store
back in either layout (lossless PNGs, float32 latents), so existing code reads our renders.

    from ident3d.ingest.published import import_published, export_published
    import_published("downloads/3dident", "stores/3di_train.zarr", "3dident", split="trainset")
    export_published("stores/c3d.zarr", "exports/c3d", "causal3dident")
"""

from __future__ import annotations

import math
import os
import shutil
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal import SCM, load_scm
from ident3d.causal.errors import ParameterError, UserError
from ident3d.render.driver import CONNECT_TIMEOUT_S, ChunkFailure
from ident3d.render.latents_io import GivenLatents, check, load_numpy
from ident3d.render.meshes import file_sha256
from ident3d.store.attrs import StoreAttrs, read_attrs
from ident3d.store.zarr_io import (
    IMAGE_LEVEL,
    ChunkData,
    chunk_bounds,
    decode_error,
    done_mask,
    n_chunks,
    open_store,
    prepare,
    read_rows,
    write_chunk,
    write_given,
)

FORMATS = ("3dident", "causal3dident")
N_CLASSES = 7  # Causal3DIdent's object classes: raw_latents_0 .. raw_latents_6
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RGB_MODES = ("RGB", "RGBA", "L", "LA", "P")  # PNG modes that decode to 8-bit RGB (alpha is dropped)
EXPECTED = {
    "3dident": "images/NNNNNN.png and raw_latents.npy (optionally latents.npy)",
    "causal3dident": "raw_latents_K.npy and images_K/NNNN.png for K = 0..6 (optionally latents_K.npy)",
}
# the documented range of every raw latent of the published sets: 3DIdent (Zimmermann et al. 2021) draws them
# uniformly from [-1, 1]; Causal3DIdent (von Kuegelgen et al. 2021) from normals truncated to [-1, 1] (README and
# ../shared/SPEC.md, sections 2-3; the 3dident/causal3dident SCM specs give every node this range)
RAW_RANGE = (-1.0, 1.0)
PUBLISHED_NAMES = {"3dident": "3DIdent", "causal3dident": "Causal3DIdent"}


# ----- the source folder -------------------------------------------------------------------------
@dataclass(frozen=True)
class PublishedSource:
    """A validated published folder: one PNG path per row, the raw latents (N x 10 float32), classes (or None),
    the common image size, and what the store records about where it came from."""

    fmt: str
    root: Path
    split: str | None
    files: list[str]
    latents: np.ndarray
    classes: np.ndarray | None
    height: int
    width: int
    sha256: dict[str, str]
    layout: dict[str, Any]

    def __len__(self) -> int:
        """Rows (= images)."""
        return len(self.files)


def check_format(fmt: str) -> str:
    """The format name, or one line listing the known ones."""
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    return fmt


def has_layout(folder: Path, fmt: str) -> bool:
    """Whether ``folder`` looks like a published folder of ``fmt`` (its latents file(s) and image folder(s))."""
    if fmt == "3dident":
        return (folder / "raw_latents.npy").is_file() and (folder / "images").is_dir()
    return any((folder / f"raw_latents_{k}.npy").is_file() for k in range(N_CLASSES))


def find_root(src: str | Path, fmt: str, split: str | None = None) -> Path:
    """The folder holding the layout: ``src`` itself, or ``src/split`` for a download's parent folder.

    A parent holding several splits without ``split`` is refused (one store per split), naming them."""
    src = Path(src).expanduser()
    if not src.exists():
        raise UserError(f"{src} not found; give the published {fmt} folder")
    if not src.is_dir():
        raise UserError(f"{src} is a file; give the published {fmt} folder (it holds {EXPECTED[fmt]})")
    if split:
        root = src / split
        if not root.is_dir():
            found = ", ".join(_splits(src, fmt)) or "none"
            raise UserError(f"split {split!r}: {root} is not a folder; splits here: {found}")
        if not has_layout(root, fmt):
            raise UserError(f"{root} is not a published {fmt} folder: expected {EXPECTED[fmt]}")
        return root
    if has_layout(src, fmt):
        return src
    splits = _splits(src, fmt)
    if splits:
        raise UserError(f"{src} holds the splits {', '.join(splits)}; choose one with --split {splits[0]} "
                        "(one store per split)")
    raise UserError(f"{src} is not a published {fmt} folder: expected {EXPECTED[fmt]}")


def _splits(src: Path, fmt: str) -> list[str]:
    """Sub-folders of ``src`` that hold the layout (e.g. trainset, testset)."""
    return sorted(d.name for d in src.iterdir() if d.is_dir() and has_layout(d, fmt))


def load_latents(path: Path, scm: SCM, fmt: str | None = None) -> np.ndarray:
    """An (N, 10) latents .npy checked against the SCM's latents (columns, finiteness) -> float32; with ``fmt``
    (raw latents of that published set) also against the set's documented range ``RAW_RANGE`` (without: scaled
    latents in scene units, whose range is not documented)."""
    if not path.is_file():
        raise UserError(f"latents file {path} not found")
    data = load_numpy(path, f"latents file {path}")
    if data.ndim == 2 and data.shape[1] != len(scm.names):
        raise UserError(f"latents file {path} has {data.shape[1]} columns, expected {len(scm.names)} "
                        f"({', '.join(scm.names)})")
    if data.ndim == 2 and data.shape[0] == 0:
        raise UserError(f"latents file {path} has no rows")
    classes = None if scm.class_node is None or data.ndim != 2 else np.zeros(len(data), np.int64)
    what = f"the documented range of the published {PUBLISHED_NAMES.get(fmt, '')} raw latents"
    documented = ({}, "") if fmt is None else (dict.fromkeys(scm.names, RAW_RANGE), what)
    return check(data, classes, scm, f"latents file {path}", documented).latents


def png_names(folder: Path, n: int, latents_file: Path) -> list[str]:
    """The PNG of each of n rows in ``folder``: ``str(i).zfill(ceil(log10 n))`` as the papers' loaders name them
    (a folder padded to the digits of n is accepted too); a missing image is one line naming it."""
    present = {e.name for e in os.scandir(folder) if e.name.endswith(".png")}
    if len(present) > n:
        raise UserError(f"latents file {latents_file} has {n} rows, expected {len(present)} (one per PNG in "
                        f"{folder})")
    widths = dict.fromkeys([loader_width(n), len(str(n)), len(str(n - 1))])
    for width in widths:
        names = [f"{str(i).zfill(width)}.png" for i in range(n)]
        if all(name in present for name in names):
            return [str(folder / name) for name in names]
    width = loader_width(n)
    first = next(i for i in range(n) if f"{str(i).zfill(width)}.png" not in present)
    raise UserError(f"missing image {folder / f'{str(first).zfill(width)}.png'} (row {first} of its latents; "
                    f"{len(present)} PNGs for {n} rows)")


def loader_width(n: int) -> int:
    """Digits of the papers' image names for n rows: ``int(ceil(log10(n)))``."""
    return int(math.ceil(math.log10(n))) if n > 1 else 0


def png_size(path: str) -> tuple[int, int]:
    """(height, width) from a PNG's IHDR header (33 bytes: no decoding); a non-PNG file is one line naming it."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(33)
    except OSError as exc:
        raise UserError(f"cannot read image {path}: {exc.strerror}") from None
    if len(head) < 33 or head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        raise UserError(f"image {path} is not a PNG file (bad header); replace it, then re-run the same command")
    width, height = struct.unpack(">II", head[16:24])
    return int(height), int(width)


def common_size(files: Sequence[str]) -> tuple[int, int]:
    """The size every image shares, from their headers; the first image of another size is one line."""
    size = png_size(files[0])
    for path in files[1:]:
        other = png_size(path)
        if other != size:
            raise UserError(f"image {path} is {other[1]}x{other[0]} px but {files[0]} is {size[1]}x{size[0]} px; "
                            "all images must share one size")
    return size


def read_source(src: str | Path, fmt: str, split: str | None = None) -> PublishedSource:
    """Find and validate a published folder: latents (rows, columns, finite), one PNG per row, one image size.

    Nothing is decoded or written; every problem is a one-line ``UserError`` naming the file."""
    root = find_root(src, check_format(fmt), split).resolve()  # absolute: workers may run elsewhere
    scm = load_scm(fmt)
    parts = [("images", "raw_latents.npy", "latents.npy", None)] if fmt == "3dident" else [
        (f"images_{k}", f"raw_latents_{k}.npy", f"latents_{k}.npy", k) for k in range(N_CLASSES)]
    files: list[str] = []
    latents, classes, sha, scaled = [], [], {}, {}
    for images, raw_name, scaled_name, k in parts:
        raw = load_latents(root / raw_name, scm, fmt)
        if not (root / images).is_dir():
            raise UserError(f"{root} has {raw_name} but no {images}/ folder; expected {EXPECTED[fmt]}")
        files += png_names(root / images, len(raw), root / raw_name)
        latents.append(raw)
        classes.append(np.full(len(raw), -1 if k is None else k, np.int64))
        sha[raw_name] = file_sha256(root / raw_name)
        if (root / scaled_name).is_file():
            scaled[scaled_name] = bool(np.allclose(_check_scaled(root / scaled_name, raw, scm),
                                                   scaled_latents(raw, {}, fmt), atol=1e-4))
            sha[scaled_name] = file_sha256(root / scaled_name)
    height, width = common_size(files)
    layout = {"images": [p[0] for p in parts], "image_names": "row index zero-padded to ceil(log10(rows)) digits",
              "raw_latents": [p[1] for p in parts], "scaled_latents": sorted(scaled),
              "scaled_latents_match_scene": all(scaled.values()) if scaled else None, "split": split or root.name,
              "rows": [len(x) for x in latents]}
    return PublishedSource(fmt, root, split, files, np.concatenate(latents),
                           None if fmt == "3dident" else np.concatenate(classes), height, width, sha, layout)


def _check_scaled(path: Path, raw: np.ndarray, scm: SCM) -> np.ndarray:
    """The scaled latents file must have the raw one's shape (it is not imported: the store keeps raw latents)."""
    scaled = load_latents(path, scm)
    if scaled.shape[0] != raw.shape[0]:
        raise UserError(f"latents file {path} has {scaled.shape[0]} rows, expected {raw.shape[0]} (as its raw "
                        "latents)")
    return scaled


# ----- the store -----------------------------------------------------------------------------------
def import_attrs(source: PublishedSource, chunk_size: int) -> StoreAttrs:
    """The store's self-description: where it came from (format, folder, layout, file hashes), the SCM's
    latent names and groups (so content/style columns work) and, for causal3dident, the class names."""
    given = GivenLatents(source.latents, source.classes, source.fmt)
    return StoreAttrs.imported(source.fmt, str(source.root), source.layout, source.sha256, load_scm(source.fmt),
                               source.height, len(source), chunk_size, ", ".join(source.layout["raw_latents"]),
                               given.sha256())


def import_layout(source: PublishedSource, chunk_size: int, level: int = IMAGE_LEVEL) -> dict[str, Any]:
    """The store's array layout for ``ident3d.store.zarr_io.prepare`` (``level``: the image chunks' zstd level)."""
    return {"n": len(source), "chunk_size": chunk_size, "height": source.height, "width": source.width,
            "n_latents": source.latents.shape[1], "has_classes": source.classes is not None, "views": [],
            "image_level": level}


def check_same_import(group: Any, out: str, attrs: StoreAttrs, level: int) -> None:
    """An existing store is resumed, or left as it is when complete, only if it was imported from the same source
    files (their sha256) with the same image ``level``: what the fingerprint that ``prepare`` compares leaves out."""
    old = read_attrs(group, out)
    codec = next(iter(group["images"].compressors), None)
    diff = [what for what, same in (("source files", old.source_sha256 == attrs.source_sha256),
                                    ("--compression-level", getattr(codec, "level", level) == level)) if not same]
    if diff:
        raise UserError(f"{out} was imported with different {', '.join(diff)}; use another --out, or --overwrite to "
                        "replace it")


def check_import_options(compression_level: int, workers: int | None, connect_timeout: float) -> None:
    """The options every import takes, each a one-line ``ParameterError``: the zstd level, the local worker count
    and the seconds to wait for a ``--scheduler``."""
    check_whole(compression_level, "compression_level", 22, "(zstd's levels)")
    if workers is not None:
        check_whole(workers, "workers")
    if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int | float) or not connect_timeout > 0:
        raise ParameterError("connect_timeout", f"must be a positive number of seconds, got {connect_timeout!r}")


# ----- the worker side -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImportJob:
    """What a worker needs to decode and write any chunk (plain data, so it ships to remote workers)."""

    out: str
    n: int
    chunk_size: int
    height: int
    width: int


def decode_png(path: str, size: tuple[int, int]) -> np.ndarray:
    """One PNG -> uint8 (H, W, 3) (alpha dropped; grey and palette images expanded to RGB).

    A truncated or corrupt file, or one of another size, is one line naming it."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im.load()
            if im.format != "PNG" or im.mode not in RGB_MODES:
                raise UserError(f"image {path} is a {im.format} {im.mode} image, not an 8-bit RGB(A) PNG")
            arr = np.asarray(im if im.mode in ("RGB", "RGBA") else im.convert("RGB"))[..., :3]
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - any decoder error becomes one line naming the file
        raise UserError(f"image {path} is corrupt ({decode_error(exc)}); replace it, then re-run the same command "
                        "to resume") from None
    if arr.shape[:2] != size:
        raise UserError(f"image {path} is {arr.shape[1]}x{arr.shape[0]} px, the others {size[1]}x{size[0]} px")
    return arr


def decode_chunk(files: Sequence[str], size: tuple[int, int]) -> np.ndarray:
    """The images of one chunk as uint8 (C, H, W, 3), in row order."""
    out = np.empty((len(files), *size, 3), np.uint8)
    for i, path in enumerate(files):
        out[i] = decode_png(path, size)
    return out


def import_chunk(job: ImportJob, k: int, files: Sequence[str]) -> tuple[int, int] | ChunkFailure:
    """Decode chunk k's PNGs, write them, then set ``done[k]``; returns (k, images) or a ChunkFailure (one line;
    the chunk stays not done, so a re-run after fixing the file decodes it again)."""
    import zarr

    try:
        images = decode_chunk(files, (job.height, job.width))
        write_chunk(zarr.open_group(job.out, mode="r+"), k, ChunkData(images, None, None), {})
        return k, len(files)
    except Exception as exc:  # noqa: BLE001 - every worker failure is one line for the driver
        message = str(exc) if isinstance(exc, UserError) else f"chunk {k}: {decode_error(exc)}"
        return ChunkFailure(k, message.splitlines()[0])


# ----- the driver ------------------------------------------------------------------------------------
@dataclass
class ImportReport:
    """What an import did: chunks decoded now and chunks skipped as already done."""

    out: str
    n: int
    n_chunks: int
    imported: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    images: int = 0
    seconds: float = 0.0


def import_published(src: str | Path, out: str | Path, fmt: str, split: str | None = None, chunk_size: int = 64,
                     workers: int | None = None, scheduler: str | None = None, overwrite: bool = False,
                     progress: bool = True, compression_level: int = IMAGE_LEVEL,
                     connect_timeout: float = CONNECT_TIMEOUT_S) -> ImportReport:
    """Import a published folder into a v1 store, or resume one (chunks already done are skipped; a complete store
    of the same source and settings is left as it is).

    Validates the latents and every image file first (one-line ``UserError``s, nothing created); then one Dask
    task per chunk decodes and writes it, on ``workers`` local processes (default one per core) or an existing
    cluster's ``scheduler`` (contacted before the store is created; given up after ``connect_timeout`` seconds).
    A corrupt PNG stops the import with one line naming it; finished chunks are kept. ``compression_level``
    (zstd, 1-22) trades store size for speed: compression is most of a chunk's time at 9.
    """
    from ident3d.render.api import store_path
    from ident3d.render.driver import connect

    check_whole(chunk_size, "chunk_size")
    check_import_options(compression_level, workers, connect_timeout)
    out = store_path(out)
    source = read_source(src, fmt, split)
    layout = import_layout(source, chunk_size, compression_level)
    attrs = import_attrs(source, chunk_size)
    client = connect(scheduler, float(connect_timeout)) if scheduler else None  # before anything is created
    try:
        group = prepare(out, attrs, layout, overwrite)
        check_same_import(group, out, attrs, compression_level)
        done = done_mask(group)
        report = ImportReport(out, len(source), len(done), skipped=[int(k) for k in np.flatnonzero(done)])
        todo = [k for k in range(len(done)) if not done[k]]
        write_given(group, source.latents, source.classes, todo)
        if todo:
            job = ImportJob(out, len(source), chunk_size, source.height, source.width)
            _run_tasks(job, source.files, todo, workers, client, progress, report)
    finally:
        if client is not None:
            client.close()
    return report


def check_whole(x: object, param: str, most: int | None = None, why: str = "", least: int = 1) -> None:
    """A whole number from ``least`` (to ``most``), or one line naming ``param`` (``ParameterError``), worded as every
    command words it: "must be a whole number >= 2, got 1"."""
    if not isinstance(x, int | np.integer) or isinstance(x, bool) or x < least or (most is not None and x > most):
        want = f"a whole number from {least} to {most}{' ' + why if why else ''}" if most else \
            f"a whole number >= {least}{' ' + why if why else ''}"
        raise ParameterError(param, f"must be {want}, got {x!r}")


def _run_tasks(job: ImportJob, files: list[str], todo: list[int], workers: int | None, client: Any,
               progress: bool, report: ImportReport) -> None:
    """Run the chunk tasks on ``client`` (an existing cluster's, closed by the caller) or on a LocalCluster started
    and stopped here."""
    from ident3d.render.driver import dashboard_link, local_cluster

    cluster = None
    own = client is None
    try:
        if own:
            client, cluster = local_cluster(workers or os.cpu_count() or 1, 1)
        if progress:
            print(f"Dask dashboard: {dashboard_link(client)}", flush=True)
        _submit_all(client, job, files, todo, progress, report)
    finally:
        if own and client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def _submit_all(client: Any, job: ImportJob, files: list[str], todo: list[int], progress: bool,
                report: ImportReport) -> None:
    """One task per chunk; collect them with a progress bar; stop at the first failure or at Ctrl-C."""
    from ident3d.render.driver import drain

    t0, run = time.perf_counter(), uuid.uuid4().hex[:8]

    def submit(k: int) -> Any:
        start, stop = chunk_bounds(k, job.chunk_size, job.n)
        return client.submit(import_chunk, job, k, files[start:stop], pure=False, key=f"import-{run}-{k}")

    total = sum(np.diff(chunk_bounds(k, job.chunk_size, job.n))[0] for k in todo)
    try:
        drain(client, submit, todo, int(total), "import", progress,
              lambda fut, k, bar: _collect(fut, k, job, report, bar),
              lambda: f"interrupted: {len(report.skipped) + len(report.imported)} of {report.n_chunks} chunks done; "
                      "re-run the same command to resume")
    finally:
        report.seconds = time.perf_counter() - t0
    report.imported.sort()


def _collect(fut: Any, k: int, job: ImportJob, report: ImportReport, bar: Any) -> None:
    """One finished task: count the images it wrote, or raise a one-line UserError (a ChunkFailure or a lost
    worker)."""
    try:
        result = fut.result()
    except Exception as exc:  # noqa: BLE001 - e.g. a worker process that died mid-chunk
        raise UserError(f"chunk {k} failed in its Dask worker ({decode_error(exc)}); re-run the same command to "
                        f"resume ({job.out} keeps the finished chunks)") from None
    if isinstance(result, ChunkFailure):
        raise UserError(result.message)
    report.imported.append(k)
    report.images += int(result[1])
    bar.update(int(result[1]))


# ----- export ----------------------------------------------------------------------------------------
@dataclass
class ExportReport:
    """What an export wrote: the folder, its images and the numpy files."""

    out: str
    images: int
    files: list[str]
    seconds: float


def check_exportable(group: Any, store: str, fmt: str) -> None:
    """The store is complete and has what the layout needs: our 10 latents in order (and classes for
    causal3dident)."""
    done = done_mask(group, store)
    if not done.all():
        raise UserError(f"{store} is incomplete ({int(done.sum())}/{len(done)} chunks done); finish it first")
    names = list(load_scm(fmt).names)
    attrs = read_attrs(group, store)
    have = list(attrs.latent_names)
    if have != names:
        raise UserError(f"{fmt} export needs the 10 latents {', '.join(names)} in this order; {store} has "
                        f"{', '.join(have) or 'none'}")
    if fmt == "causal3dident" and ("classes" not in group or not attrs.class_names):
        raise UserError(f"causal3dident export needs a store with classes; {store} has none (export it as 3dident)")


def check_export_target(out: Path, overwrite: bool) -> None:
    """``out`` is a new or empty folder (or ``overwrite``); the command also checks that it can be created."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; choose a folder")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise UserError(f"{out} exists and is not empty; pass --overwrite to replace it")


def scaled_latents(raw: np.ndarray, scene_spec: dict[str, Any], fmt: str) -> np.ndarray:
    """Raw latents in scene units (value = scale * raw + offset + offset_extent * extent, per the scene's
    bindings; our built-in scene of ``fmt`` for imported stores): what the published latents.npy files hold."""
    from ident3d.render.scene import load_scene, scene_from_dict

    scene = scene_from_dict(scene_spec) if "latents" in scene_spec else load_scene(fmt)
    out = raw.astype(np.float64).copy()
    for i, b in enumerate(scene.latents):
        out[:, i] = b.scale * out[:, i] + b.offset + b.offset_extent * scene.extent
    return out.astype(np.float32)


def export_published(store: str | Path, out: str | Path, fmt: str, overwrite: bool = False,
                     workers: int | None = None, progress: bool = True, compress_level: int = 6) -> ExportReport:
    """Write a store as a published folder of ``fmt`` (lossless PNGs, float32 raw and scaled latents).

    Written into a hidden sibling folder and renamed into place at the end, so ``out`` is never half written.
    ``workers`` threads encode the PNGs (default one per core)."""
    store, out = str(store), Path(out).expanduser()
    check_format(fmt)
    if workers is not None:
        check_whole(workers, "workers")
    group = open_store(store)
    check_exportable(group, store, fmt)
    check_export_target(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.partial-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    try:
        written = _write_export(group, store, tmp, fmt, workers or os.cpu_count() or 1, progress, compress_level)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ExportReport(str(out), int(group["images"].shape[0]), written, time.perf_counter() - t0)


def _write_export(group: Any, store: str, folder: Path, fmt: str, workers: int, progress: bool,
                  level: int) -> list[str]:
    """Write the numpy files and the PNGs of ``fmt`` into ``folder``; returns the numpy files' names."""
    raw = read_rows(group["latents"], slice(None), store)
    classes = read_rows(group["classes"], slice(None), store) if fmt == "causal3dident" else None
    attrs = read_attrs(group, store)
    scaled = scaled_latents(raw, attrs.scene_spec, fmt)
    parts = export_parts(fmt, classes, len(attrs.class_names or []), len(raw))
    written = []
    for images, raw_name, scaled_name, rows in parts:
        (folder / images).mkdir(parents=True)
        np.save(folder / raw_name, raw[rows])
        np.save(folder / scaled_name, scaled[rows])
        written += [raw_name, scaled_name]
    _write_pngs(group, store, folder, parts, workers, progress, level)
    return written


def export_parts(fmt: str, classes: np.ndarray | None, n_classes: int,
                 n: int) -> list[tuple[str, str, str, np.ndarray]]:
    """(image folder, raw latents file, scaled latents file, store rows) of each part of the layout."""
    if fmt == "3dident" or classes is None:
        return [("images", "raw_latents.npy", "latents.npy", np.arange(n))]
    return [(f"images_{k}", f"raw_latents_{k}.npy", f"latents_{k}.npy", np.flatnonzero(classes == k))
            for k in range(n_classes)]


def _png_paths(folder: Path, parts: list[tuple[str, str, str, np.ndarray]], n: int) -> list[str]:
    """The output PNG of every store row, named as the papers' loaders expect."""
    paths = [""] * n
    for images, _, _, rows in parts:
        width = loader_width(len(rows))
        for j, row in enumerate(rows):
            paths[int(row)] = str(folder / images / f"{str(j).zfill(width)}.png")
    return paths


def _write_pngs(group: Any, store: str, folder: Path, parts: list[tuple[str, str, str, np.ndarray]], workers: int,
                progress: bool, level: int) -> None:
    """Read the store chunk by chunk and encode its images as PNGs on a thread pool."""
    from tqdm import tqdm

    images = group["images"]
    n, c = images.shape[0], images.chunks[0]
    paths = _png_paths(folder, parts, n)
    with ThreadPoolExecutor(workers) as pool, tqdm(total=n, unit="img", desc="export", disable=not progress) as bar:
        for k in range(n_chunks(n, c)):
            start, stop = chunk_bounds(k, c, n)
            block = read_rows(images, slice(start, stop), store)
            list(pool.map(_png_writer(level), block, paths[start:stop]))
            bar.update(stop - start)


def _png_writer(level: int) -> Callable[[np.ndarray, str], None]:
    """A function writing one uint8 (H, W, 3) image as a lossless PNG at zlib ``level``."""
    from PIL import Image

    def write(image: np.ndarray, path: str) -> None:
        """Encode and save one image."""
        Image.fromarray(image, "RGB").save(path, format="PNG", compress_level=level)

    return write


def load_published(src: str | Path, fmt: str, split: str | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray | None]:
    """A (small) published folder in memory: images uint8 (N, H, W, 3), raw latents, classes (or None)."""
    source = read_source(src, fmt, split)
    return decode_chunk(source.files, (source.height, source.width)), source.latents, source.classes
