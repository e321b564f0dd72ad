"""``ident3d import``: the command-line skin over ``ident3d.ingest.published_import.import_published`` (a published
3DIdent or Causal3DIdent folder -> an ident3d store) and ``ident3d.ingest.temporal_npz.import_temporal`` (a Temporal
Causal3DIdent .npz -> a sequence store)."""

from __future__ import annotations

import argparse

from ident3d.causal.errors import UserError
from ident3d.ingest import temporal_npz
from ident3d.ingest.published import FORMATS
from ident3d.ingest.published_import import ImportReport, import_published
from ident3d.jobs.cluster import CONNECT_TIMEOUT_S
from ident3d.pipelines.flags import flag_names
from ident3d.store.zarr_io import IMAGE_LEVEL


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``ident3d import``."""
    p = sub.add_parser(
        "import", help="import a published 3DIdent/Causal3DIdent folder or Temporal Causal3DIdent file as a store",
        description="Turn a published 3DIdent (images/NNNNNN.png, raw_latents.npy) or Causal3DIdent "
                    "(images_K/NNNN.png, raw_latents_K.npy for K = 0..6) folder into an ident3d store that "
                    "`ident3d train`, `evaluate`, `show` and `check` read. The raw latents become the store's "
                    "latents (named and grouped as the 3dident/causal3dident SCMs define them; the class is K). "
                    "The latents and every image header are checked before the store is created; the PNGs are "
                    "then decoded in parallel Dask chunks. Re-running the same command resumes an interrupted or "
                    "failed import (finished chunks are kept); on a complete store of the same source and settings it "
                    "does nothing. --format temporal_causal3dident reads one split file of CITRIS's Temporal "
                    "Causal3DIdent (train.npz: imgs, raw_latents, shape_latents, interventions), checks all of it, "
                    "cuts its chain into sequences of --length frames and writes a sequence store in the "
                    "temporal_causal3dident SCM's units.",
        epilog="examples:\n"
               "  ident3d import --format 3dident downloads/3dident/trainset --out stores/3di_train.zarr\n"
               "  ident3d import --format 3dident downloads/3dident --split testset --out stores/3di_test.zarr\n"
               "  ident3d import --format causal3dident downloads/causal3dident/train --out stores/c3d.zarr "
               "--workers 8\n"
               "  ident3d import --format causal3dident SRC --out /shared/c3d.zarr --scheduler tcp://HOST:8786\n"
               "  ident3d import --format temporal_causal3dident downloads/causal3d_time/train.npz --length 50 "
               "--out stores/tc3d.zarr",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", metavar="SRC", help="the published folder (or the download's parent, with --split)")
    p.add_argument("--format", required=True, choices=(*FORMATS, temporal_npz.FORMAT), help="the layout of SRC")
    p.add_argument("--out", required=True, metavar="STORE", help="the Zarr store to write (a folder or fsspec URL)")
    p.add_argument("--split", metavar="NAME", help="3dident/causal3dident: the sub-folder of SRC to import, e.g. "
                                                  "trainset or testset (needed when SRC holds several)")
    p.add_argument("--chunk-size", type=int, help="3dident/causal3dident: images per chunk/task (default 64)")
    p.add_argument("--length", type=int, help=f"{temporal_npz.FORMAT}: frames per sequence cut from the file's chain "
                                              "(default 50; the remainder is left out)")
    p.add_argument("--sequences-per-chunk", type=int,
                   help=f"{temporal_npz.FORMAT}: whole sequences per store chunk/task (default 8)")
    p.add_argument("--compression-level", type=int, default=IMAGE_LEVEL, metavar="L",
                   help=f"zstd level of the image chunks, 1-22 (default {IMAGE_LEVEL}, as renders; 3 writes chunks "
                        "about 2x faster for a slightly larger store)")
    p.add_argument("--workers", type=int, default=None, help="local Dask worker processes (default: one per core; "
                                                             f"{temporal_npz.FORMAT}: none, it is written in this "
                                                             "process unless --workers is 2 or more)")
    p.add_argument("--scheduler", metavar="ADDR", help="join an existing Dask cluster (tcp://HOST:PORT); SRC and "
                                                       "--out must be paths all workers share")
    p.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT_S, metavar="SECONDS",
                   help=f"give up on an unreachable --scheduler after this long, before the store is created "
                        f"(default {CONNECT_TIMEOUT_S:g})")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(run=run)


# flags that only some formats read: (flag, its argparse dest, the formats that read it, what the others use)
FORMAT_FLAGS = (
    ("--split", "split", FORMATS, "the split is the file itself: give it as SRC, e.g. train.npz"),
    ("--chunk-size", "chunk_size", FORMATS, "chunks hold whole sequences: use --sequences-per-chunk"),
    ("--length", "length", (temporal_npz.FORMAT,), "it cuts a Temporal Causal3DIdent chain into sequences"),
    ("--sequences-per-chunk", "sequences_per_chunk", (temporal_npz.FORMAT,), "use --chunk-size"),
)


def run(args: argparse.Namespace) -> int:
    """Import, then print what was done (bad values name their flags; a flag the format does not read is refused)."""
    for flag, dest, formats, instead in FORMAT_FLAGS:
        if getattr(args, dest) is not None and args.format not in formats:
            raise UserError(f"{flag} does not apply to --format {args.format} ({instead})")
    if args.format == temporal_npz.FORMAT:
        return run_temporal(args)
    with flag_names():
        report = import_published(args.src, args.out, args.format, split=args.split, workers=args.workers,
                                  scheduler=args.scheduler, overwrite=args.overwrite, progress=not args.no_progress,
                                  compression_level=args.compression_level, connect_timeout=args.connect_timeout,
                                  **given(args, "chunk_size"))
    if not report.imported:
        print(nothing_to_do(report.out, f"{report.n} images, {report.n_chunks} chunks"))
    else:
        print(summary(report))
    return 0


def given(args: argparse.Namespace, *dests: str) -> dict[str, object]:
    """The named options the command line gave (the others keep the API's defaults)."""
    return {dest: getattr(args, dest) for dest in dests if getattr(args, dest) is not None}


def nothing_to_do(out: str, what: str) -> str:
    """The line for a complete store of the same source and settings, as `ident3d render` says it."""
    return f"{out} is complete ({what}); nothing to do (--overwrite imports it again)"


def summary(report: ImportReport) -> str:
    """One line: chunks imported now (with the rate) and chunks that were already done."""
    rate = report.images / report.seconds if report.seconds else 0.0
    return (f"imported {len(report.imported)} chunks ({report.images} images) in {report.seconds:.1f} s "
            f"({rate:.1f} img/s); {len(report.skipped)} chunks were already done -> {report.out}")


def run_temporal(args: argparse.Namespace) -> int:
    """Import a Temporal Causal3DIdent file (read in this process, its chunks written by --workers or the
    --scheduler's workers)."""
    with flag_names():
        r = temporal_npz.import_temporal(args.src, args.out, overwrite=args.overwrite, progress=not args.no_progress,
                                         compression_level=args.compression_level, workers=args.workers,
                                         scheduler=args.scheduler, connect_timeout=args.connect_timeout,
                                         **given(args, "length", "sequences_per_chunk"))
    if not r.imported:
        print(nothing_to_do(r.out, f"{r.sequences} sequences x {r.length} frames, {r.n_chunks} chunks"))
        return 0
    left = f"; {r.dropped} frames at the end of the chain left out (fewer than --length)" if r.dropped else ""
    print(f"imported {len(r.imported)} chunks ({r.sequences} sequences x {r.length} frames) in {r.seconds:.1f} s; "
          f"{len(r.skipped)} chunks were already done{left} -> {r.out}")
    return 0
