"""Import bpy (Blender as a Python module) once, the way every render module needs it: bpy puts its script
folders first on sys.path, and processes spawned later (Dask workers) inherit that order and would import the
scripts' ``bpy`` package instead of the module. Importing this module keeps those folders, but last.

The thread that imports bpy becomes Blender's main thread for the life of the process, and Blender's exit has to
run in that thread too: see :func:`exit_blender`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ident3d.render.settings import check_blender

check_blender()  # a Python without bpy (3.12): one line instead of an ImportError in a worker's traceback

import bpy  # noqa: E402, F401  (must come before bmesh and mathutils, which it makes importable)

# bpy (module build) keeps this capsule in a few modules' namespaces (bpy.types, _bpy); when the last reference
# goes, its destructor runs Blender's exit (main_python_exit -> WM_exit_ex), in whichever thread drops it.
EXIT_SINGLETON = "_bpy_detect_exit_singleton"


def _blender_paths_last() -> None:
    """Move Blender's script folders to the end of sys.path."""
    root = str(Path(bpy.__file__).parents[4])  # site-packages/bpy
    ours = [p for p in sys.path if p.startswith(root) or f"{os.sep}blender{os.sep}" in p]
    sys.path[:] = [p for p in sys.path if p not in ours] + ours


def exit_blender() -> None:
    """Run Blender's own exit now, in the calling thread, which must be the thread that imported bpy; bpy is
    unusable afterwards. For a process whose bpy was imported off the main thread (a Dask worker's task thread).

    Why: bpy records its importing thread as Blender's main thread, and Blender's context hides the window and
    screen from every other thread (``CTX_wm_window`` returns NULL off the main thread). Left alone, Blender's exit
    runs when Python's finalisation clears the capsule, in the process's main thread: a Dask worker stopped with
    SIGTERM then died with signal 11 in ``Py_FinalizeEx -> capsule_dealloc -> main_python_exit -> WM_exit_ex ->
    ED_screen_exit -> ED_area_exit -> ED_region_exit -> WM_event_modal_handler_region_replace`` (the NULL window),
    leaving its Blender session folder (/tmp/blender_*) behind. Dropping every reference to the capsule here runs
    that same exit where the window is visible; the caller should then let this thread end (its thread-local
    Blender data is freed when it does, else Blender reports unfreed memory blocks at exit)."""
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if type(namespace) is dict:
            namespace.pop(EXIT_SINGLETON, None)


_blender_paths_last()
