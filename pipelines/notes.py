"""While a command runs, every ``ident3d.causal.errors.Note`` is printed as one 'ident3d CMD: note: ...' line on
stderr, each time it is raised, instead of Python's two-line warning; other warnings show as Python shows them."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ident3d.causal.errors import Note


@contextmanager
def notes_printed(command: str) -> Iterator[None]:
    """Print the Notes raised inside as 'ident3d ``command``: note: MESSAGE' lines."""
    def show(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        """A Note as a note line; any other warning as Python would."""
        if issubclass(category, Note):
            print(f"ident3d {command}: note: {message}", file=sys.stderr, flush=True)
        else:
            shown(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always", Note)
        shown = warnings.showwarning
        warnings.showwarning = show
        yield
