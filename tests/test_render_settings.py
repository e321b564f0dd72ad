"""RenderSettings' Cycles knobs (issue 36): defaults leave a store's ``render`` attribute (and so its fingerprint) as
before, a changed knob is recorded and round-trips, bad values are refused, and each knob reaches Cycles."""

from __future__ import annotations

import pytest

from ident3d.causal.errors import UserError
from ident3d.render.settings import ADDED_LATER, PRESETS, RenderSettings, render_settings

# the keys every store's render attribute had before the knobs were added
BEFORE = {"resolution", "samples", "denoise", "max_bounces", "threads", "device", "denoise_prefilter", "hue_mode"}
KNOBS = {"adaptive_sampling": True, "adaptive_threshold": 0.05, "adaptive_min_samples": 4, "light_tree": True,
         "filter_width": 2.0, "tile_size": 16, "denoise_quality": "BALANCED"}


def test_defaults_leave_the_recorded_settings_as_before():
    for name, preset in PRESETS.items():
        assert set(preset.to_dict()) == BEFORE, name
    assert render_settings("fast").to_dict() == {"resolution": 64, "samples": 16, "denoise": True, "max_bounces": 0,
                                                 "threads": 0, "device": "auto", "denoise_prefilter": "FAST",
                                                 "hue_mode": "wrap"}
    assert set(ADDED_LATER) == set(KNOBS)


def test_a_changed_knob_is_recorded_and_round_trips():
    for key, value in KNOBS.items():
        s = render_settings("fast", **{key: value})
        assert s.to_dict() == {**render_settings("fast").to_dict(), key: value}
        assert RenderSettings(**s.to_dict()) == s
    assert render_settings("fast", filter_width=2).to_dict()["filter_width"] == 2.0  # int given: stored as float
    assert "filter_width" not in render_settings("fast", filter_width=1.5).to_dict()  # the default given: left out


@pytest.mark.parametrize("bad", [{"filter_width": 20.0}, {"filter_width": 0.0}, {"tile_size": 4},
                                 {"adaptive_threshold": -0.1}, {"adaptive_min_samples": -1},
                                 {"denoise_quality": "ULTRA"}])
def test_bad_knobs_are_refused(bad):
    with pytest.raises(UserError):
        render_settings("fast", **bad)


def test_knobs_reach_cycles_and_defaults_are_the_old_values():
    import bpy

    from ident3d.render.blender import build_renderer

    expect_default = {"use_adaptive_sampling": False, "use_light_tree": False, "filter_width": 1.5,
                      "denoising_quality": "HIGH", "tile_size": 2048, "adaptive_min_samples": 0}
    r = build_renderer("causal3dident", render_settings("fast", resolution=16, samples=2).to_dict())
    cy = bpy.context.scene.cycles
    assert {k: getattr(cy, k) for k in expect_default} == expect_default
    assert cy.adaptive_threshold == pytest.approx(0.01) and cy.use_auto_tile
    r.close()
    r = build_renderer("causal3dident", render_settings("fast", resolution=16, samples=2, **KNOBS).to_dict())
    cy = bpy.context.scene.cycles
    got = {"adaptive_sampling": cy.use_adaptive_sampling, "adaptive_threshold": round(cy.adaptive_threshold, 6),
           "adaptive_min_samples": cy.adaptive_min_samples, "light_tree": cy.use_light_tree,
           "filter_width": cy.filter_width, "tile_size": cy.tile_size, "denoise_quality": cy.denoising_quality}
    assert got == KNOBS
    r.close()


def test_a_wider_pixel_filter_changes_the_image():
    import numpy as np

    from ident3d.causal import load_scm
    from ident3d.render.blender import build_renderer

    s = load_scm("causal3dident").sample(2, seed=3)
    step = []
    for width in (1.5, 4.0):
        r = build_renderer("causal3dident", render_settings("fast", resolution=24, filter_width=width).to_dict())
        img = r.render_batch(s.latents, s.classes).astype(np.float64)
        r.close()
        step.append(np.abs(np.diff(img, axis=1)).mean() + np.abs(np.diff(img, axis=2)).mean())
    # a wider filter blurs: neighbouring pixels differ less (denoised, so noise does not hide it: 10.8 vs 7.8 grey
    # levels when written)
    assert step[1] < 0.9 * step[0]
