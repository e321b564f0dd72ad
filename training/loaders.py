"""Batches of a store for a user's own model (``ident3d.loader``, ``ident3d.StoreDataset``), made by the trainer's own
data path: :class:`ident3d.training.data.StoreBatches` and ``make_loader`` read the rows, the registered view maker
(built and checked by ``ident3d.training.components.build_views``, bound to the data as the trainer binds it) makes
the views with the trainer's per-step generator. So batch b of a seed holds exactly the rows and views that
``ident3d train --views SPEC --batch-size B --seed S`` feeds its objective at step b: a pure function of (seed, b)
(and, for stores streamed from disk, of ``num_workers``, as in the trainer).

Each batch is a dict:

- ``views``: list of the maker's normalised float32 views (B, 3, H, W) on ``device``; ``views=None``: one view, the
  normalised anchors. DA recipes (e.g. ``crop_large+colour``) make ``n_views`` augmented copies of the anchors;
  ``lt_exact:NAME`` pairs each anchor with its stored view NAME; ``lt_nn:CHANGE`` with the nearest stored image of
  the same class to latents whose change set CHANGE was redrawn by the store's SCM.
- ``images`` uint8 (B, H, W, 3), ``latents`` float32 (B, D), ``classes`` int64 (B,) (stores with classes) and
  ``index`` int64 (B,) (the row ids): the anchors.
- ``lt_exact:NAME``: ``views/NAME/images`` and ``views/NAME/latents`` of the second view;
  ``lt_nn``: ``pair/images``, ``pair/latents``, ``pair/index`` and ``pair/snap`` (the snap distance).
- ``step``: the batch's index b.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from ident3d.causal.errors import UserError
from ident3d.store.info import StoreInfo, image_stats, store_info
from ident3d.training.components import build_views
from ident3d.training.config import TrainConfig
from ident3d.training.data import StoreBatches, make_loader
from ident3d.training.parts import check_numbers
from ident3d.training.run_dir import normalizer
from ident3d.training.trainer import pick_device, view_generator
from ident3d.training.views import Normalize, ViewMaker, to_float

SINGLE = "none"  # the view maker of views=None: the registered identity maker, one view (the normalised anchors)


def _info(store: Any, split: str | None, allow_partial: bool) -> StoreInfo:
    """The StoreInfo of a path, URL or ``ident3d.open_store`` view (a StoreInfo: its rows are kept)."""
    if isinstance(store, StoreInfo):
        return store
    if not isinstance(store, str) and not hasattr(store, "__fspath__"):
        raise UserError(f"store must be a path, a URL or an ident3d.open_store view, got {type(store).__name__}")
    return store_info(str(store), allow_partial=allow_partial, split=split)


def _flag(key: str) -> str:
    """A setting as this API names it (the trainer's checks name command-line flags)."""
    return key


class StoreLoader:
    """An iterable of training batches (dicts, see the module doc) of one store; iterating again starts again at
    ``start`` with the same batches. ``steps`` batches, or endless when None. ``normalize`` is the store's
    normalisation (``inputs`` applies it to images of any store, e.g. to encode a test set)."""

    def __init__(self, info: StoreInfo, maker: ViewMaker, dataset: StoreBatches, normalize: Normalize,
                 cfg: TrainConfig, device: torch.device, start: int, steps: int | None):
        self.info, self.maker, self.dataset, self.normalize = info, maker, dataset, normalize
        self.cfg, self.device, self.start, self.steps = cfg, device, start, steps

    def __len__(self) -> int:
        if self.steps is None:
            raise TypeError("an endless loader (steps=None) has no length")
        return self.steps

    def __iter__(self) -> Iterator[dict[str, Any]]:
        batches = iter(make_loader(self.dataset, self.cfg.num_workers))
        step = self.start
        while self.steps is None or step < self.start + self.steps:
            batch: dict[str, Any] = {k: v.to(self.device, non_blocking=True) for k, v in next(batches).items()}
            batch["views"] = self.maker(batch, view_generator(self.cfg.seed, step))
            batch["step"] = step
            yield batch
            step += 1

    def inputs(self, images: np.ndarray | torch.Tensor) -> torch.Tensor:
        """uint8 images (N, H, W, 3) as the model sees them: normalised float32 (N, 3, H, W) on ``device``."""
        x = torch.as_tensor(np.asarray(images) if not isinstance(images, torch.Tensor) else images)
        return self.normalize(to_float(x.to(self.device)))


def loader(store: Any, views: str | None = "crop_large+colour", batch_size: int = 256, seed: int = 0,
           device: str = "cpu", steps: int | None = None, start: int = 0, n_views: int = 2, num_workers: int = 0,
           split: str | None = None, allow_partial: bool = False,
           normalize: dict[str, list[float]] | None = None) -> StoreLoader:
    """Batches of ``store`` (a path, URL or ``ident3d.open_store`` view) for a user's training loop: batch b holds the
    rows and ``views`` (a DA recipe combination, ``lt_exact:NAME``, ``lt_nn:CHANGE``, any ``ident3d train --list``
    view maker that feeds any objective; None: the anchors alone) that ``ident3d train`` with the same store,
    ``split``, batch size, seed, ``n_views`` and ``num_workers`` feeds its objective at step b, made on ``device``
    ("cpu", "cuda" or "auto"). ``steps``: how many batches one pass yields (None: endless); ``start``: the first
    batch's index (to resume). ``normalize``: {"mean": [r, g, b], "std": [r, g, b]} (default: the store's statistics,
    as the trainer computes them). Bad settings are one-line ``UserError``s.

    Each batch is a dict on ``device``: ``views`` (the list of normalised float views (B, 3, H, W) the objective
    gets), the anchors' ``images`` uint8 (B, H, W, 3), ``latents`` (B, D), ``classes`` (B,) and ``index`` (row ids),
    the second view's arrays (``views/NAME/images`` and ``views/NAME/latents`` for lt_exact, ``pair/images``,
    ``pair/latents``, ``pair/index``, ``pair/snap`` for lt_nn) and ``step`` (b)."""
    cfg = TrainConfig(data="", views=views or SINGLE, batch_size=batch_size, seed=seed, n_views=n_views,
                      num_workers=num_workers, normalize=dict(normalize or {}))
    check_numbers(cfg, flag=_flag)
    for key, value, least in (("seed", seed, 0), ("start", start, 0), ("steps", steps, 1)):
        if value is not None and (not isinstance(value, int | np.integer) or isinstance(value, bool) or value < least):
            raise UserError(f"{key} must be a whole number >= {least}, got {value!r}")
    dev = pick_device(device)
    info = _info(store, split, allow_partial)
    if batch_size > info.rows.size:
        raise UserError(f"batch_size {batch_size} is larger than the {info.rows.size} finished rows of {info.path}; "
                        "use a smaller batch or a larger store")
    maker = build_views(cfg, info) if views else _single(cfg, info)
    if maker.objective is not None:
        raise UserError(f"view maker {views} feeds only the objective {maker.objective} of `ident3d train`; use DA "
                        "recipes (e.g. crop_large+colour), lt_exact:VIEW or lt_nn:CHANGE")
    keys = [k for k in maker.requires if k.startswith("views/")]  # the stored views' arrays, as build_store_run
    keys += [k.replace("/images", "/latents") for k in keys]
    dataset = StoreBatches(info, batch_size, seed, start_batch=start, keys=keys, lanes=num_workers)
    maker.bind(dataset, None, seed)  # e.g. lt_nn's partner search (makers that read the objective are refused above)
    return StoreLoader(info, maker, dataset, normalizer(cfg), cfg, dev, start, steps)


def _single(cfg: TrainConfig, info: StoreInfo) -> ViewMaker:
    """The identity maker with one view (the normalised anchors), normalised as ``build_views`` does."""
    cfg.n_views = 1
    return build_views(cfg, info)


class StoreDataset(Dataset):
    """Map-style: item i is finished row ``rows[i]`` of a store (path, URL or ``ident3d.open_store`` view) as a dict of
    tensors: ``image`` normalised float32 (3, H, W) (``normalize`` as in :func:`loader`), ``latents`` float32 (D,),
    ``classes`` int64 () where the store has classes, ``index`` (the row id). For a user's own sampler or for
    encoding a store in order; rows are read chunk-wise (``__getitems__`` reads a whole batch at once)."""

    def __init__(self, store: Any, split: str | None = None, allow_partial: bool = False,
                 normalize: dict[str, list[float]] | None = None):
        self.info = _info(store, split, allow_partial)
        mean, std = (normalize["mean"], normalize["std"]) if normalize else image_stats(self.info)
        self.normalize = Normalize(tuple(mean), tuple(std))
        self.rows = self.info.rows
        if self.rows.size < 2:
            raise UserError(f"{self.info.path} has {self.rows.size} finished row; a dataset needs at least 2")
        self._reader = StoreBatches(self.info, 2, seed=0)  # only its reader is used (in memory or chunk-wise)

    def __len__(self) -> int:
        return int(self.rows.size)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.__getitems__([i])[0]

    def __getitems__(self, items: list[int]) -> list[dict[str, torch.Tensor]]:
        """Items ``items`` read together (a DataLoader with automatic batching calls this once per batch)."""
        idx = np.asarray(items, dtype=np.int64)
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(f"item {int(idx.max()) if idx.max() >= len(self) else int(idx.min())} is out of range: "
                             f"the dataset has {len(self)} rows")
        rows = self.rows[idx]
        arrays = self._reader.rows(rows)
        images = self.normalize(to_float(torch.from_numpy(arrays.pop("images"))))
        tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}
        return [{"image": images[j], **{k: v[j] for k, v in tensors.items()}, "index": torch.tensor(int(rows[j]))}
                for j in range(rows.size)]
