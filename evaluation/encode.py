"""Encode a store with a trained run: the encoder's inner layer (``features``) and its output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zarr

from causal.errors import UserError
from store.zarr_io import chunk_bounds, read_rows


def load_run(run_dir: str | Path) -> tuple[Any, torch.nn.Module]:
    """(TrainConfig, objective with trained weights) from a run directory."""
    from training.trainer import CHECKPOINT, TrainConfig, load_checkpoint

    run = Path(run_dir)
    if not (run / "config.json").is_file():
        raise UserError(f"{run} is not a run directory (no config.json); make one with `ident3d train`")
    if not (run / CHECKPOINT).is_file():
        raise UserError(f"{run} has no {CHECKPOINT} yet; train it (or let it reach its first checkpoint) first")
    cfg = TrainConfig(**json.loads((run / "config.json").read_text()))
    return cfg, load_checkpoint(run / CHECKPOINT)


def trained_objective(cfg: Any, state: dict[str, Any], info: Any, device: str = "cpu") -> torch.nn.Module:
    """The run's objective (encoder and whatever the method adds) with its trained weights, in eval mode."""
    from training.components import build_encoder_for
    from training.objectives import OBJECTIVES

    objective = OBJECTIVES.get(cfg.objective)(build_encoder_for(cfg, info), **cfg.objective_args)
    objective.load_state_dict(state["model"])
    return objective.to(device).eval()


def encode_store(cfg: Any, state: dict[str, Any], info: Any, rows: np.ndarray, device: str = "cpu",
                 batch_size: int = 256) -> dict[str, np.ndarray]:
    """{"inner": (N, H), "output": (N, D), "latents": (N, L), "classes": (N,) or absent} for ``rows``, plus any
    further layers the objective's ``representations`` names (e.g. CRL-TAC's top-crop averages).

    A damaged chunk is a one-line :class:`store.zarr_io.CorruptChunkError` naming it, not a codec traceback.
    """
    from training.views import Normalize, to_float

    objective = trained_objective(cfg, state, info, device)
    norm = Normalize(tuple(cfg.normalize["mean"]), tuple(cfg.normalize["std"]))
    g = zarr.open_group(info.path, mode="r")
    layers: dict[str, list[np.ndarray]] = {}
    chunks = np.unique(rows // info.chunk_size)
    keep = []
    with torch.no_grad():
        for k in chunks:
            lo, hi = chunk_bounds(int(k), info.chunk_size, info.n)
            sel = rows[(rows >= lo) & (rows < hi)]
            images = read_rows(g["images"], slice(lo, hi), info.path)[sel - lo]
            keep.append(sel)
            for i in range(0, len(images), batch_size):
                x = norm(to_float(torch.from_numpy(images[i:i + batch_size]).to(device)))
                for name, z in objective.representations(x).items():
                    layers.setdefault(name, []).append(z.float().cpu().numpy())
    order = np.concatenate(keep)
    out = {**{name: np.concatenate(zs) for name, zs in layers.items()}, "rows": order,
           "latents": read_rows(g["latents"], slice(None), info.path)[order]}
    if info.class_names:
        out["classes"] = read_rows(g["classes"], slice(None), info.path)[order]
    return out
