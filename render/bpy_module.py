"""Import bpy (Blender as a Python module) once, the way every render module needs it: bpy puts its script
folders first on sys.path, and processes spawned later (Dask workers) inherit that order and would import the
scripts' ``bpy`` package instead of the module. Importing this module keeps those folders, but last."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import bpy  # noqa: F401  (must come before bmesh and mathutils, which it makes importable)


def _blender_paths_last() -> None:
    """Move Blender's script folders to the end of sys.path."""
    root = str(Path(bpy.__file__).parents[4])  # site-packages/bpy
    ours = [p for p in sys.path if p.startswith(root) or f"{os.sep}blender{os.sep}" in p]
    sys.path[:] = [p for p in sys.path if p not in ours] + ours


_blender_paths_last()
