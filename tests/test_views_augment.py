"""Tests for the DA view makers: each recipe changes what it should, keeps what it should, and is reproducible."""

from __future__ import annotations

import pytest
import torch
from kornia.color import rgb_to_grayscale
from kornia.filters import sobel

from ident3d.causal.errors import UserError
from ident3d.training.views import Normalize, make_view_maker, to_float

IDENTITY = Normalize((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))


def shapes(b: int = 16, size: int = 32, seed: int = 0) -> torch.Tensor:
    """uint8 (B, H, W, 3): dark background with two bright rectangles of random colour and place per sample."""
    g = torch.Generator().manual_seed(seed)
    img = torch.full((b, size, size, 3), 20, dtype=torch.uint8)
    for i in range(b):
        for _ in range(2):
            h, w = (int(v) for v in torch.randint(size // 5, size // 2, (2,), generator=g))
            y, x = (int(v) for v in torch.randint(0, size - max(h, w), (2,), generator=g))
            img[i, y:y + h, x:x + w] = torch.randint(120, 256, (3,), generator=g, dtype=torch.uint8)
    return img


def checkerboard(b: int = 16, size: int = 64, cell: int = 4) -> torch.Tensor:
    """uint8 (B, H, W, 3) checkerboard of two colours: its edge density measures the content's scale."""
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    on = ((yy // cell + xx // cell) % 2).bool()
    img = torch.where(on[..., None], torch.tensor([230, 60, 40]), torch.tensor([30, 90, 210]))
    return img.to(torch.uint8).expand(b, size, size, 3).contiguous()


def ramps(b: int = 16, size: int = 64) -> torch.Tensor:
    """uint8 (B, H, W, 3) whose red channel encodes x and green encodes y (to read back where a crop came from)."""
    r = torch.linspace(0, 255, size)
    img = torch.stack([r.view(1, -1).expand(size, size), r.view(-1, 1).expand(size, size),
                       torch.full((size, size), 128.0)], dim=-1)
    return img.round().to(torch.uint8).expand(b, size, size, 3).contiguous()


def run(spec: str, images: torch.Tensor, seed: int = 0, normalize: Normalize = IDENTITY):
    """Views and sampled parameters of one call of the named view maker."""
    vm = make_view_maker(spec, normalize)
    views = vm({"images": images}, torch.Generator().manual_seed(seed))
    return views, vm.last_params


def edge_corr(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-sample Pearson correlation of the Sobel magnitudes of the grayscale images (B,)."""
    ea, eb = (sobel(rgb_to_grayscale(x)).flatten(1) for x in (a, b))
    ea, eb = ea - ea.mean(1, keepdim=True), eb - eb.mean(1, keepdim=True)
    return (ea * eb).sum(1) / (ea.norm(dim=1) * eb.norm(dim=1) + 1e-12)


def edge_density(x: torch.Tensor) -> torch.Tensor:
    """Per-sample fraction of neighbour pairs whose red channel crosses mid-grey: cell edges per pixel (B,)."""
    bright = x[:, 0] > 0.5
    return ((bright.diff(dim=-1) != 0).float().mean((1, 2)) + (bright.diff(dim=-2) != 0).float().mean((1, 2))) / 2


def test_outputs_are_two_float_views_on_input_device_and_normalised():
    images = shapes(4)
    norm = Normalize((0.5, 0.25, 0.125), (0.5, 0.25, 2.0))
    vm = make_view_maker("none", norm)
    views = vm({"images": images}, torch.Generator().manual_seed(0))
    assert vm.n_views == 2 and len(views) == 2
    expected = (to_float(images) - torch.tensor([0.5, 0.25, 0.125]).view(1, 3, 1, 1)) / torch.tensor(
        [0.5, 0.25, 2.0]).view(1, 3, 1, 1)
    for v in views:
        assert v.dtype == torch.float32 and v.shape == (4, 3, 32, 32) and v.device == images.device
        assert torch.allclose(v, expected)
    for spec in ("crop_small", "colour", "rotation", "crop_large+rotation+colour"):
        for v in run(spec, images)[0]:
            assert v.dtype == torch.float32 and v.shape == (4, 3, 32, 32) and v.device == images.device


def test_unknown_name_raises_one_line_user_error_listing_names():
    for bad in ("wheels", "crop_large+wheels", "crop_large+crop_small"):
        with pytest.raises(UserError) as err:
            make_view_maker(bad, IDENTITY)
        assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="crop_large.*rotation"):
        make_view_maker("wheels", IDENTITY)


def test_colour_keeps_geometry_and_changes_colours():
    images = shapes(32)
    anchor = to_float(images)
    views, params = run("colour", images)
    for i, v in enumerate(views):
        applied = params[f"view{i}/jitter_applied"] | params[f"view{i}/grayscale"]
        corr = edge_corr(anchor, v)
        assert corr[applied].min() > 0.8
        diff = (v - anchor).abs().mean((2, 3)).max(1).values  # largest per-channel mean change
        assert (diff > 0.03).float().mean() > 0.6
        assert (diff[applied] > 0.0).all()
        assert torch.allclose(v[~applied], anchor[~applied])  # untouched samples are the anchor exactly
        gray = params[f"view{i}/grayscale"]
        assert torch.allclose(v[gray][:, 0], v[gray][:, 1]) and torch.allclose(v[gray][:, 1], v[gray][:, 2])
        b = params[f"view{i}/brightness"]
        assert ((b >= 0.2) & (b <= 1.8)).all() and (params[f"view{i}/hue"].abs() <= 0.2).all()


def test_rotation_views_are_exact_distinct_quarter_turns():
    images = shapes(64)
    anchor = to_float(images)
    views, params = run("rotation", images)
    k0, k1 = params["view0/rotation_k"], params["view1/rotation_k"]
    assert (k0 != k1).all()
    for v, ks in zip(views, (k0, k1), strict=True):
        assert set(ks.tolist()) == {0, 1, 2, 3}
        for i, k in enumerate(ks.tolist()):
            assert torch.equal(torch.rot90(v[i], -k, dims=(1, 2)), anchor[i])


@pytest.mark.parametrize("size", [32, 48])
def test_crop_views_are_resized_subregions_given_by_crop_box(size):
    images = ramps(16, size)
    views, params = run("crop_large", images)
    for i, v in enumerate(views):
        box, flip = params[f"view{i}/crop_box"], params[f"view{i}/flip"]
        v = torch.where(flip.view(-1, 1, 1, 1), v.flip(-1), v)  # undo the flip
        x0, x1, y0, y1 = box[:, 0, 0], box[:, 1, 0], box[:, 0, 1], box[:, 2, 1]
        tol = 1.5 / size
        assert torch.allclose(v[:, 0, :, 0].mean(1), x0 / (size - 1), atol=tol)
        assert torch.allclose(v[:, 0, :, -1].mean(1), x1 / (size - 1), atol=tol)
        assert torch.allclose(v[:, 1, 0, :].mean(1), y0 / (size - 1), atol=tol)
        assert torch.allclose(v[:, 1, -1, :].mean(1), y1 / (size - 1), atol=tol)
        area = (x1 - x0 + 1) * (y1 - y0 + 1) / size**2
        assert (area > 0.7).all() and (area <= 1.0).all()


def test_crops_enlarge_content_small_more_than_large():
    images = checkerboard(32)
    base = edge_density(to_float(images)).mean()
    large = torch.cat(run("crop_large", images)[0])
    small = torch.cat(run("crop_small", images)[0])
    ratio_large, ratio_small = edge_density(large).mean() / base, edge_density(small).mean() / base
    assert 0.9 < ratio_large < 0.98  # about sqrt(mean area) = 0.95
    assert ratio_small < ratio_large - 0.15  # about 0.7


def test_flips_occur_about_half_the_time_and_match_content():
    images = torch.zeros(64, 32, 32, 3, dtype=torch.uint8)
    images[:, :, :16, 0] = 255  # left half red, right half blue: a large crop keeps red at the left unless flipped
    images[:, :, 16:, 2] = 255
    views, params = run("crop_large", images)
    for i, v in enumerate(views):
        flip = params[f"view{i}/flip"]
        assert 0.25 < flip.float().mean() < 0.75
        left_red = v[:, 0, :, 0].mean(1) > v[:, 2, :, 0].mean(1)
        assert torch.equal(left_red, ~flip)


def test_same_seed_same_views_different_seed_different_views():
    images = shapes(8)
    state = torch.get_rng_state()
    for spec in ("crop_small+colour", "rotation"):
        a, pa = run(spec, images, seed=1)
        b, pb = run(spec, images, seed=1)
        c, _ = run(spec, images, seed=2)
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
        assert pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)
        assert not torch.equal(a[0], c[0])
        assert not torch.equal(a[0], a[1])  # the two views are drawn independently
    assert torch.equal(state, torch.get_rng_state())  # the global RNG is left alone


def test_combination_applies_crop_then_colour():
    images = checkerboard(32, 32)
    anchor = to_float(images)
    vm = make_view_maker("colour+crop_large", IDENTITY)
    assert [s.kind for s in vm.stages] == ["crop", "colour"] and vm.spec == "crop_large+colour"
    views = vm({"images": images}, torch.Generator().manual_seed(0))
    params = vm.last_params
    assert "view0/crop_box" in params and "view0/brightness" in params
    colour_only = run("colour", images)[0]
    for v, c in zip(views, colour_only, strict=True):
        assert edge_corr(anchor, v).mean() < edge_corr(anchor, c).mean() - 0.3  # geometry moved
        diff = (v.mean((2, 3)) - anchor.mean((2, 3))).abs().max(1).values
        assert (diff > 0.03).float().mean() > 0.6  # colours changed


# ---------------------------------------------------------------- settings (issue 34.6: every knob exposed)


def test_default_settings_give_the_recipes_own_views():
    """A recipe written with its own values is today's recipe, bit for bit (their configs and cells stay valid)."""
    images = shapes(16, 32)
    for spec, same in (("colour", "colour(strength=1, brightness=0.8, grey_p=0.2)"),
                       ("crop_large", "crop_large(scale_min=0.8, flip_p=0.5)"),
                       ("crop_small+colour", "crop_small(scale_max=1)+colour(jitter_p=0.8)")):
        a, _ = run(spec, images, seed=3)
        b, _ = run(same, images, seed=3)
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True)), spec


def test_colour_strength_scales_the_jitter_range():
    """SimCLR's strength s: brightness factors within 1 +- 0.8 s. At s = 0.25 every factor lies in [0.8, 1.2]; at the
    default (s = 1) some lie outside, so the bound is the setting's, not any draw's."""
    images = shapes(64, 16)
    _, weak = run("colour(strength=0.25, jitter_p=1)", images)
    _, full = run("colour(jitter_p=1)", images)
    f_weak = torch.cat([weak[f"view{i}/brightness"] for i in (0, 1)])
    f_full = torch.cat([full[f"view{i}/brightness"] for i in (0, 1)])
    assert ((f_weak >= 0.8 - 1e-6) & (f_weak <= 1.2 + 1e-6)).all()
    assert ((f_full < 0.8) | (f_full > 1.2)).float().mean() > 0.3
    _, none = run("colour(grey_p=0, jitter_p=0)", images)
    assert not any(none[f"view{i}/{k}"].any() for i in (0, 1) for k in ("grayscale", "jitter_applied"))


def test_crop_scale_min_bounds_the_crop_area():
    images = ramps(32, 32)
    for spec, low in (("crop_small(scale_min=0.5)", 0.5), ("crop_small", 0.08)):
        _, params = run(spec, images)
        box = params["view0/crop_box"]
        area = (box[:, 1, 0] - box[:, 0, 0] + 1) * (box[:, 2, 1] - box[:, 0, 1] + 1) / 32**2
        assert (area >= low - 0.05).all(), spec
    assert (area < 0.45).any()  # crop_small's own range reaches below the 0.5 floor: the floor is the setting's


@pytest.mark.parametrize("spec,message", [
    ("colour(strength=-1)", "DA recipe colour's setting strength must be a finite number >= 0, got -1"),
    ("colour(strength=2)", "strength x brightness, contrast and saturation must be at most 1"),
    ("colour(bogus=1)", "DA recipe colour has no setting 'bogus'; it takes: strength, brightness"),
    ("crop_large(scale_min=0)", "setting scale_min must be a finite number > 0 and <= 1, got 0"),
    ("crop_large(scale_min=0.9, scale_max=0.5)", "needs 0 < scale_min <= scale_max"),
    ("colour(strength 0.5)", "expected KEY=VALUE, got 'strength 0.5'"),
    ("colour(strength=0.5", "settings go in parentheses"),
    ("blur(sigma=1)+colour", "unknown DA recipe 'blur(sigma=1)'"),
])
def test_bad_settings_are_one_line(spec, message):
    with pytest.raises(UserError, match=None) as err:
        make_view_maker(spec, IDENTITY)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_recipes_spec_is_canonical():
    vm = make_view_maker("colour(strength=.5)+crop_large(flip_p=0)", IDENTITY)
    assert vm.spec == "crop_large(flip_p=0.0)+colour(strength=0.5)"
