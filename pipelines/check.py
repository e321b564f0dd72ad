"""``ident3d check``: the command-line skin over ``ident3d.store.check`` (hold every per-row array against the store
format, decode every done chunk, report and repair)."""

from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from ident3d.store.check import check_store, describe, ranges, repair_store


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="decode every chunk of a store; --repair marks damaged chunks to be rendered again",
        description="Hold every per-row array the store format declares (images, latents, classes, views; a "
                    "multi-object store's masks, visibility, present and attempts; a sequence store's sequence, time "
                    "and interventions) against its declared dtype and shape, then decode it in every chunk marked "
                    "done and list the damaged ones (chunk, array, what is wrong: the decoder's error, a missing "
                    "chunk file, values no render writes, masks and visibility that disagree) and the chunks not "
                    "done yet. Exit code 0: no damage; 1: damaged chunks found (and, with --repair, repaired); 2: "
                    "not a readable store, or an array of another dtype, shape or row count (render the store again "
                    "with --overwrite). --repair clears the done flags of exactly the damaged chunks, deletes their "
                    "damaged chunk files and re-creates missing arrays; re-running the same `ident3d render` command "
                    "then renders exactly those chunks again.",
        epilog="examples:\n"
               "  ident3d check stores/c3d.zarr\n"
               "  ident3d check stores/c3d.zarr --repair && ident3d render ...   # the command that made the store",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", metavar="STORE", help="a store made by `ident3d render` (path or fsspec URL)")
    p.add_argument("--repair", action="store_true",
                   help="clear the done flags of the damaged chunks and delete their damaged chunk files")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check (and with --repair, repair) the store; 0 when nothing is damaged, 1 when something was."""
    def bar(ks: list[int]) -> tqdm:
        return tqdm(ks, unit="chunk", desc="check", disable=not args.progress, file=sys.stderr)

    report = check_store(args.store, progress=bar)
    for line in describe(report, repairing=args.repair):
        print(line)
    if report.ok:
        return 0
    if args.repair:
        fixed = repair_store(args.store, report)
        print(f"repaired: cleared the done flags of chunks {ranges(fixed)} and deleted their damaged chunk files; "
              "re-run the same `ident3d render` command to render exactly these chunks again")
    return 1
