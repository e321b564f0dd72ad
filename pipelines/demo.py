"""``ident3d demo``: the main job on embedded defaults: render a small Causal3DIdent store on a local
Dask cluster into a local Zarr directory, train one DA and one LT model briefly, evaluate both and
print the two rows (a few minutes on 2 CPU cores)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ident3d.pipelines.files import check_output_dir

DEMO_CONFIG = {
    "name": "demo",
    "scene": "causal3dident",
    "stores": {
        "train": {"n": 512, "resolution": 32, "samples": 8, "seed": 0, "views": "hues:hues"},
        "test": {"n": 384, "resolution": 32, "samples": 8, "seed": 1},
    },
    "train": {"objective": "infonce", "encoder": "cnn", "out_dim": 9, "steps": 300, "batch_size": 128, "lr": 0.001,
              "hp": {"tau": 1.0}},
    "seeds": [0],
    "evaluate": {"fit": 128, "score": 256},
    "rows": [
        {"name": "DA: colour distortion", "views": "colour", "paper": [0.42, 0.61, 0.17, 0.10, 0.01, 0.01, 0.33]},
        {"name": "LT: change hues", "views": "lt_exact:hues", "paper": [1.00, 0.59, 0.91, 0.30, 0.00, 0.00, 0.30]},
    ],
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="render, train (DA and LT) and evaluate a small Causal3DIdent run end to end",
        description="The main job on embedded defaults: render 512 + 384 Causal3DIdent images at 32 px (local "
                    "Dask cluster, local Zarr store), train a DA (colour distortion) and an LT (change hues) "
                    "model and the supervised ceiling (the same encoder trained on the labels) for 300 steps, "
                    "evaluate them, and print their rows of paper 000's table. Re-running "
                    "resumes and skips finished parts.",
        epilog="example: ident3d demo --out runs/demo")
    p.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    p.add_argument("--no-progress", action="store_true", help="no render/training progress bars")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    check_output_dir(args.out)
    stores, train = DEMO_CONFIG["stores"], DEMO_CONFIG["train"]
    # said at once: the imports take seconds
    print(f"ident3d demo: render {stores['train']['n']} + {stores['test']['n']} Causal3DIdent images, train "
          f"{len(DEMO_CONFIG['rows'])} models and their supervised ceiling ({train['steps']} steps each), evaluate "
          f"them -> {args.out}/ (a few minutes on 2 CPU cores; a re-run skips what is done)", flush=True)
    from ident3d.pipelines.kinds.compare import check_config, run_compare  # sklearn: not for --help

    cfg = check_config(DEMO_CONFIG, "demo")
    result = run_compare(cfg, Path(args.out), progress=not args.no_progress)
    print(result["markdown"])
    print(f"\nLT pairs that change the hues should discard them (style, low R^2) and keep positions; colour "
          f"distortion should discard hues too. Done in {time.perf_counter() - t0:.0f} s.")
    print("files: " + ", ".join(result["files"].values()) + f", stores and runs under {args.out}/")
    return 0
