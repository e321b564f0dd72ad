"""The ``ident3d`` command: one subcommand per job, each a thin layer over a pipelines module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from causal.errors import UserError
from pipelines import (
    check,
    compare,
    dataset,
    demo,
    evaluate,
    export_data,
    import_data,
    probe,
    render,
    sample,
    scm,
    show,
    synthetic,
    train,
)

SUBCOMMANDS = (demo, sample, scm, render, show, check, train, evaluate, compare, synthetic, dataset, probe, import_data,
               export_data)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit code 2) that point to --help."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ident3d",
        description="ident3d: sample latents from causal models, render them with Blender into "
                    "Zarr datasets, and measure which latents self-supervised learning recovers.",
        epilog="Run 'ident3d COMMAND --help' for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run a subcommand; user errors become one line on stderr and exit code 2."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except UserError as exc:
        print(f"ident3d {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # a command may say what was done and how to resume
        print(f"ident3d {args.command}: {str(exc) or 'interrupted'}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
