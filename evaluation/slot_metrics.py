"""The object-centric metrics in the one registry (issue 35): scored from a run whose objective gives slots (``slots``:
(N, S, L) codes, ``slot_masks``: (N, H, W) each pixel's slot) on a multi-object store (its ``masks``, ``present`` and
per-object latents), fitted on the fit rows and scored on the score rows:

- ``fg_ari``: foreground adjusted Rand index of the slot masks (MONet, IODINE, Slot Attention; scikit-learn's ARI per
  image, one object kept in one slot = 1.0 as Wiedemer et al.);
- ``slot_r2`` (version 2): per-object R^2 of a linear readout whose slot-to-object matching is chosen by its own loss,
  the on-diagonal readout of Brady et al.'s SIS (version 1 matched slots by mask overlap: now ``slot_r2_masks``);
- ``slot_r2_masks``: per-object R^2 of a linear readout from the slot matched by mask IoU (Dittadi et al. 2022);
- ``sis`` (version 2): Brady et al.'s slot identifiability score as their evaluation code defines it (readout-matched
  r_on and r_off normalised by the ceiling r_b of the true latents), with a least-squares readout; NaN with a reason
  where the objects are nearly copies of each other (version 1 was matched minus best other slot, unnormalised);
- ``block_mcc`` (version 2): Lachapelle et al.'s block-MCC with their default readout, a depth-10 decision tree on
  held-out halves (version 1: ident3d's in-sample linear readout, ``ident3d.metrics.block_mcc(readout="linear")``).

The formulas are in ``ident3d.evaluation.object_metrics`` (SPEC section 8); this module only gathers their inputs."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ident3d.causal import load_scm
from ident3d.causal.errors import UserError
from ident3d.evaluation.metric_base import Metric, ScoringData, register_metric
from ident3d.evaluation.object_metrics import (
    block_mcc,
    fg_ari,
    match_by_masks,
    slot_identifiability_score,
    slot_r2,
    slot_r2_given,
)
from ident3d.store.attrs import read_attrs
from ident3d.store.layout import require_layout
from ident3d.store.masks import all_present
from ident3d.store.zarr_io import read_at, store_group


@dataclass(frozen=True)
class ObjectData:
    """What an object-centric metric reads, rows in the encoded order (the fit rows, then the score rows)."""

    slots: np.ndarray  # (N, S, L) slot codes
    slot_masks: np.ndarray  # (N, H, W) int: the slot each pixel belongs to
    masks: np.ndarray  # (N, H, W) int: 0 background, k + 1 object k
    present: np.ndarray  # (N, K) bool
    latents: np.ndarray  # (N, K, D) each object's continuous latents (its class column left out)
    names: list[str]  # the D latents, as object 0's names
    fit: np.ndarray  # indices of the fit rows
    score: np.ndarray  # indices of the score rows

    @cached_property
    def matched(self) -> np.ndarray:
        """(N, K) the slot that segments each object (Hungarian on mask IoU, per image); computed once."""
        n_slots = self.slots.shape[1]
        if n_slots < self.present.shape[1]:
            raise UserError(f"the run has {n_slots} slots for {self.present.shape[1]} object slots; train with "
                            f"n_slots >= {self.present.shape[1]}")
        return match_by_masks(self.masks, self.slot_masks, self.present.shape[1], n_slots)


def object_columns(scm_spec: dict[str, Any], latent_names: list[str]) -> list[list[int]]:
    """Per object slot, the store's latent columns of its continuous nodes (its categorical class left out)."""
    scm = load_scm(scm_spec)
    if scm.plates is None:
        raise UserError("needs a multi-object store (an SCM with object plates, e.g. multi3dident_independent)")
    return [[latent_names.index(n) for n in names if scm.nodes[n].mechanism.categories is None]
            for names in scm.plates.objects]


_GATHERED: list[tuple[ScoringData, ObjectData]] = []  # the last call's: every object metric of one score() reads it


def object_data(data: ScoringData) -> ObjectData:
    """The slots of the encoded rows and the store's masks, presence and object latents for the same rows; gathered
    once per ``data`` (the metrics of one ``score`` call share it)."""
    if _GATHERED and _GATHERED[0][0] is data:
        return _GATHERED[0][1]
    gathered = _gather(data)
    _GATHERED[:] = [(data, gathered)]
    return gathered


def _gather(data: ScoringData) -> ObjectData:
    """``object_data`` read from the encodings and the store."""
    enc, info = data.encoded or {}, data.store
    if "slots" not in enc or "slot_masks" not in enc:
        raise UserError("needs an object-centric run whose model gives slots and their masks (objective "
                        "slot_attention or additive_ae)")
    rows = np.asarray(enc["rows"])
    masks, present = store_objects(info, rows)
    cols = object_columns(info.scm, info.latent_names)
    latents = np.asarray(enc["latents"], float)
    n_fit = len(data.codes_fit)
    return ObjectData(slots=np.asarray(enc["slots"], float), slot_masks=np.rint(enc["slot_masks"]).astype(np.int64),
                      masks=masks, present=present,
                      latents=np.stack([latents[:, c] for c in cols], axis=1),
                      names=[info.latent_names[i] for i in cols[0]],
                      fit=np.arange(n_fit), score=np.arange(n_fit, len(rows)))


def store_objects(info: Any, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The store's masks (N, H, W) int64 and presence (N, K) bool of ``rows``, after holding both arrays against the
    store format (``ident3d.store.layout.require_layout``): a store without masks, or whose masks or presence are
    missing, reshaped or short, is one line saying what to run; a damaged chunk one line naming it."""
    group = store_group(info.path, mode="r")
    if "masks" not in require_layout(group, read_attrs(group, info.path), info.path, ("masks", "present")).specs:
        raise UserError(f"needs a store with object masks; {info.path} has none (render a multi-object scene, "
                        "e.g. --scene multi3dident)")
    return (read_at(group["masks"], rows, info.path).astype(np.int64),
            read_at(group["present"], rows, info.path).astype(bool))


class ObjectMetric(Metric):
    """Base of the object-centric metrics: they read the run's slots and the store's masks."""

    needs = frozenset({"codes", "store"})
    data_needs = frozenset({"objects"})


@register_metric("fg_ari")
class FgAri(ObjectMetric):
    """Foreground ARI of the slot masks against the objects' masks on the score rows (background pixels left out; one
    object kept in one slot scores 1.0; images with fewer than 2 foreground pixels left out, none left refused)."""

    columns = ("fg_ari",)

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        d = object_data(data)
        return {"fg_ari": fg_ari(d.masks[d.score], d.slot_masks[d.score])}


@register_metric("slot_r2")
class SlotR2(ObjectMetric):
    """Per-object R^2 of a linear readout from the slot its own loss matches to each object (per image, Hungarian),
    fitted on the fit rows and scored on the score rows: the on-diagonal readout of Brady et al.'s SIS (r_on); the mean
    and each latent's. Version 2: version 1 matched slots by mask overlap (``slot_r2_masks``)."""

    columns = ("r2",)
    version = 2

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        d = object_data(data)
        r = slot_r2(d.latents, d.slots, d.fit, d.score, d.present)
        return {"r2": r.score, "per_latent": dict(zip(d.names, np.round(r.per_latent, 4).tolist(), strict=True)),
                "matched_by": r.matched_by, "readout": r.readout, "iterations": r.iterations}


@register_metric("slot_r2_masks")
class SlotR2Masks(ObjectMetric):
    """Per-object R^2 of a linear readout from each object's slot matched by mask IoU (Hungarian per image), fitted on
    the fit rows and scored on the score rows (Dittadi et al.'s property prediction; ``slot_r2`` version 1)."""

    columns = ("r2",)

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        d = object_data(data)
        r = slot_r2_given(d.latents, d.slots, d.matched, d.fit, d.score, d.present)
        return {"r2": r.score, "per_latent": dict(zip(d.names, np.round(r.per_latent, 4).tolist(), strict=True)),
                "matched_by": "masks"}


@register_metric("sis")
class SlotIdentifiability(ObjectMetric):
    """Brady et al.'s slot identifiability score as their evaluation code defines it, with a least-squares readout:
    (r_on - r_b) / (1 - r_b) - clip((r_off - r_b) / (1 - r_b), 0, 1), r_on and r_off the readout-matched on- and
    off-diagonal R^2, r_b the ceiling from the true latents; NaN with a reason where r_b >= 0.95. Version 2: version 1
    was the mask-matched R^2 minus the best other slot's, without the ceiling."""

    columns = ("sis",)
    version = 2

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        d = object_data(data)
        r = slot_identifiability_score(d.latents, d.slots, d.fit, d.score, d.present)
        return {"sis": r.score, "r_on": r.r_on, "r_off": r.r_off, "ceiling": r.ceiling, "readout": r.readout,
                "reason": r.reason, "iterations": dict(r.iterations),
                "per_latent": dict(zip(d.names, np.round(r.per_latent, 4).tolist(), strict=True))}


@register_metric("block_mcc")
class BlockMcc(ObjectMetric):
    """Block-MCC (Lachapelle et al.) with their default readout, a depth-10 decision tree fitted on one half of the
    rows and scored on the other (R^2 clipped at 0): the slots as fixed blocks (their order, not matched per image)
    Hungarian-matched to the objects, on the rows (fit and score) where every object slot is present; meaningful for a
    model whose slot order is fixed (additive_ae), near chance for slot attention's exchangeable slots. Version 2:
    version 1 used an in-sample linear readout (``ident3d.metrics.block_mcc(readout="linear")``)."""

    columns = ("block_mcc",)
    version = 2

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        d = object_data(data)
        rows = np.flatnonzero(all_present(d.present))
        if len(rows) < 10:
            raise UserError(f"needs at least 10 images with every object present, got {len(rows)}")
        n, s, width = d.slots[rows].shape
        r = block_mcc(d.latents[rows], d.slots[rows].reshape(n, s * width), [width] * s, readout="tree",
                      seed=data.seed)
        return {"block_mcc": r.score, "readout": r.readout, "r2": np.round(r.r2, 4).tolist()}
