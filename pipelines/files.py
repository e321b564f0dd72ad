"""Safe output files: refuse to clobber without --overwrite, write atomically via a temp file."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from ident3d.causal.errors import UserError
from ident3d.causal.yamlnum import load_yaml
from ident3d.pipelines.overrides import apply_overrides


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
    os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; outputs get the mode open() would give
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def current_umask() -> int:
    """The process umask (read by setting and restoring it: the only portable way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_output_dir(path: str | Path, flag: str = "--out") -> Path:
    """Validate an output folder before any work: not an existing file, and creatable (in its nearest existing
    ancestor a probe folder can be made and removed: as root, ``os.access`` says yes even where it is not so). A URL
    (``s3://bucket/x``, or what ``Path`` leaves of one, ``s3:/bucket/x``) is refused: these outputs (runs, cells,
    tables) are local folders; object storage is for stores."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]+:/", str(path)):
        raise UserError(f"{flag} {path}: this output is a local folder (object storage holds stores: ident3d render "
                        "--out s3://...); give a local folder and copy the results up when done")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file; choose a folder")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"cannot create {flag} {path}: {parent} is a file, not a folder; choose another path")
    try:
        Path(tempfile.mkdtemp(prefix=".ident3d-probe-", dir=parent)).rmdir()
    except OSError as exc:
        raise UserError(f"cannot create {flag} {path}: {parent} is not writable ({exc.strerror}); "
                        "choose a folder you can write to") from None
    return path


def read_yaml_config(path: str | Path, example: str, overrides: Sequence[str] = ()) -> object:
    """The parsed YAML of a config file (numbers read by ``ident3d.causal.yamlnum``: ``2e-3`` is a number), with the
    ``--set PATH=VALUE`` ``overrides`` applied (``ident3d.pipelines.overrides``); a missing file or bad YAML is a
    one-line error naming ``example``."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"config {path} not found; see {example} for an example")
    try:
        raw = load_yaml(p.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"config {path}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    return apply_overrides(raw, overrides)
