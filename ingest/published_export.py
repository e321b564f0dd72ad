"""An ident3d store -> a published 3DIdent or Causal3DIdent folder (lossless PNGs, float32 latents), so existing
code reads our renders. The layouts are :mod:`ident3d.ingest.published`'s.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal import load_scm
from ident3d.causal.errors import UserError
from ident3d.ingest.published import (
    check_format,
    check_whole,
    loader_width,
    make_parents,
    remove_folders,
    scaled_latents,
    write_failed,
)
from ident3d.store.attrs import read_attrs
from ident3d.store.zarr_io import (
    chunk_bounds,
    done_mask,
    n_chunks,
    open_store,
    read_rows,
    text_latent_names,
)


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
    if fmt == "multimodal3dident":
        check_captions(attrs, store)


def check_export_target(out: Path, overwrite: bool) -> None:
    """``out`` is a new or empty folder (or ``overwrite``); the command also checks that it can be created."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; choose a folder")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise UserError(f"{out} exists and is not empty; pass --overwrite to replace it")




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
    made = make_parents(out)
    tmp = out.parent / f".{out.name}.partial-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    try:
        written = _write_export(group, store, tmp, fmt, workers or os.cpu_count() or 1, progress, compress_level)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except OSError as exc:  # a read-only or full disk, no permission: one line, and nothing left behind
        raise write_failed(out, exc) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not out.exists():
            remove_folders(made)
    return ExportReport(str(out), int(group["images"].shape[0]), written, time.perf_counter() - t0)


def _write_export(group: Any, store: str, folder: Path, fmt: str, workers: int, progress: bool,
                  level: int) -> list[str]:
    """Write the latents files and the PNGs of ``fmt`` into ``folder``; returns the latents files' names."""
    raw = read_rows(group["latents"], slice(None), store)
    if fmt == "multimodal3dident":
        return _write_multimodal(group, store, folder, raw, workers, progress, level)
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


def _write_multimodal(group: Any, store: str, folder: Path, raw: np.ndarray, workers: int, progress: bool,
                      level: int) -> list[str]:
    """The Multimodal3DIdent layout: ``images/``, both latents CSVs and the captions (``ingest.multimodal3dident``)."""
    from ident3d.ingest.multimodal3dident import colour_state, write_tables

    attrs = read_attrs(group, store)
    (folder / "images").mkdir(parents=True)
    _, colour = colour_state()
    written = write_tables(folder, raw, read_rows(group["classes"], slice(None), store), list(attrs.latent_names),
                           read_rows(group["text"], slice(None), store),
                           read_rows(group["text_latents"], slice(None), store), text_latent_names(attrs),
                           list(colour.colour_names()))
    _write_pngs(group, store, folder, [("images", "", "", np.arange(len(raw)))], workers, progress, level)
    return written


def check_captions(attrs: Any, store: str) -> None:
    """A multimodal3dident export needs the store's captions, with the text latents its latents_text.csv holds."""
    from ident3d.ingest.multimodal3dident import TEXT_FROM

    names = text_latent_names(attrs)
    if not names:
        raise UserError(f"multimodal3dident export needs a store with captions; {store} has none (render it with "
                        "--text multimodal3dident)")
    lacking = [n for n in ("shape", "x", "y", "colour", "template") if n not in names]
    if lacking or not set(names) <= set(TEXT_FROM):
        raise UserError(f"multimodal3dident export needs the text latents of the built-in caption spec "
                        f"({', '.join(TEXT_FROM)}); {store} has {', '.join(names)}")


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
