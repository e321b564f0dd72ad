"""The per-process Blender worker: build the scene once, then re-pose and render each sample with Cycles.

Importing this module imports bpy (Blender as a Python module); bpy state is global, so use one
BlenderRenderer per process.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

# isort: off
import bpy  # must come first: it makes bmesh and mathutils importable
import bmesh
from mathutils import Vector

# isort: on

from causal.errors import UserError
from render.meshes import class_mesh
from render.scene import Light, Pose, Scene, load_scene, pose, scene_from_dict
from render.settings import PRESETS, RenderSettings


def _blender_paths_last() -> None:
    """bpy puts its script folders first on sys.path; processes spawned later (Dask workers) inherit that
    order and would import the scripts' ``bpy`` package instead of the module. Keep them, but last."""
    root = str(Path(bpy.__file__).parents[4])  # site-packages/bpy
    ours = [p for p in sys.path if p.startswith(root) or f"{os.sep}blender{os.sep}" in p]
    sys.path[:] = [p for p in sys.path if p not in ours] + ours


_blender_paths_last()
GPU_BACKENDS = ("OPTIX", "CUDA", "HIP", "ONEAPI", "METAL")
SEED_MODULUS = 2**31  # cycles.seed is a signed 32-bit int
_ACTIVE: list[BlenderRenderer] = []  # the renderer whose scene bpy currently holds (bpy state is process-global)


@contextlib.contextmanager
def quiet_stdout(enabled: bool = True) -> Iterator[None]:
    """Silence C-level stdout (Blender's per-render log lines) for the duration of the block."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def select_device(want: str) -> str:
    """'CPU' or 'GPU' for cycles.device; 'auto' takes the first GPU backend Cycles finds, else the CPU."""
    if want == "cpu":
        return "CPU"
    prefs = bpy.context.preferences.addons["cycles"].preferences
    for backend in GPU_BACKENDS:
        try:
            prefs.compute_device_type = backend
        except TypeError:  # backend not compiled into this build
            continue
        prefs.refresh_devices()
        if any(d.type == backend for d in prefs.devices):
            for d in prefs.devices:
                d.use = d.type == backend
            return "GPU"
    if want == "gpu":
        raise UserError("render device 'gpu' asked for, but Cycles finds no GPU; use --device cpu or auto")
    return "CPU"


def _aim(obj: bpy.types.Object, target: Sequence[float]) -> None:
    """Point the object's -Z axis (cameras, spot and area lights) at a world point, +Y up."""
    direction = Vector(target) - obj.location
    obj.rotation_euler = direction.to_track_quat("-Z", "Y").to_euler()


def _material(name: str, roughness: float, specular: float) -> tuple[bpy.types.Material, bpy.types.NodeSocket]:
    """A rough Principled BSDF material; returns it and its Base Color socket (set per sample)."""
    mat = bpy.data.materials.new(name)
    if mat.node_tree is None:  # Blender 5 always gives new materials a node tree (use_nodes is deprecated)
        mat.use_nodes = True
    bsdf = next(n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED")
    bsdf.inputs["Roughness"].default_value = roughness
    bsdf.inputs["Specular IOR Level"].default_value = specular
    return mat, bsdf.inputs["Base Color"]


class BlenderRenderer:
    """Builds ``scene`` once in this process (all class meshes loaded, one shown per sample) and renders latents."""

    def __init__(self, scene: Scene, settings: RenderSettings | None = None, quiet: bool = True) -> None:
        self.scene = scene
        self.settings = settings or PRESETS["fast"]
        self.quiet = quiet
        self._tmp = tempfile.mkdtemp(prefix="ident3d_render_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self._png = os.path.join(self._tmp, "frame.png")
        with quiet_stdout(quiet):
            self._build()

    def _ensure_active(self) -> None:
        """Rebuild this renderer's scene if another renderer replaced the bpy state since."""
        if not _ACTIVE or _ACTIVE[0] is not self:
            with quiet_stdout(self.quiet):
                self._build()

    # ---- building (once) -------------------------------------------------------------------------------------
    def _build(self) -> None:
        """Empty factory scene, then render settings, camera, ground, lights and every class's object."""
        _ACTIVE.clear()
        bpy.ops.wm.read_factory_settings(use_empty=True)
        self._bl = bpy.context.scene
        self._configure()
        self._build_camera()
        self._build_ground()
        self._lights = {lt.name: self._build_light(lt) for lt in self.scene.lights}
        mat, self._object_color = _material("object", self.scene.material.roughness, self.scene.material.specular)
        self._objects = []
        for cls in self.scene.classes:
            mesh = class_mesh(cls.mesh, cls.name, self.scene.extent * cls.scale)
            mesh.materials.append(mat)
            obj = bpy.data.objects.new(cls.name, mesh)
            obj.rotation_mode = "XYZ"
            obj.hide_render = True
            self._bl.collection.objects.link(obj)
            self._objects.append(obj)
        _ACTIVE.append(self)

    def _configure(self) -> None:
        """Cycles, resolution, samples, denoiser, bounces, threads, device, colour management, output file."""
        s, sc = self.settings, self._bl
        sc.render.engine = "CYCLES"
        cy = sc.cycles
        self.device = select_device(s.device)
        cy.device = self.device
        cy.samples = s.samples
        cy.use_adaptive_sampling = False  # fixed sample count, like the original
        cy.use_denoising = s.denoise
        cy.denoiser = "OPENIMAGEDENOISE"
        cy.denoising_prefilter = s.denoise_prefilter
        cy.denoising_quality = "HIGH"
        cy.denoising_use_gpu = self.device == "GPU"
        cy.max_bounces = s.max_bounces
        for key in ("diffuse_bounces", "glossy_bounces", "transmission_bounces", "volume_bounces"):
            setattr(cy, key, min(getattr(cy, key), s.max_bounces))
        cy.use_animated_seed = False
        r = sc.render
        r.resolution_x = r.resolution_y = s.resolution
        r.resolution_percentage = 100
        threads = s.threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
        r.threads_mode = "FIXED" if threads else "AUTO"
        if threads:
            r.threads = threads
        r.film_transparent = False
        r.dither_intensity = 0.0  # no noise added when quantising to 8 bit
        r.use_compositing = False
        r.use_sequencer = False
        r.image_settings.file_format = "PNG"
        r.image_settings.color_mode = "RGB"
        r.image_settings.color_depth = "8"
        r.image_settings.compression = 0
        r.filepath = self._png
        sc.view_settings.view_transform = self.scene.view_transform
        sc.view_settings.look = "None"
        sc.view_settings.exposure = self.scene.exposure
        sc.view_settings.gamma = 1.0
        world = bpy.data.worlds.new("world")
        world.color = self.scene.world_color
        if world.node_tree is not None:
            bg = next((n for n in world.node_tree.nodes if n.type == "BACKGROUND"), None)
            if bg is not None:
                bg.inputs["Color"].default_value = (*self.scene.world_color, 1.0)
        sc.world = world

    def _build_camera(self) -> None:
        """Perspective camera at its location, aimed at look_at."""
        c = self.scene.camera
        cam = bpy.data.cameras.new("camera")
        cam.lens = c.lens_mm
        cam.sensor_width = c.sensor_mm
        cam.sensor_fit = "AUTO"
        cam.clip_end = 10_000.0
        obj = bpy.data.objects.new("camera", cam)
        obj.location = c.location
        self._bl.collection.objects.link(obj)
        _aim(obj, c.look_at)
        self._bl.camera = obj

    def _build_ground(self) -> None:
        """A large square plane at z = z_extent * s with its own rough material."""
        g = self.scene.ground
        mesh = bpy.data.meshes.new("ground")
        bm = bmesh.new()
        bmesh.ops.create_grid(bm, x_segments=1, y_segments=1, size=g.size / 2)
        bm.to_mesh(mesh)
        bm.free()
        mat, self._ground_color = _material("ground", g.roughness, 0.0)
        mesh.materials.append(mat)
        obj = bpy.data.objects.new("ground", mesh)
        obj.location = (0.0, 0.0, g.z_extent * self.scene.extent)
        self._bl.collection.objects.link(obj)

    def _build_light(self, lt: Light) -> bpy.types.Object:
        """One lamp from its description (pose-dependent values are set per sample)."""
        data = bpy.data.lights.new(lt.name, lt.type)
        data.energy = lt.energy
        if lt.type == "SPOT":
            data.spot_size = math.radians(lt.spot_size_deg)
            data.spot_blend = lt.spot_blend
            data.shadow_soft_size = lt.size
        elif lt.type == "POINT":
            data.shadow_soft_size = lt.size
        elif lt.type == "AREA":
            data.shape = "SQUARE"
            data.size = lt.size
        elif lt.type == "SUN":
            data.angle = math.radians(lt.angle_deg)
        obj = bpy.data.objects.new(lt.name, data)
        obj.location = lt.location
        obj.rotation_euler = tuple(math.radians(a) for a in lt.rotation_deg)
        self._bl.collection.objects.link(obj)
        if lt.aim == "origin":
            _aim(obj, (0.0, 0.0, 0.0))
        return obj

    # ---- per sample ------------------------------------------------------------------------------------------
    def apply(self, p: Pose, seed: int) -> None:
        """Show the sample's class, place and colour it, move/colour the lights, set the sampling seed."""
        self._ensure_active()
        for i, obj in enumerate(self._objects):
            obj.hide_render = i != p.class_index
        obj = self._objects[p.class_index]
        obj.location = p.location
        obj.rotation_euler = p.rotation
        self._object_color.default_value = (*p.object_rgb, 1.0)
        self._ground_color.default_value = (*p.ground_rgb, 1.0)
        for lt in self.scene.lights:
            lp, lobj = p.lights[lt.name], self._lights[lt.name]
            lobj.location = lp.location
            lobj.data.color = lp.rgb
            lobj.data.energy = lp.energy
            if lt.aim == "object":
                _aim(lobj, p.location)
            elif lt.aim == "origin":
                _aim(lobj, (0.0, 0.0, 0.0))
        self._bl.cycles.seed = int(seed) % SEED_MODULUS

    def render_pose(self, p: Pose, seed: int) -> np.ndarray:
        """Render one posed sample; uint8 (H, W, 3), top row first."""
        self.apply(p, seed)
        with quiet_stdout(self.quiet):
            bpy.ops.render.render(write_still=True)
        with Image.open(self._png) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()

    def render(self, raw: Sequence[float], class_index: int = 0, seed: int = 0) -> np.ndarray:
        """Render one sample from its raw latents (ordered as scene.latents)."""
        return self.render_pose(pose(self.scene, raw, class_index), seed)

    def render_batch(
        self, latents: np.ndarray, classes: np.ndarray | None = None, seeds: np.ndarray | None = None
    ) -> np.ndarray:
        """Render N samples: latents (N, D) raw, classes (N,) or None (class 0), seeds (N,) -> uint8 (N, H, W, 3)."""
        latents = np.asarray(latents, dtype=np.float32)
        n = latents.shape[0]
        classes = np.zeros(n, dtype=np.int64) if classes is None else np.asarray(classes, dtype=np.int64)
        seeds = np.arange(n, dtype=np.uint64) if seeds is None else np.asarray(seeds, dtype=np.uint64)
        if classes.shape != (n,) or seeds.shape != (n,):
            raise UserError(f"render_batch: classes {classes.shape} and seeds {seeds.shape} must have shape ({n},)")
        res = self.settings.resolution
        out = np.empty((n, res, res, 3), dtype=np.uint8)
        for i in range(n):
            out[i] = self.render(latents[i].tolist(), int(classes[i]), int(seeds[i]))
        return out

    def close(self) -> None:
        """Remove the temporary output file and folder."""
        for name in os.listdir(self._tmp):
            Path(self._tmp, name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            os.rmdir(self._tmp)


def build_renderer(
    scene: Scene | Mapping[str, Any] | str, settings: RenderSettings | Mapping[str, Any] | None = None
) -> BlenderRenderer:
    """A renderer from plain data (as shipped to Dask workers): a Scene, its dict form or a scene name/path."""
    if isinstance(scene, str):
        scene = load_scene(scene)
    elif not isinstance(scene, Scene):
        scene = scene_from_dict(scene)
    if settings is not None and not isinstance(settings, RenderSettings):
        settings = RenderSettings(**settings)
    return BlenderRenderer(scene, settings)
