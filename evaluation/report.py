"""Content/style report: per-latent scores grouped the way paper 000 reports them (Class;
Positions: object, spotlight; Hues: object, spotlight, background; Rotations), each column marked
content or style according to the view maker the run was trained with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from causal import load_scm

PART_LABELS = {"pos": "object", "rot": "object", "obj": "object", "spot": "spotlight", "bg": "background"}
# DA recipes and the latent groups they are meant to alter (paper 000's analogy between DA and LT rows)
DA_STYLE = {"colour": "hues", "crop_large": "positions", "crop_small": "positions", "rotation": "rotations"}


def columns(latent_names: Sequence[str], groups: Mapping[str, Sequence[str]]) -> list[tuple[str, str, list[str]]]:
    """(group, part, latents) per report column: latents of a group that share a name prefix are
    averaged (object x/y/z together, alpha/beta/gamma together), as in the paper's table."""
    out: list[tuple[str, str, list[str]]] = []
    order = {g: i for i, g in enumerate(("positions", "hues", "rotations"))}  # the paper's column order
    for group, members in sorted(groups.items(), key=lambda kv: order.get(kv[0], len(order))):
        if group == "class":
            continue
        parts: dict[str, list[str]] = {}
        for m in members:
            if m in latent_names:
                parts.setdefault(m.split("_")[0], []).append(m)
        for prefix, names in parts.items():
            out.append((group, PART_LABELS.get(prefix, prefix), names))
    return out


def style_latents(views: str, scm_spec: Mapping[str, Any], stored_views: Mapping[str, Sequence[str]]) -> set[str]:
    """Latents the run's view maker changes between views (its style); the rest is content."""
    name, _, arg = views.partition(":")
    scm = load_scm(scm_spec)
    if name == "lt_exact":  # the stored view's change set (view names are often change-set names)
        return set(stored_views[arg]) if arg in stored_views else set(scm.resolve(arg))
    if name == "lt_nn":
        return set(scm.resolve(arg))
    style: set[str] = set()
    for recipe in views.split("+"):
        group = DA_STYLE.get(recipe)
        if group and group in scm.groups:
            style |= set(scm.groups[group])
    return style


def table_row(r2: np.ndarray, latent_names: Sequence[str], cols: list[tuple[str, str, list[str]]],
              class_acc: float | None) -> dict[str, float]:
    """One row of the report: class accuracy and the mean R^2 of each column's latents."""
    row = {"Class": class_acc} if class_acc is not None else {}
    for group, part, names in cols:
        row[f"{group}: {part}"] = float(np.mean([r2[list(latent_names).index(n)] for n in names]))
    return row


def markdown(rows: Mapping[str, Mapping[str, float]], style_cols: set[str], note: str = "") -> str:
    """A markdown table; style columns are marked (S), content columns (C); bold for >= 0.5."""
    heads = list(next(iter(rows.values())))
    label = [h if h == "Class" else f"{h} ({'S' if h in style_cols else 'C'})" for h in heads]
    lines = ["| representation | " + " | ".join(label) + " |", "|---" * (len(heads) + 1) + "|"]
    for name, row in rows.items():
        cells = [f"**{v:.2f}**" if v >= 0.5 else f"{v:.2f}" for v in row.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + (f"\n\n{note}" if note else "")
