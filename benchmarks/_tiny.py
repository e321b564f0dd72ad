"""The ``--tiny`` mode every script in benchmarks/ has (tests/test_benchmarks_tiny.py runs each one): toy sizes that
run in seconds on one CPU thread, every output in a fresh temporary folder (never ``results/``, ``docs/`` or
``runs/``). It measures nothing worth keeping; it shows the script still runs end to end against today's code.

A script declares its tiny sizes and its path options in one call::

    ap = argparse.ArgumentParser(...)
    ...
    tiny = add_tiny(ap, "16 px, 2 images")
    args = ap.parse_args(argv)
    tiny.apply(args, sizes={"n": 2, "resolution": 16}, paths=("out",))

With ``--tiny``, every option named in ``sizes`` that was left at its default takes its tiny value, and every path
option named in ``paths`` that was left at its default moves into the tiny folder (keeping its file name), so a
plain ``python benchmarks/NAME.py --tiny`` writes nothing into the checkout. An option given on the command line
keeps its value. A script that makes its own inputs at toy size (a store to read, a reference folder) asks for the
folder with ``inputs=True`` and writes them there. The folder is made with ``tempfile`` (``$TMPDIR`` decides where;
the test points it at its own temporary folder) and printed.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Tiny:
    """The ``--tiny`` flag of one script's parser, and what it changes."""

    parser: argparse.ArgumentParser
    script: str

    def apply(self, args: argparse.Namespace, sizes: Mapping[str, Any] | None = None,
              paths: Iterable[str] | Mapping[str, str] = ("out",), inputs: bool = False) -> Path | None:
        """With ``--tiny``: set each of ``sizes`` left at its default to its tiny value, and move each of ``paths``
        left at its default into a fresh temporary folder, under its default's file name (a mapping names the file
        of an option whose default is None). Returns that folder, made where an output moves into it or the script
        makes its own inputs there (``inputs``); None without ``--tiny`` or when neither is so."""
        if not args.tiny:
            return None
        for dest, value in (sizes or {}).items():
            if getattr(args, dest) == self.default(dest):
                setattr(args, dest, value)
        names = dict(paths) if isinstance(paths, Mapping) else dict.fromkeys(paths)
        moved = {dest: name for dest, name in names.items() if getattr(args, dest) == self.default(dest)}
        if not moved and not inputs:
            print("--tiny: toy sizes", flush=True)
            return None
        folder = Path(tempfile.mkdtemp(prefix=f"ident3d_tiny_{self.script}_"))
        for dest, name in moved.items():
            path = folder / (name or Path(self.default(dest)).name)
            convert = self.action(dest).type
            setattr(args, dest, convert(str(path)) if callable(convert) else str(path))
        print(f"--tiny: toy sizes, outputs under {folder}", flush=True)
        return folder

    def action(self, dest: str) -> argparse.Action:
        """The parser's action that stores ``dest``."""
        return next(a for a in self.parser._actions if a.dest == dest)

    def default(self, dest: str) -> Any:
        """The value an option left out takes: its default, converted by its ``type`` as argparse converts a
        string default."""
        action = self.action(dest)
        if isinstance(action.default, str) and callable(action.type):
            return action.type(action.default)
        return action.default


def add_tiny(parser: argparse.ArgumentParser, what: str) -> Tiny:
    """Add ``--tiny`` to ``parser``; ``what`` says in a few words what the tiny run does (its help text)."""
    parser.add_argument("--tiny", action="store_true",
                        help=f"toy sizes for a test ({what}); outputs left at their defaults go to a temporary folder")
    prog = Path(parser.prog or "")  # the script's file name when it runs as one (a test's main() call: anything)
    return Tiny(parser, prog.stem if prog.suffix == ".py" else "benchmark")
