"""Render settings (resolution, samples, denoiser, bounces, threads, device, Cycles' sampling knobs), named presets
and whether this Python can render at all (has bpy); no bpy import here."""

from __future__ import annotations

import importlib.util
import math
import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from ident3d.causal.errors import UserError

DEVICES = ("auto", "cpu", "gpu")
PREFILTERS = ("NONE", "FAST", "ACCURATE")
DENOISE_QUALITIES = ("HIGH", "BALANCED", "FAST")
HUE_MODES = ("wrap", "original")
# the Pythons Blender publishes bpy (Blender as a module) for, and the bpy each gets (pyproject.toml's markers)
BPY_LINES = {"3.11": "5.0", "3.13": "5.3"}


@dataclass(frozen=True)
class RenderSettings:
    """How Cycles renders: square ``resolution`` px, ``samples`` per pixel, OIDN denoiser, light bounces, threads."""

    resolution: int = 64
    samples: int = 32
    denoise: bool = True
    max_bounces: int = 0
    threads: int = 0  # 0: $OMP_NUM_THREADS if set (the Dask driver sets it per worker), else all cores
    device: str = "auto"  # 'auto': GPU if Cycles finds one, else CPU
    denoise_prefilter: str = "ACCURATE"  # OIDN albedo/normal prefilter; FAST is ~3x cheaper at 64 px
    # 'wrap': hues mod 1 (default); 'original': negative hues unwrapped and clamped, as the original generator did
    # (BlenderRenderer passes it to render.scene.pose; benchmarks/fidelity_3dident.py renders with 'original')
    hue_mode: str = "wrap"
    # Cycles' sampling knobs (issue 36; benchmarks/render_frontier.py sweeps them). Their defaults are what the
    # renderer has always set, and to_dict leaves them out while they have them (ADDED_LATER)
    adaptive_sampling: bool = False  # off: a fixed sample count, like the original (Blender 5.0's default is on)
    adaptive_threshold: float = 0.01  # adaptive sampling's noise threshold (Blender's default; 0: automatic)
    adaptive_min_samples: int = 0  # samples before adaptive sampling may stop a pixel (Blender's default 0: automatic)
    light_tree: bool = False  # off: lights sampled without the (Blender 3.5+) light tree, like the original
    filter_width: float = 1.5  # Blackman-Harris pixel filter width in px (Blender's default and the original's)
    tile_size: int = 2048  # Cycles' tile in px (Blender's default); only a tile smaller than the image splits it
    denoise_quality: str = "HIGH"  # OIDN's quality (Blender's default); BALANCED and FAST are cheaper

    def __post_init__(self) -> None:
        """Check every field by type and range (one-line UserError naming it) and store plain Python values (1 -> 1.0
        for the float knobs, NumPy scalars as Python ones), so to_dict is stable JSON for the store's fingerprint."""
        for name in FIELD_RULES:
            object.__setattr__(self, name, checked_setting(name, getattr(self, name)))

    def to_dict(self) -> dict[str, Any]:
        """Plain form (a store's ``render`` attribute, part of its fingerprint): a field added after stores were first
        made is left out while it has its default, so those stores keep their fingerprint and resume unchanged."""
        return {k: v for k, v in asdict(self).items() if not (k in ADDED_LATER and v == _DEFAULTS[k])}


# Each field's rule, the one owner of render-setting validation (the Python API and the command line alike): whole
# numbers and floats in Cycles' own limits (Blender 5.0's RNA hard_min / hard_max; tests/test_render_bad_input5.py
# holds them against bpy), booleans that are bools, and text from a fixed list. resolution's bounds are ours: at
# least 8 px, and at most what fits in memory (render.driver.check_memory says how much does, long before Cycles'
# 65536 px).
WHOLE: dict[str, tuple[int, int | None, str]] = {
    "resolution": (8, None, " px"), "samples": (1, 16_777_216, ""), "max_bounces": (0, 1024, ""),
    "threads": (0, 1024, ""), "adaptive_min_samples": (0, 4096, ""), "tile_size": (8, 8192, " px")}
FLOATS: dict[str, tuple[float, float, str]] = {"adaptive_threshold": (0.0, 1.0, ""),
                                               "filter_width": (0.01, 10.0, " px")}
BOOLS = ("denoise", "adaptive_sampling", "light_tree")
CHOICES: dict[str, tuple[str, ...]] = {"device": DEVICES, "denoise_prefilter": PREFILTERS, "hue_mode": HUE_MODES,
                                       "denoise_quality": DENOISE_QUALITIES}
FIELD_RULES = (*WHOLE, *FLOATS, *BOOLS, *CHOICES)


def checked_setting(name: str, value: Any) -> Any:
    """``value`` of render setting ``name`` as a plain Python value, or a one-line UserError naming the setting, what
    it must be and what was given (a wrong type or range would otherwise fail inside Blender, chunk by chunk)."""
    if name in BOOLS:
        if not isinstance(value, bool | np.bool_):
            raise UserError(f"{name} must be true or false (a bool), got {value!r}")
        return bool(value)
    if name in CHOICES:
        if not isinstance(value, str) or value not in CHOICES[name]:
            label = {"device": "render device", "hue_mode": "hue mode"}.get(name, name)
            raise UserError(f"{label} {value!r} is not one of {', '.join(CHOICES[name])}")
        return value
    low, high, unit = WHOLE[name] if name in WHOLE else FLOATS[name]
    whole = name in WHOLE
    ok = isinstance(value, int | np.integer) if whole else isinstance(value, int | float | np.integer | np.floating)
    if not ok or isinstance(value, bool | np.bool_) or (not whole and not math.isfinite(value)):
        kind = "a whole number" if whole else "a finite number"
        raise UserError(f"{name} must be {kind}, got {value!r}")
    if value < low:
        raise UserError(f"{name} must be at least {low}{unit}, got {value!r}")
    if high is not None and value > high:
        raise UserError(f"{name} must be at most {high}{unit} (Cycles' limit), got {value!r}")
    return int(value) if whole else float(value)


# fields added after stores were first made: to_dict writes them only where they differ from their default
ADDED_LATER = ("adaptive_sampling", "adaptive_threshold", "adaptive_min_samples", "light_tree", "filter_width",
               "tile_size", "denoise_quality")
_DEFAULTS = {k: RenderSettings.__dataclass_fields__[k].default for k in ADDED_LATER}


PRESETS: dict[str, RenderSettings] = {
    # laptop default: 64 px, 16 samples + OIDN with the cheap prefilter: noise-free like the original, ~50 ms/image
    "fast": RenderSettings(resolution=64, samples=16, denoise=True, max_bounces=0, denoise_prefilter="FAST"),
    # the original 3DIdent/Causal3DIdent settings (Blender 2.91): 224 px, 512 samples, denoiser, direct light only
    "original": RenderSettings(resolution=224, samples=512, denoise=True, max_bounces=0),
}


def render_settings(preset: str = "fast", **overrides: Any) -> RenderSettings:
    """A preset with some fields overridden (None values are ignored: a script's unset options)."""
    return settings_from({k: v for k, v in overrides.items() if v is not None}, preset)


def settings_from(settings: RenderSettings | Mapping[str, Any] | None, preset: str = "fast") -> RenderSettings:
    """The render settings of a call: a ``RenderSettings`` as it is, else ``preset`` with the mapping's overrides
    (every value checked, None included: leave a key out to keep the preset's); a bad preset, a mapping that is not
    one, an unknown key or a bad value is one line, for ``plan_render`` / ``render_store`` and ``ident3d render``
    alike."""
    if isinstance(settings, RenderSettings):
        return settings
    if settings is not None and not isinstance(settings, Mapping):
        raise UserError(f"settings must be a mapping of render settings ({{'resolution': 32, ...}}) or a "
                        f"RenderSettings, got {settings!r}")
    if not isinstance(preset, str) or preset not in PRESETS:
        raise UserError(f"unknown render preset {preset!r}; choose one of {', '.join(PRESETS)}")
    overrides = dict(settings or {})
    unknown = [k for k in overrides if k not in RenderSettings.__dataclass_fields__]
    if unknown:
        raise UserError(f"unknown render setting(s) {sorted(map(str, unknown))}; the settings are "
                        f"{', '.join(RenderSettings.__dataclass_fields__)}")
    return replace(PRESETS[preset], **overrides)


def check_blender() -> None:
    """Refuse to render, in one line, where bpy is not installed (Python 3.12 has no bpy build): checked by the
    driver before a store is created and by a worker before it imports bpy, so no one sees an ImportError."""
    if importlib.util.find_spec("bpy") is not None:
        return
    lines = " or ".join(f"Python {py} (bpy {bl})" for py, bl in BPY_LINES.items())
    raise UserError(f"rendering needs Blender as a Python module (bpy), which this Python {platform.python_version()} "
                    f"does not have; bpy exists for {lines}: render in a virtual environment of one of those "
                    "(stores rendered there train and score here)")
