"""Paper 004's image benchmarks read by torchvision from a local root: MNIST, FashionMNIST, EMNIST (balanced
split), CIFAR10 and CelebA (64 px; gender and hair colour). Files are downloaded only with ``download``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.ingest.datasets.base import DATASETS, Dataset, ImageDataset, resize, to_rgb

HAIR_COLOURS = ("Black_Hair", "Blond_Hair", "Brown_Hair", "Gray_Hair")  # CelebA's hair-colour attributes


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


class TorchvisionSet(Dataset):
    """A dataset torchvision reads from ``root`` (the folder holding its files): refused without one."""

    def load(self, root: str | None, train: bool, download: bool, size: int | None) -> ImageDataset:
        name = self.registry_name
        if root is None:
            raise UserError(f"dataset {name} needs --root, the folder holding torchvision's {name} files")
        import torchvision.datasets as tvd

        ds = _torchvision(name, lambda: self.make(tvd, root, train, download), root)
        return self.arrays(ds, self.image_size(size))

    def make(self, tvd: Any, root: str, train: bool, download: bool) -> Any:
        """The torchvision dataset of a split (``tvd``: ``torchvision.datasets``)."""
        raise NotImplementedError

    def arrays(self, ds: Any, size: int) -> ImageDataset:
        """Its images at ``size`` px and labels."""
        raise NotImplementedError


class GreySet(TorchvisionSet):
    """A 28 px grey torchvision set (the ``tv_class`` of ``torchvision.datasets``), labelled by its classes."""

    rows: ClassVar[tuple[int, int]] = (60000, 10000)
    native = 28
    tv_class: ClassVar[str]
    options: ClassVar[dict[str, Any]] = {}
    transposed: ClassVar[bool] = False  # its files store images transposed (EMNIST)

    def make(self, tvd: Any, root: str, train: bool, download: bool) -> Any:
        return getattr(tvd, self.tv_class)(root, train=train, download=download, **self.options)

    def arrays(self, ds: Any, size: int) -> ImageDataset:
        grey = ds.data.numpy()
        if self.transposed:
            grey = grey.transpose(0, 2, 1)
        return ImageDataset(self.registry_name, resize(to_rgb(grey), size),
                            {"class": ds.targets.numpy().astype(np.int64)}, {"class": [str(c) for c in ds.classes]})


@DATASETS.register("mnist")
class Mnist(GreySet):
    """MNIST (60,000 train / 10,000 test handwritten digits): paper 004's grey benchmark."""

    tv_class = "MNIST"


@DATASETS.register("fashionmnist")
class FashionMnist(GreySet):
    """FashionMNIST (60,000 / 10,000 clothing images, 10 classes): MNIST's size with harder classes."""

    tv_class = "FashionMNIST"


@DATASETS.register("emnist")
class Emnist(GreySet):
    """EMNIST's balanced split (112,800 / 18,800 letters and digits, 47 classes): more classes at MNIST's size."""

    rows, tv_class, options, transposed = (112800, 18800), "EMNIST", {"split": "balanced"}, True


@DATASETS.register("cifar10")
class Cifar10(TorchvisionSet):
    """CIFAR10 (50,000 / 10,000 32 px colour images, 10 classes): paper 004's colour benchmark."""

    rows, native, default_size = (50000, 10000), 32, 32

    def make(self, tvd: Any, root: str, train: bool, download: bool) -> Any:
        return tvd.CIFAR10(root, train=train, download=download)

    def arrays(self, ds: Any, size: int) -> ImageDataset:
        return ImageDataset(self.registry_name, resize(ds.data, size), {"class": np.asarray(ds.targets, np.int64)},
                            {"class": list(ds.classes)})


@DATASETS.register("celeba")
class CelebA(TorchvisionSet):
    """CelebA faces (162,770 / 19,962), centre-cropped to 64 px, labelled by gender and hair colour: two labels."""

    rows, native, default_size = (162770, 19962), 0, 64

    def make(self, tvd: Any, root: str, train: bool, download: bool) -> Any:
        return tvd.CelebA(root, split="train" if train else "test", target_type="attr", download=download)

    def arrays(self, ds: Any, size: int) -> ImageDataset:
        return celeba_arrays(ds, size)


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
