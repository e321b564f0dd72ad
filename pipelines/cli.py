"""The ``ident3d`` command: one subcommand per job, each a thin layer over a pipelines module."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from ident3d.causal.errors import UserError
from ident3d.pipelines import kinds

# subcommand -> its module in pipelines/; only the module of the command being run is imported, so `ident3d
# render` (and every Dask worker process, which re-imports the main script) does not pay for torch and the rest; each
# experiment kind (pipelines/kinds/) is a subcommand of its name
COMMANDS = {"demo": "demo", "sample": "sample", "scm": "scm", "render": "render", "show": "show", "check": "check",
            "train": "train", "evaluate": "evaluate", "experiment": "experiment_cmd", "dataset": "dataset",
            "probe": "probe", "import": "import_data", "export": "export_data",
            **{name: f"kinds.{name}" for name in kinds.names()}}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit code 2) that point to --help."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(commands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``ident3d`` parser with every subcommand, or only ``commands`` (their modules alone are imported)."""
    parser = _Parser(
        prog="ident3d",
        description="ident3d: sample latents from causal models, render them with Blender into "
                    "Zarr datasets, and measure which latents self-supervised learning recovers.",
        epilog="Run 'ident3d COMMAND --help' for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    for name in commands or COMMANDS:
        importlib.import_module(f"ident3d.pipelines.{COMMANDS[name]}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run a subcommand; user errors become one line on stderr and exit code 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = argv[:1] if argv and argv[0] in COMMANDS else None  # `ident3d --help` or a typo: build them all
    args = build_parser(chosen).parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except UserError as exc:
        print(f"ident3d {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # a command may say what was done and how to resume
        print(f"ident3d {args.command}: {str(exc) or 'interrupted'}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`ident3d ... | head`): stop quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 141


if __name__ == "__main__":
    sys.exit(main())
