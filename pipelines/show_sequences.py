"""Figures of a sequence store (``ident3d show`` on a store made with ``render --sequences``): one strip of frames
per sequence, each frame captioned with its step and the causal factors intervened on at that step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from ident3d.causal.errors import UserError
from ident3d.pipelines.files import write_atomic
from ident3d.store.attrs import StoreAttrs
from ident3d.store.zarr_io import chunk_bounds, done_mask, read_rows


def factor_of(attrs: StoreAttrs) -> list[str]:
    """Per intervention column (a node of the dynamic spec), the causal factor it belongs to: the node's
    intervention ``target`` (nodes intervened on together, e.g. the three positions), else its own name."""
    spec_nodes = {n["name"]: n for n in attrs.sequences["spec"]["nodes"]}
    return [(spec_nodes.get(name, {}).get("intervention") or {}).get("target", name)
            for name in attrs.sequences["intervention_names"]]


def intervened_factors(targets: np.ndarray, factors: list[str]) -> list[str]:
    """The distinct factors whose columns are set in one row of intervention targets, in column order."""
    out: list[str] = []
    for hit, factor in zip(targets, factors, strict=True):
        if hit and factor not in out:
            out.append(factor)
    return out


def save_strips(group: Any, attrs: StoreAttrs, out: Path, count: int = 4, path: str = "") -> list[list[str]]:
    """Save ``count`` sequences (the first finished ones) as rows of frames; a frame at a step with interventions
    gets a red border and the factors named. Returns each shown frame's caption lines (row by row), so callers and
    tests can check what was marked."""
    matplotlib.use("Agg")  # files only, no display
    length = int(attrs.sequences["length"])
    n, c = group["images"].shape[0], group["images"].chunks[0]
    rows = np.concatenate([np.arange(*chunk_bounds(k, c, n)) for k in np.flatnonzero(done_mask(group, path))]
                          or [np.zeros(0, int)])
    if rows.size < length:
        raise UserError("the store has no finished sequence yet; render it first")
    starts = rows[rows % length == 0][:count]
    factors = factor_of(attrs)
    fig, axes = plt.subplots(len(starts), length, figsize=(1.2 * length, 1.45 * len(starts) + 0.3), squeeze=False)
    captions: list[list[str]] = []
    for r, start in enumerate(starts):
        span = slice(int(start), int(start) + length)
        images = read_rows(group["images"], span, path)
        targets = np.asarray(group["interventions"][span], bool)
        seq = int(group["sequence"][int(start)])
        for t in range(length):
            ax = axes[r][t]
            ax.imshow(images[t])
            ax.set_xticks([])
            ax.set_yticks([])
            hit = intervened_factors(targets[t], factors)
            text = f"t={t}" + ("\ndo: " + ", ".join(hit) if hit else "")
            captions.append([f"sequence {seq}", *text.splitlines()])
            ax.set_title(text, fontsize=5, color="red" if hit else "black")
            for spine in ax.spines.values():
                spine.set_edgecolor("red" if hit else "white")
                spine.set_linewidth(2 if hit else 0.5)
            if t == 0:
                ax.set_ylabel(f"seq {seq}", fontsize=6)
    fig.suptitle(f"{Path(path).name}: {len(starts)} sequences x {length} steps (red: intervened)", fontsize=7)
    fig.tight_layout()
    write_atomic(out, lambda p: fig.savefig(p, dpi=110, format=out.suffix.lstrip(".") or "png"))
    plt.close(fig)
    return captions
