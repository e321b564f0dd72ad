"""``ident3d export``: the command-line skin over ``ident3d.ingest.published_export.export_published`` (an ident3d store
-> a folder in the published 3DIdent or Causal3DIdent layout) and ``ident3d.ingest.temporal_npz.export_temporal`` (a
sequence store -> a Temporal Causal3DIdent .npz)."""

from __future__ import annotations

import argparse

from ident3d.ingest import temporal_npz
from ident3d.ingest.published import FORMATS, check_whole
from ident3d.ingest.published_export import export_published
from ident3d.pipelines.files import check_output_dir
from ident3d.pipelines.flags import flag_names


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``ident3d export``."""
    p = sub.add_parser(
        "export", help="export a store as a 3DIdent/Causal3DIdent folder (PNGs + numpy latents)",
        description="Write a complete store in the published layout so existing 3DIdent/Causal3DIdent code reads "
                    "it: lossless PNGs named as the papers' loaders expect, raw_latents.npy (the store's latents, "
                    "float32) and latents.npy (the same in scene units, by the scene's bindings); causal3dident "
                    "writes one images_K/, raw_latents_K.npy and latents_K.npy per class K. 3dident needs the 10 "
                    "3DIdent latents in order; causal3dident also needs classes. The folder appears only when it "
                    "is complete. --format temporal_causal3dident writes a sequence store as one CITRIS split file "
                    "(--out NAME.npz): its sequences joined into one chain, the step into each new sequence "
                    "recorded as an intervention on every factor.",
        epilog="examples:\n"
               "  ident3d export stores/3di.zarr --format 3dident --out exports/3dident/trainset\n"
               "  ident3d export stores/c3d.zarr --format causal3dident --out exports/causal3dident --overwrite\n"
               "  ident3d export stores/tc3d.zarr --format temporal_causal3dident --out exports/tc3d/train.npz",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", metavar="STORE", help="the store to export")
    p.add_argument("--format", required=True, choices=(*FORMATS, temporal_npz.FORMAT), help="the layout to write")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write (new or empty); for "
                                                              f"{temporal_npz.FORMAT} the .npz file")
    p.add_argument("--workers", type=int, default=None, help="threads encoding PNGs (default: one per core; "
                                                             f"{temporal_npz.FORMAT} writes no PNGs)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing folder (or .npz file)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Export, then print what was written (bad values name their flags)."""
    with flag_names():
        if args.workers is not None:
            check_whole(args.workers, "workers")
        if args.format == temporal_npz.FORMAT:
            path = temporal_npz.export_temporal(args.store, args.out, overwrite=args.overwrite)
            print(f"exported {args.store} -> {path}")
            return 0
        check_output_dir(args.out)
        report = export_published(args.store, args.out, args.format, overwrite=args.overwrite, workers=args.workers,
                                  progress=not args.no_progress)
    print(f"exported {report.images} images and {len(report.files)} latents files in {report.seconds:.1f} s "
          f"-> {report.out}")
    return 0
