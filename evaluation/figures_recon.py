"""Paper 004's Fig. 2: originals next to each method's reconstructions, one row of images per method."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np


def to_display(x: np.ndarray) -> np.ndarray:
    """(N, C, H, W) or (N, H, W, C) floats in [0, 1] -> (N, H, W, 3) clipped, grey repeated to RGB."""
    x = np.asarray(x, float)
    if x.ndim == 4 and x.shape[1] in (1, 3) and x.shape[-1] not in (1, 3):
        x = x.transpose(0, 2, 3, 1)
    if x.shape[-1] == 1:
        x = np.repeat(x, 3, axis=-1)
    return np.clip(x, 0.0, 1.0)


def reconstruction_figure(originals: np.ndarray, reconstructions: Mapping[str, np.ndarray], out: str | Path,
                          title: str = "") -> Path:
    """Save a grid: the first row the originals, then one row per method (images in [0, 1]); returns ``out``."""
    matplotlib.use("Agg")  # files only, no display
    rows = {"original": to_display(originals), **{k: to_display(v) for k, v in reconstructions.items()}}
    n = len(rows["original"])
    fig, axes = plt.subplots(len(rows), n, figsize=(0.9 * n + 1.4, 0.95 * len(rows) + 0.4), squeeze=False)
    for r, (name, images) in enumerate(rows.items()):
        for c in range(n):
            ax = axes[r][c]
            ax.imshow(images[c], interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(name, rotation=0, ha="right", va="center", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return Path(out)
