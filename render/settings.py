"""Render settings (resolution, samples, denoiser, bounces, threads, device), named presets and whether this Python
can render at all (has bpy); no bpy import here."""

from __future__ import annotations

import importlib.util
import platform
from dataclasses import asdict, dataclass, replace
from typing import Any

from ident3d.causal.errors import UserError

DEVICES = ("auto", "cpu", "gpu")
PREFILTERS = ("NONE", "FAST", "ACCURATE")
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

    def __post_init__(self) -> None:
        if self.resolution < 8 or self.samples < 1 or self.max_bounces < 0 or self.threads < 0:
            raise UserError(f"invalid render settings {self}")
        if self.device not in DEVICES:
            raise UserError(f"render device {self.device!r} is not one of {', '.join(DEVICES)}")
        if self.denoise_prefilter not in PREFILTERS:
            raise UserError(f"denoise_prefilter {self.denoise_prefilter!r} is not one of {', '.join(PREFILTERS)}")
        if self.hue_mode not in HUE_MODES:
            raise UserError(f"hue mode {self.hue_mode!r} is not one of {', '.join(HUE_MODES)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain form (recorded in a store's attributes)."""
        return asdict(self)


PRESETS: dict[str, RenderSettings] = {
    # laptop default: 64 px, 16 samples + OIDN with the cheap prefilter: noise-free like the original, ~50 ms/image
    "fast": RenderSettings(resolution=64, samples=16, denoise=True, max_bounces=0, denoise_prefilter="FAST"),
    # the original 3DIdent/Causal3DIdent settings (Blender 2.91): 224 px, 512 samples, denoiser, direct light only
    "original": RenderSettings(resolution=224, samples=512, denoise=True, max_bounces=0),
}


def render_settings(preset: str = "fast", **overrides: Any) -> RenderSettings:
    """A preset with some fields overridden (None values are ignored)."""
    if preset not in PRESETS:
        raise UserError(f"unknown render preset {preset!r}; choose one of {', '.join(PRESETS)}")
    unknown = set(overrides) - set(RenderSettings.__dataclass_fields__)
    if unknown:
        raise UserError(f"unknown render setting(s) {sorted(unknown)}")
    return replace(PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None})


def check_blender() -> None:
    """Refuse to render, in one line, where bpy is not installed (Python 3.12 has no bpy build): checked by the
    driver before a store is created and by a worker before it imports bpy, so no one sees an ImportError."""
    if importlib.util.find_spec("bpy") is not None:
        return
    lines = " or ".join(f"Python {py} (bpy {bl})" for py, bl in BPY_LINES.items())
    raise UserError(f"rendering needs Blender as a Python module (bpy), which this Python {platform.python_version()} "
                    f"does not have; bpy exists for {lines}: render in a virtual environment of one of those "
                    "(stores rendered there train and score here)")
