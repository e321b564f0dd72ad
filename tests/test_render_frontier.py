"""benchmarks/render_frontier.py: the --tiny sweep for real (32 px, 2 images, 3 points and the 512-sample reference,
each rendered by bpy in its own process; tests/test_benchmarks_tiny.py leaves this script to this test), its JSON, its
checks, and derive_fast / pareto on constructed results."""

from __future__ import annotations

import json
import math

import pytest
from helpers import benchmark

rf = benchmark("render_frontier")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("frontier")
    rf.main(["--tiny", "--out", str(tmp / "f.json"), "--cache-dir", str(tmp / "cache")])
    return tmp, json.loads((tmp / "f.json").read_text())


def test_tiny_run_writes_every_field(tiny):
    tmp, got = tiny
    assert (tmp / "f.png").stat().st_size > 0
    assert len(list((tmp / "cache").glob("reference_32px_*.npz"))) == 1  # the reference is kept for the next run
    for key in ("command", "revision", "machine", "scene", "seed", "resolutions", "derive_fast"):
        assert key in got, key
    assert len(got["revision"]) == 40 and got["machine"]["cores"] >= 1 and "--tiny" in got["command"]
    row = got["resolutions"]["32"]
    assert row["n"] == 2 and len(row["points"]) == 4  # the reference and 3 configurations
    for p in row["points"]:
        assert set(rf.KNOBS) == set(p["settings"]), p["label"]
        assert p["ms_per_img"] > 0 and p["img_per_s"] == pytest.approx(1000 / p["ms_per_img"])
        assert math.isinf(p["psnr"]) if p["reference"] else 10 < p["psnr"] < 80
        assert 0 < p["ssim"] <= 1
    assert set(row["frontier"]) <= {p["label"] for p in row["points"] if not p["reference"]}
    assert set(got["derive_fast"]) == {"32"}


def test_today_fast_is_one_labelled_point(tiny):
    _, got = tiny
    fast = [p for p in got["resolutions"]["32"]["points"] if p["fast"]]
    assert len(fast) == 1
    assert fast[0]["settings"] == rf.light_transport(rf.render_settings("fast"))


def test_reference_scores_inf_and_one_against_itself(tiny):
    _, got = tiny
    ref = [p for p in got["resolutions"]["32"]["points"] if p["reference"]]
    assert len(ref) == 1 and ref[0]["settings"]["samples"] == 512 and ref[0]["settings"]["denoise_prefilter"] == "ACCURATE"
    assert ref[0]["psnr"] == math.inf and ref[0]["ssim"] == pytest.approx(1.0, abs=1e-12)
    others = [p for p in got["resolutions"]["32"]["points"] if not p["reference"]]
    assert all(p["ssim"] < 1 and math.isfinite(p["psnr"]) for p in others)  # rendering differently is scored


def test_fewer_samples_never_score_higher(tiny):
    """The tiny sweep holds a pair differing only in samples (8 vs 32, no denoiser: the noise variance falls 4x);
    sample_order finds no pair where fewer samples beat more by its margin, and the undenoised pair is in order by
    far more (0.74 vs 0.95 SSIM when written)."""
    _, got = tiny
    row = got["resolutions"]["32"]
    assert row["sample_pairs"] == 1 and row["sample_order_violations"] == []
    by = {p["label"]: p for p in row["points"]}
    assert by["8 spp, no denoiser"]["ssim"] + 0.05 < by["32 spp, no denoiser"]["ssim"]
    assert by["8 spp, no denoiser"]["psnr"] + 1 < by["32 spp, no denoiser"]["psnr"]
    # the check flags a pair out of order (and ignores one within the margin)
    swapped = [{**p, "ssim": by["32 spp, no denoiser"]["ssim"]} if p["label"] == "8 spp, no denoiser" else
               {**p, "ssim": by["8 spp, no denoiser"]["ssim"]} if p["label"] == "32 spp, no denoiser" else p
               for p in row["points"]]
    assert [v["fewer"] for v in rf.sample_order(swapped)] == ["8 spp, no denoiser"]
    close = [{**p, "ssim": by["32 spp, no denoiser"]["ssim"] + 0.5 * rf.SAMPLE_ORDER_MARGIN}
             if p["label"] == "8 spp, no denoiser" else p for p in row["points"]]
    assert rf.sample_order(close) == []


def _point(label, ms, psnr, ssim, samples, fast=False, reference=False):
    settings = {**rf.light_transport(rf.render_settings("fast")), "samples": samples}
    return {"label": label, "ms_per_img": ms, "psnr": psnr, "ssim": ssim, "settings": settings, "fast": fast,
            "reference": reference}


def test_derive_fast_picks_the_fastest_point_no_worse_than_fast():
    results = {"resolutions": {
        "64": {"points": [
            _point("reference", 5.0, math.inf, 1.0, 512, reference=True),  # fast on paper, but the reference
            _point("fast", 50.0, 36.0, 0.970, 16, fast=True),
            _point("cheap, worse", 10.0, 30.0, 0.900, 2),
            _point("better SSIM, lower PSNR", 20.0, 35.9, 0.990, 4),
            _point("equal quality, faster", 30.0, 36.0, 0.970, 8),
            _point("better, slower than the pick", 40.0, 38.0, 0.980, 12),
            _point("better, slow", 90.0, 40.0, 0.995, 64)]},
        "128": {"points": [
            _point("fast", 100.0, 35.0, 0.960, 16, fast=True),
            _point("cheap, worse", 40.0, 34.0, 0.960, 4),
            _point("slow", 200.0, 37.0, 0.980, 64)]}}}
    got = rf.derive_fast(results)
    assert set(got) == {64, 128}
    assert got[64]["samples"] == 8  # ties with fast are allowed ("no lower")
    assert got[128]["samples"] == 16  # nothing faster is as good: today's fast
    assert rf.pareto(results["resolutions"]["64"]["points"][1:]) == [
        "cheap, worse", "better SSIM, lower PSNR", "better, slow"]
    # faster only within the timing noise (one of its repeats as slow as fast's fastest): today's fast stays
    results["resolutions"]["64"]["points"][1]["runs_ms_per_img"] = [50.0, 52.0]
    results["resolutions"]["64"]["points"][4]["runs_ms_per_img"] = [30.0, 50.0]
    assert rf.derive_fast(results)[64]["samples"] == 12  # the next pick, faster in every repeat
    results["resolutions"]["64"]["points"][5]["runs_ms_per_img"] = [40.0, 51.0]
    assert rf.derive_fast(results)[64]["samples"] == 16
