"""Views rendered by a second mechanism (issue 44 §2): a stored view may render its rows (its anchors' latents, or
their latent transformation) with another object material, camera or lighting than its anchors, the pairs of two
generative mechanisms that multimodal identifiability (Daunhawer et al. 2023) and Multiview3DIdent learn from.

This module owns a view's mechanism and latent blocks as plain data (no bpy): it reads them from the command line's
``NAME@KNOB=VALUE[@KNOB=VALUE...][:CHANGESET]`` or a mapping, checks them, and applies a mechanism to a scene
(:func:`view_scene`); ``render.blender.BlenderRenderer.stage`` puts the changed scene into Blender for a view's rows.

Knobs: ``material`` (``rubber``: the anchors' CLEVR rubber; ``metallic``: a metal BSDF coloured by the object hue;
the ground keeps its material), ``camera`` (a preset of ``CAMERAS``, or a mapping of camera fields that override the
scene's) and ``light`` (a factor on every lamp's energy, or ``{lamp: factor}``). ``resolution`` is refused: a view's
images share the anchors' array shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ident3d.causal.errors import UserError
from ident3d.render.scene import MATERIAL_KINDS, Camera, Material, Scene, SceneError, scene_from_dict
from ident3d.store.attrs import BLOCKS, latent_blocks

KNOBS = ("material", "camera", "light")
# camera presets: where the camera stands, aimed at the origin (lens and sensor stay the scene's); the built-in
# scenes' own camera stands at (8, 0, 8), 11.3 from the origin, 45 degrees up
CAMERAS: dict[str, tuple[float, float, float]] = {
    "side": (0.0, 8.0, 8.0),  # a quarter turn about the vertical axis
    "low": (11.0, 0.0, 3.0),  # 15 degrees up
    "high": (3.0, 0.0, 11.0),  # 75 degrees up
    "near": (5.7, 0.0, 5.7),  # the scene's direction, 8 from the origin
}
ROUGHNESS = {"rubber": Material().roughness, "metallic": 0.25}  # a material kind's roughness when a view switches to it
VIEW_KEYS = ("changes", "mechanism", *BLOCKS)  # the keys of a view given as a mapping


@dataclass(frozen=True)
class ViewSpec:
    """One stored view: the nodes its latent transformation changes, its mechanism (knob -> value as the store records
    it; empty: the anchors' own) and each latent's block (``BLOCKS`` -> latent names, in latent order)."""

    change: list[str]
    mechanism: dict[str, Any]
    blocks: dict[str, list[str]]


def split_view(item: str) -> tuple[str, str, dict[str, str] | None]:
    """A command-line view ``NAME[@KNOB=VALUE...][:CHANGESET]`` as (name, change set, knobs or None without ``@``); a
    view with a mechanism and no change set changes no latent (a bare ``NAME`` still names its own change set)."""
    head, colon, change = item.strip().partition(":")
    name, *knobs = head.split("@")
    if not knobs:
        return name, change or name, None
    out: dict[str, str] = {}
    for knob in knobs:
        key, eq, value = knob.partition("=")
        if not eq or not key or not value:
            raise UserError(f"views: {item!r}: a mechanism is @KNOB=VALUE (knobs: {', '.join(KNOBS)}), got "
                            f"{'@' + knob!r}; e.g. metal@material=metallic or near@camera=near:positions")
        if key in out:
            raise UserError(f"views: {item!r} sets {key} twice; give each knob once")
        out[key] = value
    return name, change if colon else "", out


def check_mechanism(raw: Any, view: str) -> dict[str, Any]:
    """A view's mechanism (a mapping of knobs; command-line values are text) checked and in the form the store records:
    ``material`` a kind, ``camera`` a preset or a mapping of camera fields, ``light`` a factor or {lamp: factor}."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise UserError(f"views: view {view!r}: mechanism must be a mapping of knobs ({', '.join(KNOBS)}), "
                        f"got {raw!r}")
    out: dict[str, Any] = {}
    for knob, value in raw.items():
        if knob == "resolution":
            raise UserError(f"views: view {view!r}: a view cannot change the resolution (its images are stored beside "
                            "the anchors', at their size); render a second store at that --resolution instead")
        if knob not in KNOBS:
            raise UserError(f"views: view {view!r}: unknown mechanism knob {knob!r}; use one of {', '.join(KNOBS)}")
        out[knob] = {"material": _material_kind, "camera": _camera_value, "light": _light_value}[knob](value, view)
    return out


def _material_kind(value: Any, view: str) -> str:
    """A ``material`` knob: one of the material kinds."""
    if value not in MATERIAL_KINDS:
        raise UserError(f"views: view {view!r}: material must be one of {', '.join(MATERIAL_KINDS)}, got {value!r}")
    return value


def _camera_value(value: Any, view: str) -> str | dict[str, Any]:
    """A ``camera`` knob: a preset's name, or a mapping of camera fields (checked against the scene by view_scene)."""
    if isinstance(value, Mapping) and value and all(k in Camera.__dataclass_fields__ for k in value):
        return {k: list(v) if isinstance(v, Sequence) and not isinstance(v, str) else v for k, v in value.items()}
    if isinstance(value, str) and value in CAMERAS:
        return value
    raise UserError(f"views: view {view!r}: camera must be a preset ({', '.join(CAMERAS)}) or a mapping of camera "
                    f"fields ({', '.join(Camera.__dataclass_fields__)}), got {value!r}")


def _light_value(value: Any, view: str) -> float | dict[str, float]:
    """A ``light`` knob: a positive factor on every lamp's energy, or {lamp: factor} (lamps checked by view_scene)."""
    if isinstance(value, Mapping) and value:
        return {str(k): _factor(v, view) for k, v in value.items()}
    return _factor(value, view)


def _factor(value: Any, view: str) -> float:
    """A positive, finite energy factor (text from the command line read as a number)."""
    try:
        factor = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else math.nan
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and factor > 0):
        raise UserError(f"views: view {view!r}: light must be a positive energy factor (e.g. light=0.5) or "
                        f"{{LAMP: FACTOR}}, got {value!r}")
    return factor


def view_scene(scene: Scene, mechanism: Mapping[str, Any] | None, view: str = "") -> Scene:
    """``scene`` as a view of ``mechanism`` renders it (the scene itself without one): the object material's kind, the
    camera, the lamps' energies (and the latents that drive them) changed; checked as any scene is, one line if not."""
    if not mechanism:
        return scene
    data = scene.to_dict()
    if "material" in mechanism:
        data["material"] = _switched(data["material"], mechanism["material"])
    if "camera" in mechanism:
        data["camera"] = _moved(data["camera"], mechanism["camera"])
    if "light" in mechanism:
        _scale_lights(data, mechanism["light"], view)
    try:
        return scene_from_dict(data)
    except SceneError as exc:
        raise UserError(f"views: view {view!r}: mechanism {dict(mechanism)}: {exc}") from None


def _switched(material: dict[str, Any], kind: str) -> dict[str, Any]:
    """A material's plain form switched to ``kind`` (its colour kept, the kind's roughness); unchanged if of it."""
    if material.get("kind", "rubber") == kind:
        return material
    return {**material, "kind": kind, "roughness": ROUGHNESS[kind]}


def _moved(camera: dict[str, Any], value: str | Mapping[str, Any]) -> dict[str, Any]:
    """A camera's plain form at a preset's place aimed at the origin, or with the given fields (aimed by ``look_at``
    or turned by ``rotation_rad``, whichever the mapping gives)."""
    given = {"location": list(CAMERAS[value]), "look_at": [0.0, 0.0, 0.0]} if isinstance(value, str) else dict(value)
    aim = {"rotation_rad": None} if "look_at" in given else {"look_at": None} if "rotation_rad" in given else {}
    return {**camera, **aim, **given}


def _scale_lights(data: dict[str, Any], factor: float | Mapping[str, float], view: str) -> None:
    """Multiply the energy of every lamp (or of each named one) in a scene's plain form, and of the latents that drive
    a lamp's energy (their scale and offsets), by its factor."""
    lamps = [lt["name"] for lt in data["lights"]]
    factors = dict(factor) if isinstance(factor, Mapping) else dict.fromkeys(lamps, factor)
    if unknown := sorted(set(factors) - set(lamps)):
        raise UserError(f"views: view {view!r}: light names lamp(s) {', '.join(unknown)} the scene lacks; it has "
                        f"{', '.join(lamps)}")
    for lamp in data["lights"]:
        lamp["energy"] *= factors.get(lamp["name"], 1.0)
    for b in data["latents"]:
        _, _, rest = b["target"].partition("light.")
        lamp, _, channel = rest.partition(".")
        if channel == "energy" and lamp in factors:
            for key in ("scale", "offset", "offset_extent"):
                b[key] = b.get(key, 0.0) * factors[lamp]


def view_blocks(names: Sequence[str], change: Sequence[str], declared: Mapping[str, Any], view: str) -> dict[
        str, list[str]]:
    """Each latent's block in a view (``names``: ``store.attrs.block_names``): ``perturbed`` is the change set,
    ``specific`` (what only one of the two images shows) the declared one or none, ``shared`` the rest; blocks declared
    must agree with that and hold every latent once."""
    for block in BLOCKS:
        value = declared.get(block)
        if value is not None and (isinstance(value, str) or not isinstance(value, Sequence)
                                  or not all(isinstance(v, str) for v in value)):
            raise UserError(f"views: view {view!r}: {block} must be a list of latent names, got {value!r}")
        if value is not None and (unknown := [v for v in value if v not in names]):
            raise UserError(f"views: view {view!r}: {block} names {', '.join(unknown)}, not latents of the SCM "
                            f"({', '.join(names)})")
    shared = declared.get("shared")
    specific = declared.get("specific")
    if specific is None:
        specific = [] if shared is None else [n for n in names if n not in change and n not in shared]
    out = latent_blocks(list(names), list(change), specific)
    agree = all(declared.get(b) is None or set(declared[b]) == set(out[b]) for b in BLOCKS)
    if not agree or set(specific) & set(change):
        raise UserError(f"views: view {view!r}: shared, perturbed (its change set: {', '.join(change) or 'none'}) and "
                        "specific must hold every latent once, the change set's as perturbed; give specific (and "
                        "leave shared out: it is the rest)")
    return out
