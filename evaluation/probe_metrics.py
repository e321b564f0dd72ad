"""Metrics of labelled image stores, in the one metric registry: paper 004's classification probes (``probe``) and
reconstruction error (``recon``), and paper 002's CRL-TAC scores (``crl_tac``: linear accuracy of each layer under
the learned channel, the frozen channel's oracle ablation, uniformity and where P(T|X) puts its mass). Each reads
the fit and score rows the engine chose, so a compare grid over a dataset store tabulates them like any metric."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ident3d.causal.errors import UserError
from ident3d.evaluation.channel import canvas_cells, cell_columns, cell_oracle, channel_summary
from ident3d.evaluation.metric_base import Metric, ScoringData, register_metric
from ident3d.evaluation.probe_run import encode, reconstructions, unnormalise
from ident3d.evaluation.probe_suite import classification_probes
from ident3d.evaluation.probes import linear_probe_accuracy
from ident3d.evaluation.uniformity import reconstruction_mse, uniformity
from ident3d.ingest.datasets import CANVAS_CELLS
from ident3d.store.zarr_io import read_rows, store_group
from ident3d.training.run_dir import normalizer
from ident3d.training.views import to_float


def split_classes(data: ScoringData) -> tuple[np.ndarray, np.ndarray]:
    """(fit, score) classes of the scored rows (``score`` has checked there are some)."""
    classes, n = data.labels(), len(data.codes_fit)
    return classes[:n], classes[n:]


def scored_images(data: ScoringData) -> np.ndarray:
    """The uint8 images (N, H, W, 3) of the fit rows then the score rows: given, or read from the store."""
    if data.images is not None:
        return data.images
    rows = np.asarray(data.encoded["rows"])
    hi = int(rows.max()) + 1
    group = store_group(data.store.path, mode="r")
    return read_rows(group["images"], slice(0, hi), data.store.path)[rows]


def store_labels(data: ScoringData, name: str) -> np.ndarray:
    """One latent of the scored rows by name (a dataset store's labels, e.g. a canvas's ``cell_row``)."""
    names = list(data.store.latent_names)
    if name not in names:
        raise UserError(f"needs the latent {name!r} (a canvas dataset store, e.g. mnist5k_canvas); this store has "
                        f"{', '.join(names)}")
    return data.encoded["latents"][:, names.index(name)]


@register_metric("probe")
class Probe(Metric):
    """Paper 004's classification probes of the codes: linear, 2-layer MLP and best-k kNN accuracy (fit on the fit
    rows, scored on the score rows) and a GMM with one component per class (accuracy, NMI, ARI on the score rows)."""

    needs = frozenset({"codes", "labels"})
    columns = ("linear", "mlp", "knn", "gmm_accuracy", "gmm_nmi", "gmm_ari")

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        y_fit, y_score = split_classes(data)
        return classification_probes(data.codes_fit, y_fit, data.codes_score, y_score, data.seed)


@register_metric("recon")
class Reconstruction(Metric):
    """Reconstruction MSE in [0, 1] pixels on the score rows (paper 004): a generative run's own decoder, else a
    decoder fit on the fit rows' frozen features."""

    needs = frozenset({"codes", "run", "images"})
    columns = ("mse",)

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        images = scored_images(data)
        objective = run.objective("cpu", image_size=images.shape[1])
        z, x = encode(objective, run.cfg, images)
        n = len(data.codes_fit)
        target, rec, how = reconstructions(objective, x, z, np.arange(n), data.seed)
        mean, std = run.cfg.normalize["mean"], run.cfg.normalize["std"]
        target = unnormalise(target, mean, std)[n:]
        rec = np.clip(unnormalise(rec, mean, std)[n:], 0, 1)
        return {"mse": reconstruction_mse(target, rec), "method": how}


# CRL-TAC's layers as paper 002's Table 1 names them: the head h, the encoder f, and their top-8 averages
CRL_TAC_LAYERS = {"head": "output", "f": "inner", "head_top": "output_top", "f_top": "inner_top"}


@register_metric("crl_tac")
class CrlTac(Metric):
    """Paper 002's scores of a run with a crop channel (crl_tac): linear class accuracy of the head and of f under
    E_P(T|X) and the top-8 crops, for a frozen (uniform) channel the oracle ablation (averaged over the crops of the
    digit's cell), the uniformity potential of the head, and P(T|X)'s mass on non-blank crops and entropy; on a
    canvas store (latents cell_row, cell_col) that mass per cell of the 3 x 3 grid the digit sits in
    (``mass_cell_K``, K = row * 3 + column, the mean over the score canvases with the digit there; NaN elsewhere)
    and ``cells_on_blank``, the cells where less than half of it is on the digit (the channel keeps the blank
    canvas there). The JSON also keeps the nine as the list ``mass_per_cell``."""

    needs = frozenset({"codes", "run", "store", "labels"})
    columns = ("head", "f", "head_top", "f_top", "head_oracle", "f_oracle", "potential", "mass", "entropy",
               *(f"mass_cell_{k}" for k in range(9)), "cells_on_blank")
    # 2: P(T|X)'s mass on the digit per canvas cell and the cells on the blank canvas (issue: CRL-TAC goes the
    # wrong way with training)
    version = 2

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        objective = run.objective("cpu", image_size=data.store.image_size)
        if not hasattr(objective, "average_crops"):
            raise UserError(f"needs a run with a crop channel (objective crl_tac), not {run.cfg.objective}")
        images = scored_images(data)
        y_fit, y_score = split_classes(data)
        n = len(y_fit)
        oracle = None
        cells = (canvas_cells(data.encoded["latents"], data.store.latent_names)
                 if data.encoded is not None and "latents" in data.encoded else None)
        if not objective.train_channel:
            if cells is None:
                cells = np.stack([store_labels(data, "cell_row"), store_labels(data, "cell_col")], axis=1)
            oracle = cell_oracle(cells, objective.grid, data.store.image_size // CANVAS_CELLS)
        layers, averaged = represent(objective, run.cfg, images, oracle)
        out = {name: linear_probe_accuracy(layers[key][:n], y_fit, layers[key][n:], y_score)
               if key in layers else math.nan for name, key in CRL_TAC_LAYERS.items()}
        for name, key in (("head_oracle", "output"), ("f_oracle", "inner")):
            out[name] = (linear_probe_accuracy(averaged[key][:n], y_fit, averaged[key][n:], y_score)
                         if averaged else math.nan)
        out["potential"] = math.exp(uniformity(layers["output"][n:]))
        summary = channel_summary(layers["probs"][n:], images[n:], objective.grid,
                                  cells=None if cells is None else cells[n:], n_cells=CANVAS_CELLS)
        out["mass"], out["entropy"] = summary["mass_on_nonblank"], summary["entropy"]
        per_cell = summary.get("mass_per_cell", [math.nan] * CANVAS_CELLS ** 2)
        out.update(cell_columns(per_cell))
        out["mass_per_cell"] = per_cell
        return out


@torch.no_grad()
def represent(objective: torch.nn.Module, cfg: Any, images: np.ndarray, oracle: np.ndarray | None = None,
              batch: int = 64) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A crop-channel run's layers of uint8 images (and P(T|X) as "probs"), and with ``oracle`` (N, T) the same
    layers averaged over the oracle's P(T|X) instead, from one encoding of every crop."""
    norm = normalizer(cfg)
    out: dict[str, list[np.ndarray]] = {}
    alt: dict[str, list[np.ndarray]] = {}
    for i in range(0, len(images), batch):
        x = norm(to_float(torch.from_numpy(images[i:i + batch])))
        p = objective.probabilities(x)
        f, h = objective.crop_outputs(x)
        for k, v in {**objective.average_crops(p, f, h, top=objective.train_channel), "probs": p}.items():
            out.setdefault(k, []).append(v.float().numpy())
        if oracle is not None:
            for k, v in objective.average_crops(torch.from_numpy(oracle[i:i + batch]).float(), f, h).items():
                alt.setdefault(k, []).append(v.float().numpy())
    return {k: np.concatenate(v) for k, v in out.items()}, {k: np.concatenate(v) for k, v in alt.items()}
