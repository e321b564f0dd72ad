"""``ident3d probe``: paper 004's classification probes (linear, MLP, kNN, GMM) and reconstruction MSE of a
trained run on a labelled store or a named dataset; generative runs reconstruct with their own decoder,
discriminative runs through a decoder trained on their frozen features."""

from __future__ import annotations

import argparse
import json

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.pipelines.files import check_output, write_atomic


def labelled_images(store: str | None, dataset: str | None, root: str | None, max_images: int,
                    test_split: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 images, classes) of the first ``max_images`` finished rows of a store, or of a named dataset."""
    if dataset:
        from ident3d.ingest.datasets import load_dataset  # torch: not for `ident3d probe --help`

        ds = load_dataset(dataset, root, train=not test_split)
        return ds.images[:max_images], ds.classes[:max_images]

    from ident3d.store.info import store_info  # zarr: not for `ident3d probe --help`
    from ident3d.store.zarr_io import read_rows, store_group

    info = store_info(store, allow_partial=True)
    if not info.class_names:
        raise UserError(f"{store} has no classes to probe; use a labelled store (ident3d dataset) "
                        "or a scene with classes")
    rows = info.rows[:max_images]
    g = store_group(store, mode="r")
    hi = int(rows.max()) + 1
    return (read_rows(g["images"], slice(0, hi), store)[rows], read_rows(g["classes"], slice(0, hi), store)[rows])


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe", help="classification probes (linear, MLP, kNN, GMM) and reconstruction MSE of a trained run",
        description="Encode labelled images with a trained run and score its representation as paper 004 does: "
                    "linear and 2-layer MLP probes, the best kNN (k = 1..15) and a GMM with one component per "
                    "class (accuracy after matching, NMI, ARI), fit on a random part of the images and scored on "
                    "the rest; plus the reconstruction MSE in [0, 1] pixels (generative runs use their decoder, "
                    "discriminative runs a decoder fit on their frozen features).",
        epilog="examples:\n  ident3d probe --run runs/simvae --store stores/digits.zarr --out probe.json\n"
               "  ident3d probe --run runs/vae --run runs/simvae --run runs/simclr --store stores/digits.zarr "
               "--figure fig2.png\n"
               "  ident3d probe --run runs/vae --dataset mnist --root ~/data --figure recon.png",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", dest="run_dirs", action="append", required=True, metavar="RUN_DIR",
                   help="a run directory (ident3d train); repeat to compare runs in one table and figure")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--store", help="a labelled store (e.g. made by `ident3d dataset`)")
    src.add_argument("--dataset", help="a dataset by name: digits, mnist5k, mnist, fashionmnist, emnist, cifar10, "
                     "celeba")
    p.add_argument("--root", help="folder of torchvision's files for --dataset (never downloaded here)")
    p.add_argument("--max-images", type=int, default=20000, help="probe at most this many images (default 20000)")
    p.add_argument("--fit-fraction", type=float, default=0.5,
                   help="share of images the probes are fit on (default 0.5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split and the probes (default 0)")
    p.add_argument("--no-recon", action="store_true", help="skip the reconstruction MSE")
    p.add_argument("--figure", help="save originals vs reconstructions here (.png)")
    p.add_argument("--out", help="write the report as JSON here")
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.max_images < 40:
        raise UserError(f"--max-images must be at least 40, got {args.max_images}")
    out = check_output(args.out, (".json",), args.overwrite) if args.out else None
    figure = check_output(args.figure, (".png",), args.overwrite) if args.figure else None
    images, classes = labelled_images(args.store, args.dataset, args.root, args.max_images)
    from ident3d.evaluation.probe_report import probe_images  # torch, sklearn: not for `ident3d probe --help`

    report = probe_images(args.run_dirs, images, classes, args.fit_fraction, args.seed, recon=not args.no_recon,
                          figure=figure)
    print(report["markdown"])
    if out:
        write_atomic(out, lambda p: p.write_text(json.dumps(report, indent=2) + "\n"))
        print(f"wrote {out}")
    if figure:
        print(f"wrote {figure}")
    return 0
