"""SSIM (Wang, Bovik, Sheikh and Simoncelli 2004) of uint8 RGB images, written plainly in numpy: on luma, with an
11 x 11 Gaussian window (sigma 1.5) normalised to sum 1, K1 = 0.01, K2 = 0.03, L = 255, over the window positions
that lie wholly inside the image (the paper's reference code filters 'valid'), averaged into one mean SSIM."""

from __future__ import annotations

import numpy as np

WINDOW = 11
SIGMA = 1.5
K1, K2, PEAK = 0.01, 0.03, 255.0
LUMA = np.array([0.299, 0.587, 0.114])  # ITU-R BT.601 weights (MATLAB's rgb2gray, what the paper's images used)


def gaussian_kernel(size: int = WINDOW, sigma: float = SIGMA) -> np.ndarray:
    """The 1-D Gaussian whose outer product is the 2-D window (separable), normalised to sum 1."""
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2
    k = np.exp(-(x * x) / (2 * sigma * sigma))
    return k / k.sum()


def filter_valid(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Weighted local means of (..., H, W) under the separable window: rows then columns, 'valid' positions only
    (H - size + 1, W - size + 1), so no padding enters any mean."""
    size = len(kernel)
    rows = np.lib.stride_tricks.sliding_window_view(x, size, axis=-1) @ kernel
    return np.lib.stride_tricks.sliding_window_view(rows, size, axis=-2) @ kernel


def luma(rgb: np.ndarray) -> np.ndarray:
    """(..., H, W, 3) uint8 RGB -> (..., H, W) float64 luma in 0-255 (the channel SSIM is computed on)."""
    return np.asarray(rgb, dtype=np.float64) @ LUMA


def ssim_map(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Local SSIM of two (..., H, W, 3) uint8 images at every valid window position: (..., H - 10, W - 10)."""
    if a.shape != b.shape or a.shape[-1] != 3 or min(a.shape[-3:-1]) < WINDOW:
        raise ValueError(f"ssim needs two RGB images of the same shape, at least {WINDOW} px: {a.shape}, {b.shape}")
    x, y, k = luma(a), luma(b), gaussian_kernel()
    c1, c2 = (K1 * PEAK) ** 2, (K2 * PEAK) ** 2
    mx, my = filter_valid(x, k), filter_valid(y, k)
    vx = filter_valid(x * x, k) - mx * mx  # sigma_x^2 = E[x^2] - mu_x^2 under the window
    vy = filter_valid(y * y, k) - my * my
    cxy = filter_valid(x * y, k) - mx * my
    return ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM of two images or two equally sized stacks of images (every window position of every image)."""
    return float(np.mean(ssim_map(a, b)))
