"""Render settings (resolution, samples, denoiser, bounces, threads, device) and named presets; no bpy here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from ident3d.causal.errors import UserError

DEVICES = ("auto", "cpu", "gpu")
PREFILTERS = ("NONE", "FAST", "ACCURATE")
HUE_MODES = ("wrap", "original")


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
