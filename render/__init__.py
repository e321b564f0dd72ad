"""Rendering: scene descriptions (data), render settings, the Blender worker (render.blender) and the Zarr store.

Importing ``render`` does not import bpy; ``render.blender`` does.
"""

from render.scene import BUILTIN_SCENES, LATENT_NAMES, Scene, load_scene, pose
from render.settings import PRESETS, RenderSettings, render_settings

__all__ = [
    "BUILTIN_SCENES", "LATENT_NAMES", "PRESETS", "RenderSettings", "Scene", "load_scene", "pose", "render_settings",
]
