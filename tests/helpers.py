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


def render_tiny_store(out):
    """The 96-image, 32 px Causal3DIdent store (with a `hues` LT view) that training tests train on."""
    from render import render_store

    assert render_store(out, scene="causal3dident", n=96, settings={"resolution": 32, "samples": 4},
                        views="hues:hues", chunk_size=32, workers=2, progress=False).ok
    return out
