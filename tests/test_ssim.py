"""benchmarks/ssim.py: parity with an independent SSIM (scipy's Gaussian filter, cropped to the valid positions),
closed-form cases and the order noise must put images in."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import benchmark
from scipy.ndimage import gaussian_filter

ssim_mod = benchmark("ssim", "bench_ssim")


def independent_ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM written from the paper's formula with scipy: 11-tap Gaussian (sigma 1.5, truncate 3.5 -> radius
    5), luma Y = 0.299 R + 0.587 G + 0.114 B, the 5-px border (where the window leaves the image) cropped."""
    def y(img):
        f = img.astype(np.float64)
        return 0.299 * f[..., 0] + 0.587 * f[..., 1] + 0.114 * f[..., 2]

    def mean(v):
        return gaussian_filter(v, 1.5, truncate=3.5)[5:-5, 5:-5]

    x, z = y(a), y(b)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mx, mz = mean(x), mean(z)
    sx, sz, sxz = mean(x * x) - mx ** 2, mean(z * z) - mz ** 2, mean(x * z) - mx * mz
    lum = (2 * mx * mz + c1) / (mx ** 2 + mz ** 2 + c1)
    cs = (2 * sxz + c2) / (sx + sz + c2)
    return float(np.mean(lum * cs))


def image(seed: int, h: int = 30, w: int = 41) -> np.ndarray:
    """A smooth random RGB uint8 image (blurred noise plus a gradient), not square so rows and columns differ."""
    rng = np.random.default_rng(seed)
    base = gaussian_filter(rng.uniform(0, 255, (h, w, 3)), (2, 2, 0)) + np.linspace(0, 60, w)[None, :, None]
    return np.clip(base, 0, 255).astype(np.uint8)


def noisy(img: np.ndarray, sigma: float, seed: int = 0) -> np.ndarray:
    """The image with Gaussian pixel noise of ``sigma`` grey levels."""
    rng = np.random.default_rng(seed)
    return np.clip(img + rng.normal(0, sigma, img.shape), 0, 255).astype(np.uint8)


def test_matches_an_independent_implementation():
    a = image(1)
    for b in (noisy(a, 8), image(2), np.roll(a, 3, axis=0)):
        assert ssim_mod.ssim(a, b) == pytest.approx(independent_ssim(a, b), abs=1e-9)
    assert ssim_mod.ssim_map(a, image(2)).shape == (30 - 10, 41 - 10)


def test_identical_images_score_one_and_noise_lowers_it():
    a = image(3)
    assert ssim_mod.ssim(a, a) == 1.0
    light, heavy = ssim_mod.ssim(a, noisy(a, 5)), ssim_mod.ssim(a, noisy(a, 25))
    assert 1.0 > light > heavy > 0.0
    assert ssim_mod.ssim(noisy(a, 5), a) == pytest.approx(light, abs=1e-12)  # symmetric


def test_flat_images_give_the_luminance_term():
    a = np.full((16, 16, 3), 100, np.uint8)
    b = np.full((16, 16, 3), 120, np.uint8)
    c1 = (0.01 * 255) ** 2
    assert ssim_mod.ssim(a, b) == pytest.approx((2 * 100 * 120 + c1) / (100 ** 2 + 120 ** 2 + c1), rel=1e-12)


def test_stacks_average_their_images():
    a, b = np.stack([image(4), image(5)]), np.stack([noisy(image(4), 10), image(6)])
    assert ssim_mod.ssim(a, b) == pytest.approx((ssim_mod.ssim(a[0], b[0]) + ssim_mod.ssim(a[1], b[1])) / 2)


def test_refuses_images_smaller_than_the_window_or_unequal():
    with pytest.raises(ValueError):
        ssim_mod.ssim(image(1, 10, 10), image(2, 10, 10))
    with pytest.raises(ValueError):
        ssim_mod.ssim(image(1), image(2, 31, 41))
