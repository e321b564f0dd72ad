"""Image helpers shared by the benchmark scripts: PSNR and a captioned grid of image rows saved as a PNG."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two uint8 images (peak 255); inf for identical images."""
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255.0**2 / mse)) if mse > 0 else float("inf")


def image_grid(path: str | Path, rows: Sequence[tuple[str, np.ndarray]], captions: dict[int, Sequence[str]],
               title: str, cell: float = 1.6) -> None:
    """Save rows of images (one labelled row per (label, (N, H, W, 3) array)); ``captions[r]`` go under row r."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(len(imgs) for _, imgs in rows)
    fig, axes = plt.subplots(len(rows), n, figsize=(cell * n, cell * len(rows) + 0.6), squeeze=False)
    for r, (label, imgs) in enumerate(rows):
        for i, ax in enumerate(axes[r]):
            ax.set_xticks([])
            ax.set_yticks([])
            if i < len(imgs):
                ax.imshow(imgs[i])
            if i == 0:
                ax.set_ylabel(label, fontsize=8)
            if r in captions and i < len(captions[r]):
                ax.set_xlabel(captions[r][i], fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
