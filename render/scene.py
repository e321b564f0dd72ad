"""Scene description as data (camera, lights, ground, object classes, latent-to-scene mapping); no bpy here.

Built-in scenes live in ``render/scenes/<name>.yaml``; a user scene is any YAML file of the same shape.
``pose()`` turns one row of raw latents into concrete Blender values, so the mapping is testable without Blender.
"""

from __future__ import annotations

import colorsys
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ident3d.causal.errors import UserError
from ident3d.render.meshes import BUILTIN_MESHES
from ident3d.render.placement_rules import PlacementRules, parse_rules
from ident3d.store import masks

SCENES_DIR = Path(__file__).with_name("scenes")
BUILTIN_SCENES = tuple(sorted(p.stem for p in SCENES_DIR.glob("*.yaml")))  # a new scene: one YAML file there
# raw latent columns, in the order the causal module samples them
LATENT_NAMES = (
    "pos_x", "pos_y", "pos_z", "rot_alpha", "rot_beta", "rot_gamma", "spot_angle", "obj_hue", "spot_hue", "bg_hue",
)
# what a latent can drive; ``light.<name>.<channel>`` for lights
OBJECT_TARGETS = ("object.x", "object.y", "object.z", "object.rot_x", "object.rot_y", "object.rot_z", "object.hue")
LIGHT_CHANNELS = ("angle", "hue", "energy")
GROUND_TARGETS = ("ground.hue",)
MATERIAL_KINDS = ("rubber", "metallic")  # render.blender builds each (rubber: CLEVR's; metallic: a metal BSDF)
SLOT = "{k}"  # an object slot's index in the names of ObjectSlots' latents


class SceneError(UserError):
    """A scene description is invalid."""


@dataclass(frozen=True)
class Camera:
    """Perspective camera: oriented by an XYZ Euler ``rotation_rad`` (as stored in a .blend) or aimed at ``look_at``."""

    location: tuple[float, float, float] = (8.0, 0.0, 8.0)
    look_at: tuple[float, float, float] | None = None
    rotation_rad: tuple[float, float, float] | None = None
    lens_mm: float = 35.0
    sensor_mm: float = 50.0
    sensor_fit: str = "AUTO"


@dataclass(frozen=True)
class Orbit:
    """Light on a horizontal circle: (radius sin t, radius cos t, height), t = the angle latent (radians)."""

    radius: float = 4.0
    height: float = 10.442


@dataclass(frozen=True)
class Light:
    """One lamp; ``aim`` is 'object', 'origin' or None (keep ``rotation_deg``); SPOT/AREA/POINT/SUN."""

    name: str
    type: str
    energy: float
    location: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    aim: str | None = None
    color_hsv: tuple[float, float, float] = (0.0, 0.0, 1.0)
    size: float = 0.0  # area size, or soft size (radius) of point/spot
    spot_size_deg: float = 35.0
    spot_blend: float = 0.1
    angle_deg: float = 0.5  # sun disc angle
    orbit: Orbit | None = None


@dataclass(frozen=True)
class Material:
    """A surface coloured HSV(hue, saturation, value), the hue set per sample; ``kind`` says which (MATERIAL_KINDS).

    'rubber' (the default): CLEVR's "Rubber" node group,
    inner = Mix(Fresnel(ior + inner_ior_add), Diffuse(colour, diffuse_roughness), Sheen(colour, sheen_roughness));
    out = Mix(Fresnel(ior), inner, Glossy(glossy_value grey, roughness ** glossy_roughness_power)).
    'metallic': a Principled BSDF of metallic 1 with base colour the colour and roughness ``roughness`` (the other
    fields are the rubber's and unused).
    """

    color_hsv: tuple[float, float, float] = (0.0, 1.0, 1.0)
    ior: float = 1.2
    roughness: float = 0.35
    inner_ior_add: float = 0.2
    diffuse_roughness: float = 0.0
    sheen_roughness: float = 0.6
    sheen_distribution: str = "ASHIKHMIN"  # Blender's old Velvet BSDF
    glossy_value: float = 0.8
    glossy_roughness_power: float = 0.5
    glossy_distribution: str = "BECKMANN"  # what the original scene file's Glossy BSDF uses
    kind: str = "rubber"


@dataclass(frozen=True)
class Ground:
    """A large square plane of side ``size`` at height ``z``, with its own material (colour: the ground hue)."""

    size: float = 1500.0
    z: float = -4.442
    material: Material = field(default_factory=lambda: Material(color_hsv=(0.0, 0.6, 1.0)))


@dataclass(frozen=True)
class ObjectClass:
    """One object class: ``mesh`` is 'builtin:<shape>' (see render.meshes.BUILTIN_MESHES) or a mesh file path.

    The mesh is normalised in its own (canonical) frame: scaled so the largest side of its bounding box is
    ``size`` (None: the scene's extent) times ``scale``; its pivot (the object's origin, which the latent
    position places and the latent rotation turns about) is ``pivot``; then it is turned by ``yaw_deg`` about
    z around the pivot (a resting orientation, before the latent rotation). ``pivot`` is 'bbox_centre' or one
    entry per axis: a number (the pivot's offset from the bounding-box centre, scene units) or 'mesh_origin'
    (the source mesh's own origin on that axis, e.g. the teapot's body axis).
    """

    name: str
    mesh: str
    scale: float = 1.0
    size: float | None = None
    yaw_deg: float = 0.0
    pivot: str | tuple[float | str, float | str, float | str] = "bbox_centre"

    def mesh_size(self, extent: float) -> float:
        """Largest bounding-box side of the normalised mesh (before the yaw)."""
        return (extent if self.size is None else self.size) * self.scale


@dataclass(frozen=True)
class Binding:
    """Latent ``name`` drives ``target`` with value = scale * raw + offset + offset_extent * s."""

    name: str
    target: str
    scale: float = 1.0
    offset: float = 0.0
    offset_extent: float = 0.0


@dataclass(frozen=True)
class ObjectSlots:
    """Up to ``slots`` objects per image (multi-object scenes): slot k shows one class mesh, posed and coloured by its
    own latents, named from templates with ``{k}``; absent slots are hidden.

    Columns after the scene's shared ``latents``: ``present`` for every slot (> 0.5: the slot holds an object), then
    slot by slot its ``class_latent`` (the class index) and its ``latents`` (targets ``object.*``, mapped as a
    one-object scene maps them): the order in which an SCM with object plates samples them (causal/plates.py).
    Each rendered image also yields masks from Cycles' object index pass (slot k's objects have pass index k + 1).
    """

    slots: int
    present: str = "present_{k}"
    class_latent: str = "obj{k}_class"
    latents: tuple[Binding, ...] = ()

    def bindings(self) -> tuple[Binding, ...]:
        """The slots' columns as concrete bindings: targets ``slot.<k>.present|class|x|y|z|rot_x|rot_y|rot_z|hue``."""
        out = [Binding(self.present.replace(SLOT, str(k)), f"slot.{k}.present") for k in range(self.slots)]
        for k in range(self.slots):
            out.append(Binding(self.class_latent.replace(SLOT, str(k)), f"slot.{k}.class"))
            out += [replace(b, name=b.name.replace(SLOT, str(k)), target=f"slot.{k}.{b.target.split('.', 1)[1]}")
                    for b in self.latents]
        return tuple(out)


@dataclass(frozen=True)
class Scene:
    """A whole scene: shared set-up plus object classes and the latent bindings (column i = bindings[i]: ``latents``,
    then the columns of the object slots, if any).

    ``extent`` (s) is the default largest bounding-box side of a class's mesh and the unit of ``offset_extent``.
    """

    name: str
    extent: float
    camera: Camera
    ground: Ground
    material: Material
    lights: tuple[Light, ...]
    classes: tuple[ObjectClass, ...]
    latents: tuple[Binding, ...]
    description: str = ""
    world_color: tuple[float, float, float] = (0.0, 0.0, 0.0)
    view_transform: str = "Standard"
    exposure: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)
    objects: ObjectSlots | None = None  # None: one object (the sample's class); else object slots
    placement: PlacementRules | None = None  # None: rows are rendered as drawn (render/placement.py applies them)
    # the captions its images pair with: a built-in caption spec's name (render/texts/), a spec file or a spec
    # mapping (ident3d.render.captions); None: no captions unless a render gives --text
    text: str | Mapping[str, Any] | None = None

    @property
    def bindings(self) -> tuple[Binding, ...]:
        """Every latent column's binding, in order: ``latents``, then the object slots' (none without slots)."""
        return self.latents + (self.objects.bindings() if self.objects is not None else ())

    @property
    def latent_names(self) -> tuple[str, ...]:
        """Latent column names, in order."""
        return tuple(b.name for b in self.bindings)

    @property
    def slots(self) -> int:
        """Object slots (0: a one-object scene, whose object is the sample's class)."""
        return 0 if self.objects is None else self.objects.slots

    @property
    def class_names(self) -> tuple[str, ...]:
        """Object class names, in class-index order."""
        return tuple(c.name for c in self.classes)

    def to_dict(self) -> dict[str, Any]:
        """Plain, YAML/JSON-serialisable form (what a store records as its scene spec); a one-object scene's has no
        ``objects`` key, as before object slots existed (so its stores still resume); nor has a scene without placement
        rules a ``placement`` key, nor a rubber material a ``kind`` key."""
        out = _plain(asdict(self))
        for material in (out["material"], out["ground"]["material"]):
            if material["kind"] == "rubber":  # as before material kinds existed
                del material["kind"]
        if self.objects is None:
            del out["objects"]
        if self.placement is None:
            del out["placement"]
        else:
            out["placement"] = self.placement.to_dict()
        if self.text is None:
            del out["text"]
        return out

    def with_meshes(self, meshes: Mapping[str, str | Path]) -> Scene:
        """Copy with some classes' meshes replaced by files ({class name: path})."""
        unknown = set(meshes) - set(self.class_names)
        if unknown:
            raise SceneError(f"unknown class(es) {sorted(unknown)}; scene {self.name} has {list(self.class_names)}")
        classes = tuple(
            c if c.name not in meshes else ObjectClass(c.name, str(meshes[c.name]), scale=c.scale)
            for c in self.classes
        )  # a user mesh gets the default conventions (largest side = extent, pivot at its bbox centre, no yaw)
        return replace(self, classes=classes)


@dataclass(frozen=True)
class LightPose:
    """Concrete state of one light for one sample."""

    location: tuple[float, float, float]
    rgb: tuple[float, float, float]
    energy: float


@dataclass(frozen=True)
class ObjectPose:
    """Concrete state of one object slot for one sample (hidden when not ``present``)."""

    present: bool
    class_index: int
    location: tuple[float, float, float]
    rotation: tuple[float, float, float]
    rgb: tuple[float, float, float]


@dataclass(frozen=True)
class Pose:
    """Concrete Blender values for one sample (what the renderer applies before rendering).

    A scene with object slots also gives ``objects``, one per slot; the object fields above are then slot 0's (what a
    light with ``aim: object`` tracks)."""

    class_index: int
    location: tuple[float, float, float]
    rotation: tuple[float, float, float]
    object_rgb: tuple[float, float, float]
    ground_rgb: tuple[float, float, float]
    lights: dict[str, LightPose]
    objects: tuple[ObjectPose, ...] = ()


def _plain(x: Any) -> Any:
    """Tuples to lists, recursively (for YAML/JSON)."""
    if isinstance(x, Mapping):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x


def hsv_rgb(hue: float, saturation: float, value: float, mode: str = "wrap") -> tuple[float, float, float]:
    """HSV to RGB. 'wrap': hue mod 1. 'original': the original generator's colours, i.e. colorsys on the
    unwrapped hue (negative hues give channels below 0 or above 1), negatives clamped to 0 as Blender does."""
    if mode == "wrap":
        return tuple(colorsys.hsv_to_rgb(hue % 1.0, saturation, value))  # type: ignore[return-value]
    if mode == "original":
        return tuple(max(c, 0.0) for c in colorsys.hsv_to_rgb(hue, saturation, value))  # type: ignore[return-value]
    raise SceneError(f"hue mode {mode!r} is not 'wrap' or 'original'")


def _is_number(x: Any) -> bool:
    """A finite YAML number (int or float, not a bool)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _number(x: Any, what: str) -> float:
    """A finite number from YAML as a float, or a one-line SceneError naming the field."""
    if not _is_number(x):
        raise SceneError(f"{what} must be a number, got {x!r}")
    return float(x)


def _tuple(x: Any, n: int, what: str) -> tuple[float, ...]:
    """A length-n float tuple from a YAML list."""
    if not isinstance(x, Sequence) or isinstance(x, str) or len(x) != n or not all(_is_number(v) for v in x):
        raise SceneError(f"{what} must be a list of {n} numbers, got {x!r}")
    return tuple(float(v) for v in x)


def _describe(hint: Any) -> str:
    """A type hint in words, for error messages ("a number", "a string or null", ...)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return " or ".join(_describe(h) for h in typing.get_args(hint))
    names = {float: "a number", int: "an integer", str: "a string", bool: "true or false", type(None): "null"}
    if hint in names:
        return names[hint]
    if typing.get_origin(hint) is tuple:
        return "a list"
    return f"a mapping ({getattr(hint, '__name__', hint)})"


def _matches(value: Any, hint: Any) -> bool:
    """Whether a (YAML-built) value has the type a dataclass field declares (tuples already converted)."""
    if hint is Any:
        return True
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is float:
        return _is_number(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (str, bool, type(None)):
        return isinstance(value, hint)
    origin = typing.get_origin(hint)
    if origin is tuple:
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return isinstance(value, tuple) and all(any(_matches(v, a) for a in args) for v in value)
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        return isinstance(value, Mapping)
    if is_dataclass(hint):
        return isinstance(value, hint)
    return True


def _check_types(cls: type, kw: Mapping[str, Any], what: str) -> None:
    """Every given field of dataclass ``cls`` has its declared type; else one line naming the field."""
    hints = typing.get_type_hints(cls)
    for key, value in kw.items():
        if not _matches(value, hints[key]):
            raise SceneError(f"{what}.{key} must be {_describe(hints[key])}, got {value!r}")


def _build(cls: type, data: Mapping[str, Any], what: str, vectors: Mapping[str, int] = {}) -> Any:  # noqa: B006
    """Dataclass from a mapping, with a clear error for unknown keys and for values of the wrong type."""
    if not isinstance(data, Mapping):
        raise SceneError(f"{what} must be a mapping, got {data!r}")
    known = set(cls.__dataclass_fields__)
    unknown = set(data) - known
    if unknown:
        raise SceneError(f"{what}: unknown key(s) {sorted(unknown)}; allowed: {sorted(known)}")
    kw = dict(data)
    for key, n in vectors.items():
        if key in kw:
            kw[key] = _tuple(kw[key], n, f"{what}.{key}")
    _check_types(cls, kw, what)
    try:
        return cls(**kw)
    except TypeError as exc:
        raise SceneError(f"{what}: {exc}") from None


def _material(data: Mapping[str, Any] | None, what: str, default: Material) -> Material:
    """A Material from YAML; keys not given keep ``default``'s values."""
    if data is None:
        return default
    if not isinstance(data, Mapping):
        raise SceneError(f"{what} must be a mapping, got {data!r}")
    return _build(Material, {**_plain(asdict(default)), **data}, what, {"color_hsv": 3})


def _ground(data: Mapping[str, Any]) -> Ground:
    """The Ground from YAML (its material nested, defaulting to a rubber of saturation 0.6)."""
    if not isinstance(data, Mapping):
        raise SceneError(f"ground must be a mapping, got {data!r}")
    d = dict(data)
    d["material"] = _material(d.get("material"), "ground.material", Ground().material)
    return _build(Ground, d, "ground")


def _camera(data: Mapping[str, Any]) -> Camera:
    """The Camera from YAML; vectors may be null (look_at or rotation_rad)."""
    if not isinstance(data, Mapping):
        raise SceneError(f"camera must be a mapping, got {data!r}")
    vectors = {k: 3 for k in ("location", "look_at", "rotation_rad") if data.get(k) is not None}
    return _build(Camera, data, "camera", vectors)


def _items(x: Any, what: str) -> list[Any]:
    """A YAML list (of lights, classes or latents), or a one-line SceneError."""
    if not isinstance(x, list):
        raise SceneError(f"{what} must be a list, got {x!r}")
    return x


def _light(data: Any, what: str) -> Light:
    """One Light from YAML (its orbit nested)."""
    if not isinstance(data, Mapping):
        raise SceneError(f"{what} must be a mapping, got {data!r}")
    d = dict(data)
    if d.get("orbit") is not None:
        d["orbit"] = _build(Orbit, d["orbit"], f"{what}.orbit")
    return _build(Light, d, what, {"location": 3, "rotation_deg": 3, "color_hsv": 3})


def _pivot(x: Any, what: str) -> str | tuple[float | str, ...]:
    """A class's pivot: 'bbox_centre' or 3 entries, each a number or 'mesh_origin'."""
    if x == "bbox_centre":
        return x
    if not isinstance(x, Sequence) or isinstance(x, str) or len(x) != 3:
        raise SceneError(f"{what}.pivot must be 'bbox_centre' or 3 entries (number or 'mesh_origin'), got {x!r}")
    out: list[float | str] = []
    for v in x:
        if v == "mesh_origin":
            out.append(v)
        elif isinstance(v, int | float) and not isinstance(v, bool):
            out.append(float(v))
        else:
            raise SceneError(f"{what}.pivot entries must be numbers or 'mesh_origin', got {v!r}")
    return tuple(out)


def _object_class(data: Mapping[str, Any], what: str) -> ObjectClass:
    """One ObjectClass from YAML."""
    if not isinstance(data, Mapping):
        raise SceneError(f"{what} must be a mapping, got {data!r}")
    d = dict(data)
    if "pivot" in d:
        d["pivot"] = _pivot(d["pivot"], what)
    return _build(ObjectClass, d, what)


def _object_slots(data: Any) -> ObjectSlots | None:
    """The scene's object slots from YAML (None: a one-object scene)."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise SceneError(f"objects must be a mapping (slots, present, class_latent, latents), got {data!r}")
    d = dict(data)
    d["latents"] = tuple(_build(Binding, b, f"objects.latents[{i}]")
                         for i, b in enumerate(_items(d.get("latents", []), "objects.latents")))
    return _build(ObjectSlots, d, "objects")


def _placement(data: Any) -> PlacementRules | None:
    """The scene's placement rules from YAML (None: none), as a SceneError on a bad key or value."""
    if data is None:
        return None
    try:
        return parse_rules(data)
    except UserError as exc:
        raise SceneError(str(exc)) from None


def scene_from_dict(data: Mapping[str, Any]) -> Scene:
    """Validate and build a Scene from its plain (YAML) form: every field's type is checked here, so a bad
    scene fails at load time with one line naming the field, never later inside a render worker."""
    if not isinstance(data, Mapping):
        raise SceneError(f"a scene description must be a mapping, got {type(data).__name__}")
    d = dict(data)
    try:
        scene = Scene(
            name=str(d.pop("name")),
            extent=_number(d.pop("extent", 4.4), "extent"),
            camera=_camera(d.pop("camera", {})),
            ground=_ground(d.pop("ground", {})),
            material=_material(d.pop("material", {}), "material", Material()),
            lights=tuple(_light(ld, f"lights[{i}]") for i, ld in enumerate(_items(d.pop("lights"), "lights"))),
            classes=tuple(_object_class(c, f"classes[{i}]") for i, c in enumerate(_items(d.pop("classes"),
                                                                                         "classes"))),
            latents=tuple(_build(Binding, b, f"latents[{i}]") for i, b in enumerate(_items(d.pop("latents"),
                                                                                            "latents"))),
            description=str(d.pop("description", "")),
            world_color=_tuple(d.pop("world_color", (0, 0, 0)), 3, "world_color"),
            view_transform=str(d.pop("view_transform", "Standard")),
            exposure=_number(d.pop("exposure", 0.0), "exposure"),
            extra=dict(_mapping(d.pop("extra", {}), "extra")),
            objects=_object_slots(d.pop("objects", None)),
            placement=_placement(d.pop("placement", None)),
            text=_text(d.pop("text", None)),
        )
    except KeyError as exc:
        raise SceneError(f"scene description lacks {exc.args[0]!r}") from None
    if d:
        raise SceneError(f"scene description: unknown key(s) {sorted(d)}")
    validate(scene)
    return scene


def _text(x: Any) -> str | dict[str, Any] | None:
    """A scene's caption spec: a built-in name or file path (text), a spec mapping, or None; checked against the SCM
    when a render plans it (``ident3d.render.captions``)."""
    if x is None or (isinstance(x, str) and x.strip()):
        return x
    if isinstance(x, Mapping):
        return dict(x)
    raise SceneError(f"text must be a caption spec's name or file, or a spec mapping, got {x!r}")


def _mapping(x: Any, what: str) -> Mapping[str, Any]:
    """A YAML mapping, or a one-line SceneError."""
    if not isinstance(x, Mapping):
        raise SceneError(f"{what} must be a mapping, got {x!r}")
    return x


def validate(scene: Scene) -> None:
    """Check names, light types and binding targets; raise SceneError with a one-line message."""
    if not scene.classes:
        raise SceneError(f"scene {scene.name} has no object classes")
    cam = scene.camera
    if (cam.look_at is None) == (cam.rotation_rad is None):
        raise SceneError(f"scene {scene.name}: camera needs exactly one of look_at and rotation_rad")
    if cam.sensor_fit not in ("AUTO", "HORIZONTAL", "VERTICAL"):
        raise SceneError(f"camera sensor_fit {cam.sensor_fit!r} is not AUTO, HORIZONTAL or VERTICAL")
    for what, m in (("material", scene.material), ("ground.material", scene.ground.material)):
        if m.kind not in MATERIAL_KINDS:
            raise SceneError(f"{what}: kind {m.kind!r} is not one of {', '.join(MATERIAL_KINDS)}")
        if m.sheen_distribution not in ("ASHIKHMIN", "MICROFIBER"):
            raise SceneError(f"{what}: sheen_distribution {m.sheen_distribution!r} is not ASHIKHMIN or MICROFIBER")
        if m.glossy_distribution not in ("BECKMANN", "GGX", "ASHIKHMIN_SHIRLEY", "MULTI_GGX"):
            raise SceneError(f"{what}: glossy_distribution {m.glossy_distribution!r} is not a Glossy BSDF one")
        if m.ior < 1.0 or m.roughness < 0.0:
            raise SceneError(f"{what}: ior must be >= 1 and roughness >= 0, got {m.ior} and {m.roughness}")
    for c in scene.classes:
        if c.mesh_size(scene.extent) <= 0:
            raise SceneError(f"class {c.name}: size and scale must be positive")
        shape = c.mesh.split(":", 1)[1] if c.mesh.startswith("builtin:") else None
        if shape is not None and shape not in BUILTIN_MESHES:
            raise SceneError(f"class {c.name}: unknown built-in mesh {shape!r}; choose one of "
                             f"{', '.join(BUILTIN_MESHES)} or a mesh file path")
    light_names = [lt.name for lt in scene.lights]
    if len(set(light_names)) != len(light_names):
        raise SceneError(f"scene {scene.name}: duplicate light names {light_names}")
    for lt in scene.lights:
        if lt.type not in ("SPOT", "AREA", "POINT", "SUN"):
            raise SceneError(f"light {lt.name}: type {lt.type!r} is not SPOT, AREA, POINT or SUN")
        if lt.aim not in (None, "object", "origin"):
            raise SceneError(f"light {lt.name}: aim {lt.aim!r} is not 'object', 'origin' or null")
    if scene.objects is not None:
        _validate_slots(scene)
    rules = scene.placement
    if rules is not None and scene.objects is None and (rules.min_distance > 0 or rules.min_visible > 0):
        raise SceneError(f"scene {scene.name}: placement min_distance and min_visible need object slots (objects:); "
                         "a one-object scene takes only placement.support")
    names = scene.latent_names
    if len(set(names)) != len(names):
        raise SceneError(f"scene {scene.name}: duplicate latent names {list(names)}")
    for b in scene.latents:
        parts = b.target.split(".")
        ok = b.target in OBJECT_TARGETS or b.target in GROUND_TARGETS
        ok = ok or (len(parts) == 3 and parts[0] == "light" and parts[1] in light_names and parts[2] in LIGHT_CHANNELS)
        if not ok:
            raise SceneError(
                f"latent {b.name}: target {b.target!r} is not one of {OBJECT_TARGETS + GROUND_TARGETS} "
                f"or light.<name>.<{'|'.join(LIGHT_CHANNELS)}> with a light in {light_names}"
            )
        if b.target.endswith(".angle") and next(lt for lt in scene.lights if lt.name == parts[1]).orbit is None:
            raise SceneError(f"latent {b.name}: light {parts[1]} has no orbit, so it has no angle")


def _validate_slots(scene: Scene) -> None:
    """A scene's object slots: 1..8 slots, every name a template with {k}, slot latents driving object.* only, and
    no shared latent driving the object (the slots are the objects)."""
    o = scene.objects
    assert o is not None
    if not 1 <= o.slots <= 8:
        raise SceneError(f"scene {scene.name}: objects.slots must be 1..8, got {o.slots}")
    for what, name in [("present", o.present), ("class_latent", o.class_latent)] + \
            [(f"latents[{i}].name", b.name) for i, b in enumerate(o.latents)]:
        if SLOT not in name:
            raise SceneError(f"scene {scene.name}: objects.{what} {name!r} must name the slot with {SLOT}, "
                             "e.g. 'obj{k}_pos_x'")
    for i, b in enumerate(o.latents):
        if b.target not in OBJECT_TARGETS:
            raise SceneError(f"scene {scene.name}: objects.latents[{i}] ({b.name}) targets {b.target!r}, not one of "
                             f"{OBJECT_TARGETS}")
    for b in scene.latents:
        if b.target in OBJECT_TARGETS:
            raise SceneError(f"scene {scene.name}: latent {b.name} targets {b.target}, but the scene's objects are "
                             "its slots: bind it under objects.latents")


def load_scene(name_or_path: str | Path) -> Scene:
    """A built-in scene by name ('3dident', 'causal3dident') or a scene YAML file."""
    path = SCENES_DIR / f"{name_or_path}.yaml" if str(name_or_path) in BUILTIN_SCENES else Path(name_or_path)
    if not path.is_file():
        raise SceneError(f"no scene {name_or_path!r}: not a built-in ({', '.join(BUILTIN_SCENES)}) nor a YAML file")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SceneError(f"cannot read the scene {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, Mapping):
        raise SceneError(f"{path} does not hold a scene description (a mapping)")
    try:
        scene = scene_from_dict(data)
    except SceneError as exc:
        if str(name_or_path) in BUILTIN_SCENES:
            raise
        raise SceneError(f"scene {path}: {exc}; fix the scene file") from None
    text = scene.text
    if isinstance(text, str) and text.endswith((".yaml", ".yml")) and not Path(text).is_absolute():
        return replace(scene, text=str(path.parent / text))  # a caption spec file beside the scene's
    return scene


def pose(scene: Scene, raw: Sequence[float], class_index: int = 0, hue_mode: str = "wrap") -> Pose:
    """Map one row of raw latents (in [-1, 1], ordered as scene.latent_names) to concrete scene values.

    ``hue_mode`` 'wrap' takes hues mod 1; 'original' reproduces the original generator's colours (see hsv_rgb).
    A scene with object slots takes each slot's class from its class latent (``class_index`` is ignored) and poses
    slot 0 in the one-object fields.
    """
    bindings = scene.bindings
    if len(raw) != len(bindings):
        raise SceneError(f"expected {len(bindings)} latents {list(scene.latent_names)}, got {len(raw)}")
    s = scene.extent
    values: dict[str, float] = {}
    for b, r in zip(bindings, raw, strict=True):
        values[b.target] = b.scale * float(r) + b.offset + b.offset_extent * s

    def get(target: str, default: float = 0.0) -> float:
        return values.get(target, default)

    objects = tuple(_object_pose(scene, k, get, hue_mode) for k in range(scene.slots))
    if objects:
        class_index, loc, rot, object_rgb = objects[0].class_index, objects[0].location, objects[0].rotation, \
            objects[0].rgb
    else:
        if not 0 <= class_index < len(scene.classes):
            raise SceneError(f"class index {class_index} out of range 0..{len(scene.classes) - 1}")
        loc = (get("object.x"), get("object.y"), get("object.z"))
        rot = (get("object.rot_x"), get("object.rot_y"), get("object.rot_z"))
        h, sat, val = scene.material.color_hsv
        object_rgb = hsv_rgb(get("object.hue", h), sat, val, hue_mode)
    h, sat, val = scene.ground.material.color_hsv
    ground_rgb = hsv_rgb(get("ground.hue", h), sat, val, hue_mode)
    lights = {}
    for lt in scene.lights:
        location = lt.location
        if lt.orbit is not None:
            t = get(f"light.{lt.name}.angle")
            o = lt.orbit
            location = (o.radius * math.sin(t), o.radius * math.cos(t), o.height)
        h, sat, val = lt.color_hsv
        rgb = hsv_rgb(get(f"light.{lt.name}.hue", h), sat, val, hue_mode)
        lights[lt.name] = LightPose(location, rgb, get(f"light.{lt.name}.energy", lt.energy))
    return Pose(class_index, loc, rot, object_rgb, ground_rgb, lights, objects)


def _object_pose(scene: Scene, k: int, get: Any, hue_mode: str) -> ObjectPose:
    """Slot k's object from the bound values (``get(target, default)``): present, class, place, rotation, colour."""
    pre = f"slot.{k}."
    present = get(pre + "present") > 0.5
    class_index = int(round(get(pre + "class")))
    if present and not 0 <= class_index < len(scene.classes):
        raise SceneError(f"object {k}: class index {class_index} out of range 0..{len(scene.classes) - 1}")
    h, sat, val = scene.material.color_hsv
    return ObjectPose(present, class_index if present else 0, (get(pre + "x"), get(pre + "y"), get(pre + "z")),
                      (get(pre + "rot_x"), get(pre + "rot_y"), get(pre + "rot_z")),
                      hsv_rgb(get(pre + "hue", h), sat, val, hue_mode))


def presence(scene: Scene, latents: np.ndarray) -> np.ndarray:
    """(N, slots) bool: which object slots hold an object in each row of raw latents (N, D), by the present latents
    (``ident3d.store.masks.presence``)."""
    latents = np.asarray(latents)
    if scene.objects is None:
        return np.zeros((len(latents), 0), dtype=bool)
    cols = [scene.latent_names.index(scene.objects.present.replace(SLOT, str(k))) for k in range(scene.slots)]
    return masks.presence(latents, cols)
