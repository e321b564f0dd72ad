"""Where a trained augmentation channel P(T|X) (CRL-TAC, paper 002) puts its mass: on crops that hold the object
(on a blank canvas: crops that intersect the digit), how peaked it is, whether the expected crop follows the
latents (e.g. the object's position), its mass on the digit per cell of a canvas (which cells keep the digit and
which put their mass on blank crops), and paper 002's Fig. 3 (test images over their P(T|X))."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ident3d.render.projection import object_pixels
from ident3d.render.scene import SceneError, load_scene, scene_from_dict
from ident3d.store.attrs import StoreAttrs
from ident3d.store.zarr_io import read_rows, store_group
from ident3d.training.channel import CropGrid, nonblank_crops
from ident3d.training.views import to_float


@torch.no_grad()
def channel_probabilities(objective: Any, x: torch.Tensor, batch_size: int = 256) -> np.ndarray:
    """P(T|X) (N, T) of normalised images x (N, 3, H, W)."""
    return torch.cat([objective.probabilities(x[i:i + batch_size]).float().cpu()
                      for i in range(0, len(x), batch_size)]).numpy()


CELL_KEPT = 0.5  # a canvas cell keeps the digit where at least this share of P(T|X) is on crops with ink


def mass_per_cell(mass: np.ndarray, cells: np.ndarray, n: int = 3) -> list[float]:
    """The mean of ``mass`` (N,: each canvas's P(T|X) mass on crops with ink) over the canvases whose digit sits in
    each cell of the n x n grid, row-major (cell row * n + column; ``cells`` (N, 2) as row, column); NaN for a cell
    no canvas has."""
    index = np.asarray(cells[:, 0], int) * n + np.asarray(cells[:, 1], int)
    return [float(mass[index == k].mean()) if (index == k).any() else math.nan for k in range(n * n)]


def cells_on_blank(per_cell: list[float]) -> int:
    """How many cells (with canvases) put less than ``CELL_KEPT`` of their mass on crops with ink."""
    return sum(1 for v in per_cell if not math.isnan(v) and v < CELL_KEPT)


def cell_columns(per_cell: list[float]) -> dict[str, float]:
    """{"mass_cell_K": mass, ..., "cells_on_blank": count}: a table's columns of ``mass_per_cell`` (the count NaN
    where no cell has a canvas)."""
    known = any(not math.isnan(v) for v in per_cell)
    return {**{f"mass_cell_{k}": v for k, v in enumerate(per_cell)},
            "cells_on_blank": float(cells_on_blank(per_cell)) if known else math.nan}


def canvas_cells(latents: np.ndarray, latent_names: list[str] | None) -> np.ndarray | None:
    """(N, 2) each canvas's digit cell (row, column) from a canvas store's latents ``cell_row``, ``cell_col``;
    None for a store without them."""
    names = list(latent_names or [])
    if "cell_row" not in names or "cell_col" not in names:
        return None
    return np.stack([latents[:, names.index("cell_row")], latents[:, names.index("cell_col")]], axis=1)


def channel_summary(probs: np.ndarray, images: np.ndarray, grid: CropGrid, latents: np.ndarray | None = None,
                    latent_names: list[str] | None = None, object_px: np.ndarray | None = None,
                    cells: np.ndarray | None = None, n_cells: int = 3) -> dict[str, Any]:
    """Statistics of P(T|X) (N, T) over uint8 images (N, H, W, 3) on ``grid``: the mass on non-blank crops
    (mean, and the share of images with more than 0.9 of it there), the entropy against the uniform channel's
    log |T|, the largest crop probability, the mean map over the grid, |Pearson r| between the expected crop
    centre (row, column) and each latent, and with ``object_px`` (N, 2: each image's object centre as row,
    column) the mass on crops that contain it, against the uniform channel's; with ``cells`` (N, 2: each canvas's
    digit cell as row, column, of an ``n_cells`` x ``n_cells`` grid) the mass on non-blank crops per cell
    (``mass_per_cell``) and the cells that put less than half of it there (``cells_on_blank``)."""
    nonblank = nonblank_crops(torch.from_numpy(images), grid).numpy()
    mass = (probs * nonblank).sum(axis=1)
    entropy = -(probs * np.log(np.where(probs > 0, probs, 1.0))).sum(axis=1)
    out: dict[str, Any] = {
        "grid": {"image_size": grid.image_size, "crop": grid.size, "stride": grid.stride, "crops": grid.n},
        "mass_on_nonblank": float(mass.mean()), "mass_on_nonblank_std": float(mass.std()),
        "share_images_mass_over_0.9": float((mass > 0.9).mean()),
        "uniform_mass_on_nonblank": float(nonblank.mean()),
        "entropy": float(entropy.mean()), "entropy_uniform": math.log(grid.n),
        "max_probability": float(probs.max(axis=1).mean()),
        "mean_map": probs.mean(axis=0).reshape(grid.side, grid.side).round(5).tolist(),
    }
    if cells is not None:
        out["mass_per_cell"] = mass_per_cell(mass, cells, n_cells)
        out["cells_on_blank"] = cells_on_blank(out["mass_per_cell"])
    if object_px is not None:
        holds = crops_holding(object_px, grid)
        out["mass_on_object"] = float((probs * holds).sum(axis=1).mean())
        out["uniform_mass_on_object"] = float(holds.mean())
    if latents is not None and latent_names:
        centre = probs @ (grid.corners().numpy() + grid.size / 2.0)  # (N, 2) expected crop centre in px
        out["centre_correlation"] = {
            axis: {name: _abs_corr(centre[:, a], latents[:, j]) for j, name in enumerate(latent_names)}
            for a, axis in enumerate(("row", "column"))}
    return out


def crops_holding(points: np.ndarray, grid: CropGrid) -> np.ndarray:
    """(N, T) whether crop t of image n contains the pixel ``points[n]`` (row, column; NaN: none does)."""
    lo = grid.corners().numpy()[None].astype(float)  # (1, T, 2) top-left corners
    p = np.asarray(points, float)[:, None, :]
    with np.errstate(invalid="ignore"):
        return ((p >= lo) & (p < lo + grid.size)).all(axis=-1)


def _abs_corr(a: np.ndarray, b: np.ndarray) -> float | None:
    """|Pearson r| of two vectors; None when either is constant."""
    if a.std() == 0 or b.std() == 0:
        return None
    return round(float(abs(np.corrcoef(a, b)[0, 1])), 4)


def channel_figure(images: np.ndarray, probs: np.ndarray, grid: CropGrid, path: str | Path, n: int = 8) -> Path:
    """Paper 002's Fig. 3: ``n`` images (top row) over their P(T|X) on the crop grid (bottom row, brighter = more
    probable; pixel (i, j) is the crop with its top-left corner at (i, j) * stride)."""
    import matplotlib  # not when scoring (the crl_tac metric imports this module)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = min(n, len(images))
    fig, axes = plt.subplots(2, n, figsize=(1.6 * n, 3.4), squeeze=False)
    for i in range(n):
        axes[0, i].imshow(images[i])
        axes[1, i].imshow(probs[i].reshape(grid.side, grid.side), cmap="magma")
        for ax in axes[:, i]:
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0, 0].set_ylabel("x")
    axes[1, 0].set_ylabel("P(T|x)")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def summarise_run(run: Any, info: Any, rows: np.ndarray, device: str = "cpu",
                  figure: str | Path | None = None, limit: int = 2000) -> dict[str, Any]:
    """``channel_summary`` of a trained CRL-TAC run on (at most ``limit`` of) a store's ``rows``, and optionally
    the Fig. 3 figure of its first images."""
    objective = run.objective(device, image_size=info.image_size)
    rows = np.sort(rows[:limit])
    group = store_group(info.path, mode="r")
    span = slice(int(rows[0]), int(rows[-1]) + 1)
    images = read_rows(group["images"], span, info.path)[rows - rows[0]]
    latents = read_rows(group["latents"], span, info.path)[rows - rows[0]]
    x = run.normalize()(to_float(torch.from_numpy(images).to(device)))
    probs = channel_probabilities(objective, x)
    classes = read_rows(group["classes"], span, info.path)[rows - rows[0]] if "classes" in group else None
    centre = object_centres(info.attrs, latents, classes, images.shape[1])
    out = channel_summary(probs, images, objective.grid, latents, info.latent_names, centre,
                          canvas_cells(latents, info.latent_names))
    if figure is not None:
        out["figure"] = str(channel_figure(images, probs, objective.grid, figure))
    return out


def object_centres(attrs: StoreAttrs, latents: np.ndarray, classes: np.ndarray | None,
                   size: int) -> np.ndarray | None:
    """Each image's object origin in pixels (N, 2), by the store's scene camera; None when the store has no
    scene to project with (a dataset of images, or latents the scene does not name)."""
    try:
        if attrs.scene == "imported" and attrs.source_format:
            scene = load_scene(attrs.source_format)
        elif "latents" in attrs.scene_spec:
            scene = scene_from_dict(attrs.scene_spec)
        else:
            return None
        cols = [list(attrs.latent_names).index(name) for name in scene.latent_names]
    except (SceneError, KeyError, ValueError):
        return None
    return object_pixels(scene, latents[:, cols], classes, size)


def cell_oracle(cells: np.ndarray, grid: CropGrid, cell_px: int) -> np.ndarray:
    """Paper 002's oracle P(T|X) (N, T): uniform over the crops that lie wholly inside the grid cell (row, column)
    ``cells`` (N, 2) holding the digit (9 crops for 28 px cells, 20 px crops at stride 4)."""
    corners = grid.corners().numpy()
    lo = cells[:, None, :] * cell_px
    inside = ((corners[None] >= lo) & (corners[None] + grid.size <= lo + cell_px)).all(axis=-1)
    if not inside.any(axis=1).all():
        raise ValueError(f"a {grid.size} px crop does not fit inside a {cell_px} px cell")
    return inside / inside.sum(axis=1, keepdims=True)
