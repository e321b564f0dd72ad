"""Rendering: scene descriptions (data), render settings, Blender (render.blender), the render worker
(render.worker: each process's renderer and the chunk task), the Dask driver (render.driver: run, submit, collect),
the job's data (render.job), and the Python API ``render_store`` / ``plan_render`` that ``ident3d render`` wraps.

Importing ``render`` does not import bpy; only the workers' ``ident3d.render.blender`` does.
"""

from ident3d.render.api import parse_views, plan_render, render_store
from ident3d.render.driver import default_workers
from ident3d.render.job import RenderPlan, RenderReport
from ident3d.render.scene import BUILTIN_SCENES, LATENT_NAMES, Scene, load_scene, pose
from ident3d.render.settings import PRESETS, RenderSettings, render_settings
from ident3d.render.worker import cycles_seeds

__all__ = [
    "BUILTIN_SCENES", "LATENT_NAMES", "PRESETS", "RenderPlan", "RenderReport", "RenderSettings", "Scene",
    "cycles_seeds", "default_workers", "load_scene", "parse_views", "plan_render", "pose", "render_settings",
    "render_store",
]
