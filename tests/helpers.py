"""Helpers shared by the test modules (imported as ``helpers``: pytest puts tests/ on sys.path)."""

import hashlib
from pathlib import Path


def tree_digest(path) -> str:
    """sha256 over every file's relative path and bytes below ``path``: equal digests mean nothing changed."""
    h = hashlib.sha256()
    for p in sorted(Path(path).rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + p.read_bytes())
    return h.hexdigest()
