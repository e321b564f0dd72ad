"""The GPU kit at toy size (``run.py --tiny``): two tiny Causal3DIdent stores (64 images of 32 px; the train store
with exact ``pos`` LT pairs) rendered with Blender where it is, and a tiny compare config (``tiny.yaml``) whose stores
are those two, so its experiment trains on them as it would on carried paper-scale stores."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from kit_cli import run_ident3d, tail
from kit_pack_format import KitError

STEM = "tiny"  # the config's file stem: its stores travel as data tiny.train and tiny.test
RENDER = {"train": ["--scene", "causal3dident", "--n", "64", "--resolution", "32", "--samples", "2",
                    "--views", "pos:positions"],
          "test": ["--scene", "causal3dident", "--n", "64", "--resolution", "32", "--samples", "2", "--seed", "1"]}
# the same stores as RENDER (the engine finds them complete and renders nothing), a 3-step grid of two rows
CONFIG: dict[str, Any] = {
    "kind": "compare", "name": "gpu_kit_tiny", "scene": "causal3dident",
    "stores": {"train": {"n": 64, "resolution": 32, "samples": 2, "seed": 0, "views": "pos:positions"},
               "test": {"n": 64, "resolution": 32, "samples": 2, "seed": 1}},
    "train": {"objective": "infonce", "encoder": "cnn", "out_dim": 9, "steps": 3, "batch_size": 32, "lr": 0.001},
    "seeds": [0], "evaluate": {"fit": 24, "score": 32},
    "rows": [{"name": "DA: colour distortion", "views": "colour"},
             {"name": "LT: change positions", "views": "lt_exact:pos"}],
}
THROUGHPUT = {"encoder": "cnn", "batch_size": 8, "steps": 1, "loader_workers": 0}  # the throughput job at toy size


def tiny_stores(work: Path) -> dict[str, Path]:
    """Render the tiny stores under ``WORK/tiny`` (once: a finished one is kept) and return them by data name
    (``tiny.train``, ``tiny.test``) as absolute paths (the render runs in a folder of its own, where a relative
    ``work`` would name another place); where this Python has no Blender, one line saying where to get them."""
    folder = work.resolve() / "tiny"
    stores = {}
    for key, args in RENDER.items():
        store, done = folder / f"{key}.zarr", folder / f"{key}.done"
        if not done.is_file() or not (store / "zarr.json").is_file():  # a marker without its store: render again
            if importlib.util.find_spec("bpy") is None:
                raise KitError("the tiny stores are rendered with Blender (bpy), which this Python lacks: build the "
                               "pack with pack.py --tiny-data where bpy is and pass it with --pack")
            log = folder / f"render_{key}.log"
            code, _ = run_ident3d(["render", *args, "--out", str(store), "--no-progress", "--overwrite"], log, [],
                                  timeout_s=300)
            if code != 0:
                raise KitError(f"rendering the tiny {key} store failed: {' | '.join(tail(log, 3))}")
            done.write_text(json.dumps(args) + "\n")
        stores[f"{STEM}.{key}"] = store
    return stores


def tiny_config(work: Path) -> Path:
    """Write the tiny compare config as ``WORK/tiny/tiny.yaml`` (JSON is YAML) and return it."""
    path = work / "tiny" / f"{STEM}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(CONFIG, indent=1) + "\n")
    return path
