"""What every image dataset shares: the arrays one split comes as (``ImageDataset``), resizing, and the registry
``DATASETS`` of ``Dataset`` classes, each registered by name in its own module of this package."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch.nn import functional as F

from ident3d.causal.registry import Registry

DATASETS = Registry("dataset", hint="ident3d dataset --help")
# bytes per value (image x pixel x channel) while a whole set is resized: its float32 input, interpolated, rounded
# and clamped copies, then the uint8 result (measured 12.3 for mnist5k at 128 px)
RESIZE_BYTES_PER_VALUE = 13


@dataclass(frozen=True)
class ImageDataset:
    """Images uint8 (N, H, W, 3) and one or more integer labels; ``labels`` keeps the main one first."""

    name: str
    images: np.ndarray
    labels: dict[str, np.ndarray]
    label_names: dict[str, list[str]]

    @property
    def classes(self) -> np.ndarray:
        """The main label (the one probes classify)."""
        return next(iter(self.labels.values()))


def resize(images: np.ndarray, size: int) -> np.ndarray:
    """uint8 (N, H, W, C) -> uint8 (N, size, size, C), bilinear with antialiasing."""
    if images.shape[1] == size and images.shape[2] == size:
        return images
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float()
    y = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return y.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()


def to_rgb(images: np.ndarray) -> np.ndarray:
    """(N, H, W) grey or (N, H, W, 3) -> (N, H, W, 3) uint8."""
    images = np.asarray(images)
    return np.repeat(images[..., None], 3, axis=-1) if images.ndim == 3 else images


class Dataset:
    """A named image dataset (``@DATASETS.register("NAME")``): how one split is loaded, and what it costs in memory
    before it is (so ``ident3d dataset`` refuses a set no machine holds before reading anything)."""

    registry_name: ClassVar[str]
    rows: ClassVar[tuple[int, int]]  # images in the (train, test) split
    native: ClassVar[int]  # the size its images come in (0: resized one by one, CelebA's crops)
    default_size: ClassVar[int] = 28  # image size without --size

    def load(self, root: str | None, train: bool, download: bool, size: int | None) -> ImageDataset:
        """One split, its images ``size`` px (None: ``default_size``); ``root`` and ``download`` for downloaded sets."""
        raise NotImplementedError

    def image_size(self, size: int | None) -> int:
        """The size its images are made in: ``size``, else its default."""
        return size or self.default_size

    def count(self, train: bool) -> int:
        """Images in a split."""
        return self.rows[0 if train else 1]

    def bytes_per_value(self, size: int) -> int:
        """Peak bytes per image value while a split is made at ``size`` px: ``RESIZE_BYTES_PER_VALUE`` while the
        set is resized, 1 when it comes in that size."""
        return RESIZE_BYTES_PER_VALUE if self.native and self.native != size else 1

    def memory(self, train: bool, size: int | None) -> int:
        """Estimated peak bytes of making a split and writing it: count x size^2 x 3 values x bytes per value."""
        size = self.image_size(size)
        return self.count(train) * size * size * 3 * self.bytes_per_value(size)
