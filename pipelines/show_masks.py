"""Object masks in ``ident3d show``: each object slot's pixels blended half-way toward the slot's colour and ringed
by a one-pixel outline in the full slot colour (background untouched), so a grid shows which latent slot each object
is, also at 64 px where a tint alone leaves neighbouring objects hard to tell apart; and the summary line of a
multi-object store (slots, objects per image, visible pixels per object: ``ident3d.store.masks``'s summaries)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ident3d.causal import load_scm
from ident3d.store.masks import objects_per_image, visible_per_object, visible_per_slot

ALPHA = 0.5  # how far an object's pixels are blended toward its slot's colour
# slot k's colour name and RGB, one per slot up to causal.plates.MAX_SLOTS
SLOT_COLOURS = (("red", (230, 25, 75)), ("blue", (0, 130, 200)), ("yellow", (255, 225, 25)),
                ("magenta", (240, 50, 230)), ("cyan", (70, 240, 240)), ("orange", (245, 130, 48)),
                ("green", (60, 180, 75)), ("purple", (145, 30, 180)))
_RGB = np.array([rgb for _, rgb in SLOT_COLOURS], dtype=np.float64)


def outline(mask: np.ndarray) -> np.ndarray:
    """(H, W) bool: the object pixels (``mask > 0``) on an object's rim, where a 4-neighbour holds another value
    (background or another slot); the image's border is no rim. Inside the object, so the background stays as it
    was."""
    mask = np.asarray(mask)
    rim = np.zeros(mask.shape, bool)
    rim[1:, :] |= mask[1:, :] != mask[:-1, :]
    rim[:-1, :] |= mask[:-1, :] != mask[1:, :]
    rim[:, 1:] |= mask[:, 1:] != mask[:, :-1]
    rim[:, :-1] |= mask[:, :-1] != mask[:, 1:]
    return rim & (mask > 0)


def overlay(image: np.ndarray, mask: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """``image`` (H, W, 3 uint8) with every pixel of object k (``mask == k + 1``) blended ``alpha`` toward slot k's
    colour, the object's rim (:func:`outline`) in slot k's full colour, and background pixels (0) as they were: what
    the grid draws for a store with masks (deterministic: a function of the image and mask alone)."""
    out = image.copy()
    on = mask > 0
    colours = _RGB[(mask[on].astype(np.int64) - 1) % len(_RGB)]
    out[on] = np.round((1 - alpha) * image[on] + alpha * colours).astype(np.uint8)
    rim = outline(mask)
    out[rim] = _RGB[(mask[rim].astype(np.int64) - 1) % len(_RGB)].astype(np.uint8)
    return out


def legend(slots: int) -> str:
    """The colours' key for a figure title: ``masks: slot 0 red, 1 blue, ...``."""
    return "masks: slot " + ", ".join(f"{k} {SLOT_COLOURS[k % len(SLOT_COLOURS)][0]}" for k in range(slots))


def object_summary(group: Any, rows: np.ndarray, path: str | None = None) -> str | None:
    """A multi-object store's line over its finished ``rows``: slots, mean objects per image and mean visible pixels
    per present object (overall and per slot); None for a store without ``present``/``visibility``. A damaged chunk
    among ``rows`` is one line naming it (``path``: the store's name in it)."""
    from ident3d.store.zarr_io import read_at, store_name  # zarr: not for `ident3d show --help`

    if "present" not in group or "visibility" not in group:
        return None
    slots = group["present"].shape[1]
    if rows.size == 0:
        return f"{slots} slots (no finished rows yet)"
    path = path or store_name(group)
    present = read_at(group["present"], rows, path).astype(bool)
    visible = read_at(group["visibility"], rows, path)
    per_slot = ", ".join(f"{k}: {mean:.1f}" if present[:, k].any() else f"{k}: -"
                         for k, mean in enumerate(visible_per_slot(visible, present)))
    return (f"{slots} slots, {objects_per_image(present).mean():.2f} objects per image, "
            f"{visible_per_object(visible, present):.1f} visible px per object (slot {per_slot})")


def placement_line(group: Any, rows: np.ndarray, scm_spec: dict, path: str | None = None) -> str | None:
    """A store rendered with placement rules: the rejection rate over its finished ``rows``, draws per row, the share
    of rows with each object count and the largest induced cross-object |r| (``render.placement.placement_summary``);
    None for a store without ``attempts``."""
    if "attempts" not in group or rows.size == 0 or "present" not in group:
        return None
    from ident3d.render.placement import placement_summary  # the render API, zarr: not for `ident3d show --help`
    from ident3d.store.zarr_io import read_at, store_name

    scm = load_scm(scm_spec)
    if scm.plates is None:
        return None
    path = path or store_name(group)
    s = placement_summary(*(read_at(group[name], rows, path) for name in ("latents", "present", "attempts")),
                          list(scm.names), scm.plates.objects)
    counts = ", ".join(f"{k}: {v:.0%}" for k, v in s["object_counts"].items())
    r = {name: c for name, c in s["correlation"].items() if np.isfinite(c["obj0_obj1"])}
    worst = max(r, key=lambda name: abs(r[name]["obj0_obj1"]), default=None)
    corr = f"; largest obj0-obj1 |r| {abs(r[worst]['obj0_obj1']):.2f} ({worst})" if worst else ""
    return (f"{s['rejection_rate']:.1%} of {s['draws']} draws rejected ({s['mean_attempts']:.2f} per row); objects "
            f"per image {counts}{corr}")
