"""A render's captions: which caption spec it uses (``--text``, else the scene's), checked against the SCM and the
scene before anything is written, and the captions of a chunk's rows, worded where the rows are drawn (the render
worker), so they describe the rows as rendered (after placement redraws) and any split of the chunks words them alike.

What the store records (``StoreAttrs.text``): the resolved spec (``CaptionSpec.to_dict``; its hue mappings written
out, so the spec reads back without the scene) and the names of the ``text_latents`` columns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal import SCM
from ident3d.causal.errors import UserError
from ident3d.causal.samples import Samples
from ident3d.render.captions import CaptionSpec, LatentInfo, load_caption_spec, write_captions
from ident3d.render.scene import Scene

TextArg = str | Path | Mapping[str, Any] | bool | None  # a spec (name, file, mapping); None: the scene's; False: none
HUE_TARGETS = (".hue",)  # a scene binding to a target ending so makes its latent a hue (in turns)


def latent_infos(scm: SCM, scene: Scene | None) -> list[LatentInfo]:
    """Every node a caption may state: the class node (its categories) and each latent (its declared range, its
    categories if categorical, and its hue mapping if the scene binds it to a hue)."""
    hues = {} if scene is None else {b.name: (b.scale, b.offset) for b in scene.latents
                                     if b.target.endswith(HUE_TARGETS) and not b.offset_extent}
    out = []
    for name in ([scm.class_node] if scm.class_node else []) + list(scm.names):
        node = scm.nodes[name]
        categories = getattr(node.mechanism, "categories", None)
        low, high = node.range if node.range else (None, None)
        if categories:
            low, high = 0.0, float(len(categories) - 1)
        out.append(LatentInfo(name, _bound(low), _bound(high), tuple(categories) if categories else None,
                              hues.get(name)))
    return out


def _bound(x: float | None) -> float | None:
    """A declared bound, None where it is absent or infinite."""
    return None if x is None or not math.isfinite(float(x)) else float(x)


def plan_text(text: TextArg, scene: Scene, scm: SCM) -> dict[str, Any] | None:
    """The store's ``text`` attribute for a render: None without captions (``text`` False, or None and a scene that
    declares none), else the resolved spec and its text latent names (``text`` True: the scene's, which it must
    declare). A bad spec is one ``CaptionSpecError`` line."""
    if text is False:
        return None
    source = scene.text if text is None or text is True else text
    if source is None:
        if text is True:
            raise UserError(f"scene {scene.name} declares no captions: give a caption spec (--text NAME|FILE)")
        return None
    spec = load_caption_spec(source, latent_infos(scm, scene))
    return {"spec": spec.to_dict(), "names": list(spec.text_latent_names)}


_SPECS: dict[str, CaptionSpec] = {}  # per process: the last spec read from a job (workers render many chunks)


def spec_of(text: Mapping[str, Any], scm: SCM) -> CaptionSpec:
    """The caption spec a store's ``text`` attribute records (read once per process)."""
    key = json.dumps(text["spec"], sort_keys=True)
    if key not in _SPECS:
        _SPECS.clear()
        _SPECS[key] = load_caption_spec(text["spec"], latent_infos(scm, None))
    return _SPECS[key]


def chunk_captions(text: Mapping[str, Any], scm: SCM, rows: Samples, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The captions (N,) and text latents (N, T) float32 of ``rows`` (their global indices key every draw)."""
    values = {name: rows.latents[:, j] for j, name in enumerate(rows.names)}
    if scm.class_node:
        values[scm.class_node] = rows.classes
    captions = write_captions(spec_of(text, scm), values, np.asarray(rows.index, np.int64), seed)
    return captions.text, captions.latents.astype(np.float32)
