"""Render settings (resolution, samples, denoiser, bounces, threads, device, Cycles' sampling knobs), named presets
and whether this Python can render at all (has bpy); no bpy import here."""

from __future__ import annotations

import importlib.util
import platform
from dataclasses import asdict, dataclass, replace
from typing import Any

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
        """Check every field (one-line UserError) and make the float knobs floats (1 -> 1.0), so to_dict is stable."""
        for name in ("adaptive_threshold", "filter_width"):
            object.__setattr__(self, name, float(getattr(self, name)))
        if self.resolution < 8 or self.samples < 1 or self.max_bounces < 0 or self.threads < 0:
            raise UserError(f"invalid render settings {self}")
        if self.adaptive_threshold < 0 or self.adaptive_min_samples < 0 or self.tile_size < 8:
            raise UserError(f"invalid render settings {self}")
        if not 0.01 <= self.filter_width <= 10:
            raise UserError(f"filter_width {self.filter_width} is outside Cycles' range 0.01-10 px")
        if self.denoise_quality not in DENOISE_QUALITIES:
            raise UserError(f"denoise_quality {self.denoise_quality!r} is not one of {', '.join(DENOISE_QUALITIES)}")
        if self.device not in DEVICES:
            raise UserError(f"render device {self.device!r} is not one of {', '.join(DEVICES)}")
        if self.denoise_prefilter not in PREFILTERS:
            raise UserError(f"denoise_prefilter {self.denoise_prefilter!r} is not one of {', '.join(PREFILTERS)}")
        if self.hue_mode not in HUE_MODES:
            raise UserError(f"hue mode {self.hue_mode!r} is not one of {', '.join(HUE_MODES)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain form (a store's ``render`` attribute, part of its fingerprint): a field added after stores were first
        made is left out while it has its default, so those stores keep their fingerprint and resume unchanged."""
        return {k: v for k, v in asdict(self).items() if not (k in ADDED_LATER and v == _DEFAULTS[k])}


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
