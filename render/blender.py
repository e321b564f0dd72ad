"""The per-process Blender worker: build the scene once, then re-pose and render each sample with Cycles.

Importing this module imports bpy (Blender as a Python module); bpy state is global, so use one
BlenderRenderer per process.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

# isort: off
import ident3d.render.bpy_module  # noqa: F401  (bpy, with Blender's script folders last on sys.path)
import bpy
import bmesh
from mathutils import Vector

# isort: on

from ident3d.causal.errors import UserError
from ident3d.render.mechanisms import view_scene
from ident3d.render.meshes import class_mesh
from ident3d.render.scene import Light, Material, Pose, Scene, load_scene, pose, scene_from_dict
from ident3d.render.settings import PRESETS, RenderSettings

GPU_BACKENDS = ("OPTIX", "CUDA", "HIP", "ONEAPI", "METAL")
SEED_MODULUS = 2**31  # cycles.seed is a signed 32-bit int
SEQUENCE_FRAMES = 8  # frames per animation render (benchmarks/render_profile.py: most of the gain, short Ctrl-C wait)
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


@contextlib.contextmanager
def _interrupt_between_sequences() -> Iterator[Callable[[], bool]]:
    """In the main thread, Ctrl-C during a render only sets a flag (a KeyboardInterrupt raised inside Blender's
    frame handler would be printed and swallowed by Blender); yields a function saying whether it was pressed."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    pressed: list[bool] = []
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:  # Dask workers ignore SIGINT: keep it that way
        yield lambda: False
        return
    signal.signal(signal.SIGINT, lambda *_: pressed.append(True))
    try:
        yield lambda: bool(pressed)
    finally:
        signal.signal(signal.SIGINT, previous)


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


def _link(nt: bpy.types.NodeTree, out: bpy.types.NodeSocket, inp: bpy.types.NodeSocket) -> None:
    """Connect two sockets of a node tree."""
    nt.links.new(out, inp)


def _fresnel(nt: bpy.types.NodeTree, ior: float) -> bpy.types.NodeSocket:
    """A Fresnel node's factor output for a fixed IOR."""
    node = nt.nodes.new("ShaderNodeFresnel")
    node.inputs["IOR"].default_value = ior
    return node.outputs["Fac"]


def _rubber_inner(nt: bpy.types.NodeTree, m: Material, color: bpy.types.NodeSocket) -> bpy.types.NodeSocket:
    """The coloured part of the rubber: Mix(Fresnel(ior + inner_ior_add), Diffuse(colour), Sheen(colour))."""
    diffuse = nt.nodes.new("ShaderNodeBsdfDiffuse")
    diffuse.inputs["Roughness"].default_value = m.diffuse_roughness
    sheen = nt.nodes.new("ShaderNodeBsdfSheen")
    sheen.distribution = m.sheen_distribution  # ASHIKHMIN: Blender's old Velvet BSDF
    sheen.inputs["Roughness"].default_value = m.sheen_roughness
    _link(nt, color, diffuse.inputs["Color"])
    _link(nt, color, sheen.inputs["Color"])
    mix = nt.nodes.new("ShaderNodeMixShader")
    _link(nt, _fresnel(nt, m.ior + m.inner_ior_add), mix.inputs[0])
    _link(nt, diffuse.outputs[0], mix.inputs[1])
    _link(nt, sheen.outputs[0], mix.inputs[2])
    return mix.outputs[0]


def _glossy(nt: bpy.types.NodeTree, m: Material) -> bpy.types.NodeSocket:
    """The rubber's grey glossy coat, roughness = m.roughness ** glossy_roughness_power."""
    glossy = nt.nodes.new("ShaderNodeBsdfGlossy")
    glossy.distribution = m.glossy_distribution
    glossy.inputs["Color"].default_value = (m.glossy_value, m.glossy_value, m.glossy_value, 1.0)
    glossy.inputs["Roughness"].default_value = m.roughness**m.glossy_roughness_power
    return glossy.outputs[0]


def _rubber(nt: bpy.types.NodeTree, m: Material, color: bpy.types.NodeSocket) -> bpy.types.NodeSocket:
    """CLEVR's "Rubber" (see render.scene.Material): Mix(Fresnel(ior), inner, Glossy), inner = Mix(Fresnel(ior + 0.2),
    Diffuse(colour), Sheen(colour)); its shader output."""
    out = nt.nodes.new("ShaderNodeMixShader")
    _link(nt, _fresnel(nt, m.ior), out.inputs[0])
    _link(nt, _rubber_inner(nt, m, color), out.inputs[1])
    _link(nt, _glossy(nt, m), out.inputs[2])
    return out.outputs[0]


def _metallic(nt: bpy.types.NodeTree, m: Material, color: bpy.types.NodeSocket) -> bpy.types.NodeSocket:
    """A metal: Principled BSDF of metallic 1, base colour the colour, roughness ``m.roughness``; its shader output."""
    bsdf = nt.nodes.new("ShaderNodeBsdfPrincipled")
    bsdf.inputs["Metallic"].default_value = 1.0
    bsdf.inputs["Roughness"].default_value = m.roughness
    _link(nt, color, bsdf.inputs["Base Color"])
    return bsdf.outputs[0]


def _surface(name: str, m: Material) -> tuple[bpy.types.Material, bpy.types.NodeSocket]:
    """A material of ``m``'s kind (rubber or metallic); returns it and the colour socket set per sample."""
    mat = bpy.data.materials.new(name)
    if mat.node_tree is None:  # Blender 5 always gives new materials a node tree (use_nodes is deprecated)
        mat.use_nodes = True
    nt = mat.node_tree
    for node in list(nt.nodes):
        if node.type != "OUTPUT_MATERIAL":
            nt.nodes.remove(node)
    output = next(n for n in nt.nodes if n.type == "OUTPUT_MATERIAL")
    color = nt.nodes.new("ShaderNodeRGB").outputs["Color"]  # channels > 1 pass through (hue_mode 'original')
    shader = (_metallic if m.kind == "metallic" else _rubber)(nt, m, color)
    _link(nt, shader, output.inputs["Surface"])
    return mat, color


class BlenderRenderer:
    """Builds ``scene`` once in this process (all class meshes loaded, one shown per sample) and renders latents.

    ``threads``: Cycles threads on the CPU (0: ``settings.threads``, else $OMP_NUM_THREADS, else all cores); a GPU
    device ignores it. ``masks=False`` leaves out a multi-object scene's object index pass (what masks cost is
    measured against that: benchmarks/mask_cost.py). A batch renders as frame sequences in one Cycles session with
    persistent render data (the engine, BVH and denoiser are set up once per sequence, not per image): see
    ``render_batch``.
    """

    def __init__(self, scene: Scene, settings: RenderSettings | None = None, quiet: bool = True,
                 threads: int = 0, masks: bool = True) -> None:
        self.scene = self._built = scene  # scene: what renders now (a view's mechanism staged on the built one)
        self._masks = masks
        self.settings = settings or PRESETS["fast"]
        self.quiet = quiet
        self.threads = int(threads or self.settings.threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0))
        self._tmp = tempfile.mkdtemp(prefix="ident3d_render_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self._png = os.path.join(self._tmp, "frame.png")
        self._frames: list[tuple[Pose, int]] = []  # the sequence being rendered: (pose, seed) per frame
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
        self._materials: dict[tuple[str, Material], tuple[bpy.types.Material, bpy.types.NodeSocket]] = {}
        mat, self._object_color = self._material("object")
        self._objects = []
        for cls in self.scene.classes:
            mesh = class_mesh(cls.mesh, cls.name, cls.mesh_size(self.scene.extent), cls.yaw_deg, cls.pivot)
            mesh.materials.append(mat)
            obj = bpy.data.objects.new(cls.name, mesh)
            obj.rotation_mode = "XYZ"
            obj.hide_render = True
            self._bl.collection.objects.link(obj)
            self._objects.append(obj)
        self._slots: list[list[bpy.types.Object]] = []  # per object slot, one object per class (sharing its mesh)
        self._slot_colors: list[bpy.types.NodeSocket] = []
        if self.scene.objects is not None:
            self._build_slots()
        _ACTIVE.append(self)

    def _build_slots(self) -> None:
        """Object slots: per slot, one object per class sharing the class's mesh, with the slot's own material
        (linked to the object) and pass index k + 1; the object index pass goes to an EXR per frame (masks)."""
        for k in range(self.scene.slots):
            mat, color = self._material(f"object{k}")
            objs = []
            for base in self._objects:
                obj = bpy.data.objects.new(f"{base.name}.{k}", base.data)
                obj.rotation_mode = "XYZ"
                obj.hide_render = True
                obj.pass_index = k + 1
                self._bl.collection.objects.link(obj)
                obj.material_slots[0].link = "OBJECT"
                obj.material_slots[0].material = mat
                objs.append(obj)
            self._slots.append(objs)
            self._slot_colors.append(color)
        if self._masks:
            self._index_pass()

    def _material(self, name: str) -> tuple[bpy.types.Material, bpy.types.NodeSocket]:
        """Object material ``name`` (one per slot) of the current scene's material, built once per scene build."""
        key = (name, self.scene.material)
        if key not in self._materials:
            self._materials[key] = _surface(name, self.scene.material)
        return self._materials[key]

    def stage(self, mechanism: Mapping[str, Any] | None) -> None:
        """Render from now on with a view's ``mechanism`` (``ident3d.render.mechanisms``) applied to the scene this
        renderer was built with; None: that scene again. Material, camera and lamps change in place (no rebuild)."""
        scene = view_scene(self._built, mechanism)
        if scene == self.scene:
            return
        self.scene = scene
        if _ACTIVE and _ACTIVE[0] is self:  # else the next render rebuilds from self.scene (_ensure_active)
            self._place_camera()
            self._dress_objects()

    def _dress_objects(self) -> None:
        """Give every object (each class's, each slot's) the current scene's material and use its colour sockets."""
        mat, self._object_color = self._material("object")
        for obj in self._objects:
            obj.data.materials[0] = mat
        for k, objs in enumerate(self._slots):
            mat, self._slot_colors[k] = self._material(f"object{k}")
            for obj in objs:
                obj.material_slots[0].material = mat

    def _index_pass(self) -> None:
        """Cycles' object index pass (first sample of each pixel: not anti-aliased), written by the compositor as a
        32-bit float EXR per frame next to the image; the image itself passes through unchanged."""
        self._bl.view_layers[0].use_pass_object_index = True
        tree = bpy.data.node_groups.new("masks", "CompositorNodeTree")
        layers = tree.nodes.new("CompositorNodeRLayers")
        tree.interface.new_socket("Image", in_out="OUTPUT", socket_type="NodeSocketColor")
        _link(tree, layers.outputs["Image"], tree.nodes.new("NodeGroupOutput").inputs[0])
        out = tree.nodes.new("CompositorNodeOutputFile")
        out.file_output_items.new("FLOAT", "index")
        out.directory, out.file_name = self._tmp, "mask_"
        f = out.format
        f.media_type, f.file_format, f.color_mode, f.color_depth, f.exr_codec = "IMAGE", "OPEN_EXR", "BW", "32", "NONE"
        _link(tree, layers.outputs["Object Index"], out.inputs[0])
        self._bl.compositing_node_group = tree
        self._bl.render.use_compositing = True

    def _configure(self) -> None:
        """Cycles, resolution, samples, sampling knobs, denoiser, bounces, threads, device, colour management, output
        file."""
        s, sc = self.settings, self._bl
        sc.render.engine = "CYCLES"
        cy = sc.cycles
        self.device = select_device(s.device)
        cy.device = self.device
        cy.samples = s.samples
        cy.use_adaptive_sampling = s.adaptive_sampling  # default off: a fixed sample count, like the original
        cy.adaptive_threshold = s.adaptive_threshold  # these two only act with adaptive sampling on
        cy.adaptive_min_samples = s.adaptive_min_samples
        cy.use_light_tree = s.light_tree  # default off: the original's lights are sampled without the light tree
        # Blender 5.0's default. 5.3's default (AUTOMATIC, blue noise) put every image as far from the original
        # renders as another Cycles seed is (benchmarks/fidelity_3dident.py: 46.7 dB PSNR, silhouette IoU 0.981);
        # with this pattern 5.3 gives 5.0's 65.5 dB and 0.999 (results/fidelity_3dident_bpy53.json)
        cy.sampling_pattern = "TABULATED_SOBOL"
        cy.pixel_filter_type = "BLACKMAN_HARRIS"  # the original's pixel filter
        cy.filter_width = s.filter_width  # default 1.5 px, the original's
        cy.sample_clamp_direct = 0.0  # no clamping
        cy.sample_clamp_indirect = 0.0
        cy.use_denoising = s.denoise
        cy.denoiser = "OPENIMAGEDENOISE"
        cy.denoising_prefilter = s.denoise_prefilter
        cy.denoising_quality = s.denoise_quality
        cy.denoising_use_gpu = self.device == "GPU"
        cy.max_bounces = s.max_bounces
        for key in ("diffuse_bounces", "glossy_bounces", "transmission_bounces", "volume_bounces"):
            setattr(cy, key, min(getattr(cy, key), s.max_bounces))
        cy.use_animated_seed = False
        cy.use_auto_tile = True  # Blender's default; the default 2048 px tile holds any image we render whole
        cy.tile_size = s.tile_size
        r = sc.render
        r.resolution_x = r.resolution_y = s.resolution
        r.resolution_percentage = 100
        fixed = self.threads > 0 and self.device == "CPU"  # the CPU split; a GPU device picks its own host threads
        r.threads_mode = "FIXED" if fixed else "AUTO"
        if fixed:
            r.threads = self.threads
        r.use_persistent_data = True  # keep the Cycles session (kernels, BVH, denoiser) across frames and renders
        r.film_transparent = False
        r.dither_intensity = 0.0  # no noise added when quantising to 8 bit
        r.use_compositing = False
        r.use_sequencer = False
        r.image_settings.file_format = "PNG"
        r.image_settings.color_mode = "RGB"
        r.image_settings.color_depth = "8"
        r.image_settings.compression = 0
        r.use_file_extension = True
        r.use_overwrite = True
        r.use_placeholder = False
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
        """The perspective camera, placed as the scene says (``_place_camera``)."""
        cam = bpy.data.cameras.new("camera")
        cam.clip_end = 10_000.0
        obj = bpy.data.objects.new("camera", cam)
        obj.rotation_mode = "XYZ"
        self._bl.collection.objects.link(obj)
        self._bl.camera = obj
        self._place_camera()

    def _place_camera(self) -> None:
        """The camera's lens and sensor, at its location, turned by its Euler rotation or aimed at look_at."""
        c, obj = self.scene.camera, self._bl.camera
        obj.data.lens = c.lens_mm
        obj.data.sensor_width = c.sensor_mm
        obj.data.sensor_fit = c.sensor_fit
        obj.location = c.location
        if c.rotation_rad is not None:
            obj.rotation_euler = c.rotation_rad
        else:
            _aim(obj, c.look_at)

    def _build_ground(self) -> None:
        """A large square plane at height z with its own rubber material."""
        g = self.scene.ground
        mesh = bpy.data.meshes.new("ground")
        bm = bmesh.new()
        bmesh.ops.create_grid(bm, x_segments=1, y_segments=1, size=g.size / 2)
        bm.to_mesh(mesh)
        bm.free()
        mat, self._ground_color = _surface("ground", g.material)
        mesh.materials.append(mat)
        obj = bpy.data.objects.new("ground", mesh)
        obj.location = (0.0, 0.0, g.z)
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
    def apply(self, p: Pose, seed: int, object_visible: bool = True) -> None:
        """Show the sample's class, place and colour it, move/colour the lights, set the sampling seed.

        ``object_visible=False`` hides the object from the camera only: it still casts its shadow.
        """
        self._ensure_active()
        if self._slots:
            self._apply_slots(p, object_visible)
        else:
            for i, obj in enumerate(self._objects):
                obj.hide_render = i != p.class_index
            obj = self._objects[p.class_index]
            obj.visible_camera = object_visible
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

    def _apply_slots(self, p: Pose, object_visible: bool) -> None:
        """Each present slot shows its class's object, placed, turned and coloured; absent slots are hidden."""
        for objs, color, o in zip(self._slots, self._slot_colors, p.objects, strict=True):
            for i, obj in enumerate(objs):
                obj.hide_render = not (o.present and i == o.class_index)
            obj = objs[o.class_index]
            obj.visible_camera = object_visible
            obj.location = o.location
            obj.rotation_euler = o.rotation
            color.default_value = (*o.rgb, 1.0)

    def render_pose(self, p: Pose, seed: int, object_visible: bool = True) -> np.ndarray:
        """Render one posed sample; uint8 (H, W, 3), top row first (object_visible: see apply)."""
        self.apply(p, seed, object_visible)
        with quiet_stdout(self.quiet):
            bpy.ops.render.render(write_still=True)
        with Image.open(self._png) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()

    def render(self, raw: Sequence[float], class_index: int = 0, seed: int = 0) -> np.ndarray:
        """Render one sample from its raw latents (ordered as scene.latents)."""
        return self.render_pose(pose(self.scene, raw, class_index, self.settings.hue_mode), seed)

    def render_batch(
        self, latents: np.ndarray, classes: np.ndarray | None = None, seeds: np.ndarray | None = None
    ) -> np.ndarray:
        """Render N samples: latents (N, D) raw, classes (N,) or None (class 0), seeds (N,) -> uint8 (N, H, W, 3).

        See :meth:`render_batch_masks`, whose images these are."""
        return self.render_batch_masks(latents, classes, seeds)[0]

    def render_batch_masks(
        self, latents: np.ndarray, classes: np.ndarray | None = None, seeds: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Render N samples: images uint8 (N, H, W, 3) and, for a scene with object slots, masks uint8 (N, H, W)
        from the object index pass (0: background, k + 1: slot k's object), else None.

        Every pose is computed (and checked) first; then the batch renders as sequences of up to
        ``SEQUENCE_FRAMES`` frames, each one animation render whose frame handler poses frame i. Pixels equal
        ``render_pose``'s image by image (tested); Ctrl-C in the main thread stops between sequences.
        """
        latents = np.asarray(latents, dtype=np.float32)
        n = latents.shape[0]
        classes = np.zeros(n, dtype=np.int64) if classes is None else np.asarray(classes, dtype=np.int64)
        seeds = np.arange(n, dtype=np.uint64) if seeds is None else np.asarray(seeds, dtype=np.uint64)
        if classes.shape != (n,) or seeds.shape != (n,):
            raise UserError(f"render_batch: classes {classes.shape} and seeds {seeds.shape} must have shape ({n},)")
        frames = [(pose(self.scene, latents[i].tolist(), int(classes[i]), self.settings.hue_mode), int(seeds[i]))
                  for i in range(n)]
        res = self.settings.resolution
        out = np.empty((n, res, res, 3), dtype=np.uint8)
        masks = np.empty((n, res, res), dtype=np.uint8) if self._slots and self._masks else None
        with _interrupt_between_sequences() as interrupted:
            for start in range(0, n, SEQUENCE_FRAMES):
                images, seq_masks = self._render_sequence(frames[start:start + SEQUENCE_FRAMES])
                out[start:start + SEQUENCE_FRAMES] = images
                if masks is not None:
                    masks[start:start + SEQUENCE_FRAMES] = seq_masks
                if interrupted():
                    raise KeyboardInterrupt
        return out, masks

    def render_sequence(self, frames: Sequence[tuple[Pose, int]]) -> np.ndarray:
        """Render (pose, seed) frames as one animation render: uint8 (len(frames), H, W, 3), top row first."""
        return self._render_sequence(frames)[0]

    def _render_sequence(self, frames: Sequence[tuple[Pose, int]]) -> tuple[np.ndarray, np.ndarray | None]:
        """Images of ``render_sequence`` and, with object slots, the masks (len(frames), H, W) uint8, top row first."""
        self._ensure_active()
        bl = self._bl
        self._frames = list(frames)
        bl.frame_start, bl.frame_end = 1, len(frames)
        bl.render.filepath = os.path.join(self._tmp, "seq_")
        bpy.app.handlers.frame_change_pre.append(self._pose_frame)
        try:
            with quiet_stdout(self.quiet):
                bpy.ops.render.render(animation=True)
        finally:
            bpy.app.handlers.frame_change_pre.remove(self._pose_frame)
            bl.render.filepath = self._png
            self._frames = []
        out = np.empty((len(frames), *(self.settings.resolution,) * 2, 3), dtype=np.uint8)
        for i in range(len(frames)):
            path = os.path.join(self._tmp, f"seq_{i + 1:04d}.png")
            with Image.open(path) as im:
                out[i] = np.asarray(im.convert("RGB"), dtype=np.uint8)
            os.unlink(path)
        if not (self._slots and self._masks):
            return out, None
        masks = np.stack([self._read_mask(os.path.join(self._tmp, f"mask_index{i + 1:04d}.exr"))
                          for i in range(len(frames))])
        return out, masks

    def _read_mask(self, path: str) -> np.ndarray:
        """One frame's object index pass (the EXR the compositor wrote) as uint8 (H, W), top row first; removed."""
        img = bpy.data.images.load(path)
        try:
            img.colorspace_settings.name = "Non-Color"
            w, h = img.size
            px = np.empty(w * h * img.channels, dtype=np.float32)
            img.pixels.foreach_get(px)
        finally:
            bpy.data.images.remove(img)
            os.unlink(path)
        index = np.rint(px.reshape(h, w, -1)[::-1, :, 0])
        return np.clip(index, 0, 255).astype(np.uint8)

    def _pose_frame(self, scene: bpy.types.Scene, *_: Any) -> None:
        """Frame handler of ``render_sequence``: frame f (1-based) shows the f-th (pose, seed)."""
        f = scene.frame_current
        if 1 <= f <= len(self._frames):
            self.apply(*self._frames[f - 1])

    def close(self) -> None:
        """Remove the temporary output file and folder."""
        for name in os.listdir(self._tmp):
            Path(self._tmp, name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            os.rmdir(self._tmp)


def build_renderer(
    scene: Scene | Mapping[str, Any] | str, settings: RenderSettings | Mapping[str, Any] | None = None,
    threads: int = 0, masks: bool = True,
) -> BlenderRenderer:
    """A renderer from plain data (as shipped to Dask workers): a Scene, its dict form or a scene name/path;
    ``masks=False``: no object index pass (see BlenderRenderer)."""
    if isinstance(scene, str):
        scene = load_scene(scene)
    elif not isinstance(scene, Scene):
        scene = scene_from_dict(scene)
    if settings is not None and not isinstance(settings, RenderSettings):
        settings = RenderSettings(**settings)
    return BlenderRenderer(scene, settings, threads=threads, masks=masks)
