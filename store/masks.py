"""What a multi-object store's masks and presence come to: each slot's pixels and visible pixel count in a mask,
which slots hold an object (their present latents), and the summaries a store is described by (objects per image,
visible pixels per present object, overall and per slot).

A mask (H, W) holds 0 for background and k + 1 for object slot k (Cycles' object index pass). The render worker
writes ``visibility`` and ``present`` from these functions (``render.worker``, through ``render.scene.presence``),
``store.check`` holds a chunk's arrays against them, ``ident3d show`` summarises a store with them
(``pipelines.show_masks``) and the object-centric metrics select and match objects with them
(``evaluation.object_metrics``, ``evaluation.slot_metrics``): one definition each, so what is checked, shown and
scored is what the render wrote. It lives in ``store/`` because ``store.check`` needs it and the store is the lowest
layer of its users (docs/architecture.md: nothing imports a layer above its own). Pure numpy, no Zarr.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def slot_pixels(masks: np.ndarray, slots: int) -> np.ndarray:
    """(N, K, H, W) bool: slot k's pixels (``mask == k + 1``) in each of the masks (N, H, W), for K = ``slots``."""
    return np.asarray(masks)[:, None] == np.arange(1, slots + 1)[None, :, None, None]


def visibility(masks: np.ndarray, slots: int) -> np.ndarray:
    """(N, K) int64: each slot's visible pixel count in each mask (N, H, W), what a store's ``visibility`` holds."""
    masks = np.asarray(masks)
    return np.stack([(masks == k + 1).sum(axis=(1, 2)) for k in range(slots)], axis=1).astype(np.int64)


def presence(latents: np.ndarray, columns: Sequence[int]) -> np.ndarray:
    """(N, K) bool: which slots hold an object in each row of raw latents (N, D): slot k's present latent (column
    ``columns[k]``) above 0.5, what a store's ``present`` holds."""
    return np.asarray(latents)[:, list(columns)] > 0.5


def visible_but_absent(visibility: np.ndarray, present: np.ndarray) -> np.ndarray:
    """(N, K) bool: slots with visible pixels that are marked absent (no render writes one: only objects show)."""
    return (np.asarray(visibility) > 0) & ~np.asarray(present).astype(bool)


def all_present(present: np.ndarray) -> np.ndarray:
    """(N,) bool: the rows where every slot holds an object."""
    return np.asarray(present).all(axis=1)


def objects_per_image(present: np.ndarray) -> np.ndarray:
    """(N,) int: how many slots hold an object in each row."""
    return np.asarray(present).astype(bool).sum(axis=1)


def visible_per_object(visibility: np.ndarray, present: np.ndarray) -> float:
    """Mean visible pixels over every present object of the rows (NaN, with numpy's warning, where none is present)."""
    visible, present = np.asarray(visibility).astype(np.float64), np.asarray(present).astype(bool)
    return float(visible[present].mean())


def visible_per_slot(visibility: np.ndarray, present: np.ndarray) -> np.ndarray:
    """(K,) float64: each slot's mean visible pixels over the rows where it holds an object; NaN where it holds none."""
    visible, present = np.asarray(visibility).astype(np.float64), np.asarray(present).astype(bool)
    return np.array([visible[present[:, k], k].mean() if present[:, k].any() else np.nan
                     for k in range(present.shape[1])], dtype=np.float64)
