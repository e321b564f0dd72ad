"""Safe output files: refuse to clobber without --overwrite, write atomically via a temp file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from causal.errors import UserError


def check_output(path: str | Path, suffixes: tuple[str, ...], overwrite: bool) -> Path:
    """Validate an output path before any work is done; return it as a Path."""
    path = Path(path)
    if path.suffix.lower() not in suffixes:
        raise UserError(f"output {path} must end in {' or '.join(suffixes)}")
    if path.exists() and not overwrite:
        raise UserError(f"{path} already exists; pass --overwrite to replace it")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"cannot write {path}: folder {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise UserError(f"cannot write {path}: folder {parent} is not writable")
    return path


def write_atomic(path: Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp_path)`` then rename onto ``path``, so a failure never leaves half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent or ".")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
