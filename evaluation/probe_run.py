"""What probing a trained run on labelled images takes (paper 004): its objective with trained weights, its
representation of uint8 images, and reconstructions (the run's own decoder, or a decoder fit on frozen features for
discriminative runs); ``ident3d.evaluation.probe_report`` and the probe metrics build on these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ident3d.causal.errors import UserError
from ident3d.evaluation.recon_probe import decode, fit_decoder
from ident3d.store.info import store_info
from ident3d.store.zarr_io import store_reachable
from ident3d.training.run_dir import RunDir, StoreData, normalizer
from ident3d.training.views import to_float


def load_objective(run_dir: str, image_size: int) -> tuple[Any, torch.nn.Module]:
    """(TrainConfig, objective with trained weights, in eval mode) of a run, built for ``image_size`` px."""
    run = RunDir(Path(run_dir)).load()
    if isinstance(run.data, StoreData) and store_reachable(run.data.path):
        trained = store_info(run.data.path, allow_partial=True).image_size
        if trained != image_size:
            raise UserError(f"the run was trained on {trained} px images but the probe data has {image_size} px; "
                            f"probe on data of the same size (ident3d dataset ... --size {trained})")
    return run.cfg, run.objective("cpu", image_size=image_size)


@torch.no_grad()
def encode(objective: torch.nn.Module, cfg: Any, images: np.ndarray,
           batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(representations (N, Z), normalised images (N, 3, H, W)) of uint8 images (N, H, W, 3)."""
    norm = normalizer(cfg)
    x = torch.cat([norm(to_float(torch.from_numpy(images[i:i + batch_size])))
                   for i in range(0, len(images), batch_size)])
    z = torch.cat([objective.representation(x[i:i + batch_size]) for i in range(0, len(x), batch_size)])
    return z.float().numpy(), x.numpy()


def unnormalise(x: np.ndarray, mean: list[float], std: list[float]) -> np.ndarray:
    """Normalised images (N, C, H, W) back to [0, 1] pixels; one channel (a grey target) uses the channel averages."""
    m, s = np.asarray(mean, float), np.asarray(std, float)
    if x.shape[1] == 1:
        m, s = m.mean(keepdims=True), s.mean(keepdims=True)
    return x * s.reshape(1, -1, 1, 1) + m.reshape(1, -1, 1, 1)


@torch.no_grad()
def reconstructions(objective: torch.nn.Module, x: np.ndarray, z: np.ndarray, fit: np.ndarray, seed: int = 0,
                    epochs: int = 30) -> tuple[np.ndarray, np.ndarray, str]:
    """(targets, reconstructions, how) for all rows, normalised: the run's own decoder if it has one
    (generative objectives), else a decoder fit on the ``fit`` rows' frozen features
    (``ident3d.evaluation.recon_probe``)."""
    xt = torch.from_numpy(x)
    if hasattr(objective, "reconstruct"):
        target = objective.target(xt).numpy()
        rec = torch.cat([objective.reconstruct(xt[i:i + 256]) for i in range(0, len(xt), 256)]).numpy()
        return target, rec, "own decoder"
    with torch.enable_grad():
        decoder = fit_decoder(z[fit], x[fit], epochs=epochs, seed=seed)
    return x, decode(decoder, z), f"decoder fit on frozen features ({epochs} epochs)"
