"""The published 3DIdent and Causal3DIdent folders (PNGs + numpy latents): their layouts, found, read and checked.

Layouts, as the papers' loaders read them (image names are the row index zero-padded to
``ceil(log10(N))`` digits, N the rows of the latents file):

- ``3dident`` (paper 001): ``images/NNNNNN.png``, ``raw_latents.npy`` (N x 10 in [-1, 1], our 3dident
  column order) and ``latents.npy`` (the same latents scaled to scene units). The download has
  ``trainset/`` and ``testset/``: give one of them, or their parent and a ``split``.
- ``causal3dident`` (paper 000): per class k in 0..6 (our causal3dident class order) ``raw_latents_{k}.npy``
  (N_k x 10), ``latents_{k}.npy`` (scaled) and ``images_{k}/NNNN.png``.

Stores are made from them by :mod:`ident3d.ingest.published_import` and written back into them by
:mod:`ident3d.ingest.published_export`::

    from ident3d.ingest.published_import import import_published
    from ident3d.ingest.published_export import export_published
    import_published("downloads/3dident", "stores/3di_train.zarr", "3dident", split="trainset")
    export_published("stores/c3d.zarr", "exports/c3d", "causal3dident")
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal import SCM, load_scm
from ident3d.causal.errors import ParameterError, UserError
from ident3d.render.latents_io import check, load_numpy
from ident3d.render.meshes import file_sha256
from ident3d.store.zarr_io import (
    decode_error,
)

FORMATS = ("3dident", "causal3dident", "multimodal3dident")
NUMPY_FORMATS = ("3dident", "causal3dident")  # latents in .npy files (read here); multimodal3dident's are CSVs
N_CLASSES = 7  # Causal3DIdent's object classes: raw_latents_0 .. raw_latents_6
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RGB_MODES = ("RGB", "RGBA", "L", "LA", "P")  # PNG modes that decode to 8-bit RGB (alpha is dropped)
EXPECTED = {
    "3dident": "images/NNNNNN.png and raw_latents.npy (optionally latents.npy)",
    "causal3dident": "raw_latents_K.npy and images_K/NNNN.png for K = 0..6 (optionally latents_K.npy)",
    "multimodal3dident": "images/NNNNNN.png, latents_image.csv, latents_text.csv and text/text_raw.txt",
}
# the documented range of every raw latent of the published sets: 3DIdent (Zimmermann et al. 2021) draws them
# uniformly from [-1, 1]; Causal3DIdent (von Kuegelgen et al. 2021) from normals truncated to [-1, 1] (README and
# ../shared/SPEC.md, sections 2-3; the 3dident/causal3dident SCM specs give every node this range)
RAW_RANGE = (-1.0, 1.0)
PUBLISHED_NAMES = {"3dident": "3DIdent", "causal3dident": "Causal3DIdent", "multimodal3dident": "Multimodal3DIdent"}


# ----- the source folder -------------------------------------------------------------------------
@dataclass(frozen=True)
class PublishedSource:
    """A validated published folder: one PNG path per row, the raw latents (N x 10 float32), classes (or None),
    the common image size, and what the store records about where it came from; a captioned layout
    (multimodal3dident) also its captions, text latents (N, T) and the store's ``text`` attribute."""

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
    text: np.ndarray | None = None
    text_latents: np.ndarray | None = None
    text_attrs: dict[str, Any] | None = None

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
    if fmt == "multimodal3dident":
        return (folder / "latents_image.csv").is_file() and (folder / "images").is_dir()
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
    if fmt not in NUMPY_FORMATS:
        raise UserError(f"{fmt} folders are read by ident3d.ingest.multimodal3dident.read_source")
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


def load_published(src: str | Path, fmt: str, split: str | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray | None]:
    """A (small) published folder in memory: images uint8 (N, H, W, 3), raw latents, classes (or None)."""
    source = read_source(src, fmt, split)
    return decode_chunk(source.files, (source.height, source.width)), source.latents, source.classes


def scaled_latents(raw: np.ndarray, scene_spec: dict[str, Any], fmt: str) -> np.ndarray:
    """Raw latents in scene units (value = scale * raw + offset + offset_extent * extent, per the scene's
    bindings; our built-in scene of ``fmt`` for imported stores): what the published latents.npy files hold."""
    from ident3d.render.scene import load_scene, scene_from_dict

    scene = scene_from_dict(scene_spec) if "latents" in scene_spec else load_scene(fmt)
    out = raw.astype(np.float64).copy()
    for i, b in enumerate(scene.latents):
        out[:, i] = b.scale * out[:, i] + b.offset + b.offset_extent * scene.extent
    return out.astype(np.float32)


def check_whole(x: object, param: str, most: int | None = None, why: str = "", least: int = 1) -> None:
    """A whole number from ``least`` (to ``most``), or one line naming ``param`` (``ParameterError``), worded as every
    command words it: "must be a whole number >= 2, got 1"."""
    if not isinstance(x, int | np.integer) or isinstance(x, bool) or x < least or (most is not None and x > most):
        want = f"a whole number from {least} to {most}{' ' + why if why else ''}" if most else \
            f"a whole number >= {least}{' ' + why if why else ''}"
        raise ParameterError(param, f"must be {want}, got {x!r}")


# ----- writing an export (both layouts and the Temporal Causal3DIdent .npz) ------------------------------------------
def make_parents(out: Path) -> list[Path]:
    """Create ``out``'s missing parent folders; returns the ones made, innermost first (to remove if the export fails).
    A folder that cannot be made is one line, and nothing is left behind."""
    made: list[Path] = []
    try:
        for folder in reversed([q for q in out.parents if not q.exists()]):
            folder.mkdir()
            made.insert(0, folder)
    except OSError as exc:
        remove_folders(made)
        raise UserError(f"cannot write --out {out}: cannot create {exc.filename} ({exc.strerror}); choose a folder "
                        "you can write to") from None
    return made


def remove_folders(folders: list[Path]) -> None:
    """Remove the (empty) folders an export made, innermost first; one something else has filled is kept."""
    for folder in folders:
        with suppress(OSError):
            folder.rmdir()


def write_failed(out: Path, exc: OSError) -> UserError:
    """The one line for an export whose write failed (a read-only or full disk, no permission): what and where."""
    detail = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror or f"{type(exc).__name__}: {exc}"
    return UserError(f"cannot write --out {out} ({detail}); nothing was written: choose a folder you can write to "
                     "(with room for the export)")
