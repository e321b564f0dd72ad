"""A published 3DIdent or Causal3DIdent folder -> an ident3d store (format v1).

``import_published`` checks the latents and every image's PNG header before it creates the store, then decodes
the PNGs in parallel Dask tasks (one task decodes and writes one chunk, then sets its ``done`` flag), so an
interrupted or failed import resumes where it stopped; a complete store of the same source and settings is left
as it is. The layouts are :mod:`ident3d.ingest.published`'s.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal import load_scm
from ident3d.causal.errors import ParameterError, UserError
from ident3d.ingest import multimodal3dident
from ident3d.ingest.published import PublishedSource, check_format, check_whole, decode_chunk, find_root, read_source
from ident3d.jobs.cluster import CONNECT_TIMEOUT_S, ChunkFailure
from ident3d.render.latents_io import GivenLatents
from ident3d.store.attrs import StoreAttrs, read_attrs
from ident3d.store.zarr_io import (
    IMAGE_LEVEL,
    ChunkData,
    chunk_bounds,
    decode_error,
    done_mask,
    prepare,
    store_group,
    write_chunk,
    write_given,
)


# ----- the store -----------------------------------------------------------------------------------
def import_attrs(source: PublishedSource, chunk_size: int) -> StoreAttrs:
    """The store's self-description: where it came from (format, folder, layout, file hashes), the SCM's
    latent names and groups (so content/style columns work) and, for causal3dident, the class names."""
    given = GivenLatents(source.latents, source.classes, source.fmt)
    files = source.layout.get("raw_latents") or [source.layout["image_latents"]]
    return StoreAttrs.imported(source.fmt, str(source.root), source.layout, source.sha256, load_scm(source.fmt),
                               source.height, len(source), chunk_size, ", ".join(files), given.sha256(),
                               source.text_attrs)


def import_layout(source: PublishedSource, chunk_size: int, level: int = IMAGE_LEVEL) -> dict[str, Any]:
    """The store's array layout for ``ident3d.store.zarr_io.prepare`` (``level``: the image chunks' zstd level)."""
    return {"n": len(source), "chunk_size": chunk_size, "height": source.height, "width": source.width,
            "n_latents": source.latents.shape[1], "has_classes": source.classes is not None, "views": [],
            "image_level": level,
            "text_latents": None if source.text_latents is None else source.text_latents.shape[1]}


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


def import_chunk(job: ImportJob, k: int, files: Sequence[str]) -> tuple[int, int] | ChunkFailure:
    """Decode chunk k's PNGs, write them, then set ``done[k]``; returns (k, images) or a ChunkFailure (one line;
    the chunk stays not done, so a re-run after fixing the file decodes it again)."""

    try:
        images = decode_chunk(files, (job.height, job.width))
        write_chunk(store_group(job.out, mode="r+"), k, ChunkData(images, None, None), {})
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
    from ident3d.jobs.cluster import connect
    from ident3d.render.api import store_path

    check_whole(chunk_size, "chunk_size")
    check_import_options(compression_level, workers, connect_timeout)
    out = store_path(out)
    source = read_source(src, fmt, split) if fmt != multimodal3dident.FORMAT else \
        multimodal3dident.read_source(find_root(src, check_format(fmt), split).resolve(), split)
    layout = import_layout(source, chunk_size, compression_level)
    attrs = import_attrs(source, chunk_size)
    client = connect(scheduler, float(connect_timeout)) if scheduler else None  # before anything is created
    try:
        group = prepare(out, attrs, layout, overwrite)
        check_same_import(group, out, attrs, compression_level)
        done = done_mask(group)
        report = ImportReport(out, len(source), len(done), skipped=[int(k) for k in np.flatnonzero(done)])
        todo = [k for k in range(len(done)) if not done[k]]
        captions = {} if source.text is None else {"text": source.text, "text_latents": source.text_latents}
        write_given(group, source.latents, source.classes, todo, captions)
        if todo:
            job = ImportJob(out, len(source), chunk_size, source.height, source.width)
            _run_tasks(job, source.files, todo, workers, client, progress, report)
    finally:
        if client is not None:
            client.close()
    return report


def _run_tasks(job: ImportJob, files: list[str], todo: list[int], workers: int | None, client: Any,
               progress: bool, report: ImportReport) -> None:
    """Run the chunk tasks on ``client`` (an existing cluster's, closed by the caller) or on a LocalCluster started
    and stopped here."""
    from ident3d.jobs.cluster import cluster_client

    with cluster_client(client, workers or os.cpu_count() or 1, 1, progress) as (client, _):
        _submit_all(client, job, files, todo, progress, report)


def _submit_all(client: Any, job: ImportJob, files: list[str], todo: list[int], progress: bool,
                report: ImportReport) -> None:
    """One task per chunk; collect them with a progress bar; stop at the first failure or at Ctrl-C."""
    from ident3d.jobs.cluster import drain

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
