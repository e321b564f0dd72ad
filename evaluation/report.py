"""Content/style report: per-latent scores grouped into columns that come from the store itself (its
``latent_names`` and ``latent_groups``), each column marked content or style according to the view
maker the run was trained with.

Columns: one per group, split into parts by the latent-name prefix before the first underscore (object
x/y/z vs the spotlight angle, object/spotlight/background hues), titled ``group: part``; a latent in no
group gets a column of its own titled by its name. For stores of the 3DIdent family (every latent one
of the paper's names) the parts carry paper 000's labels and the columns its order, so the built-in
causal3dident store gives exactly the paper's 7 columns and the paper's numbers line up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ident3d.causal import load_scm
from ident3d.causal.errors import UserError
from ident3d.evaluation.metric_inputs import defined_mean
from ident3d.training.views import Normalize, make_view_maker
from ident3d.training.views.augment import DA_RECIPES
from ident3d.training.views.base import Style

# paper 000's Causal3DIdent table, in its order; "Class" is the class-probe accuracy
PAPER_COLUMNS = ("Class", "positions: object", "positions: spotlight", "hues: object", "hues: spotlight",
                 "hues: background", "rotations: object")
# the 3DIdent latents and the labels the paper gives their name prefixes
PAPER_LATENTS = frozenset({"pos_x", "pos_y", "pos_z", "rot_alpha", "rot_beta", "rot_gamma", "spot_angle",
                           "obj_hue", "spot_hue", "bg_hue"})
PAPER_PART_LABELS = {"pos": "object", "rot": "object", "obj": "object", "spot": "spotlight", "bg": "background"}
IDENTITY = Normalize((0.0,) * 3, (1.0,) * 3)  # a view maker built only to ask what it changes


@dataclass(frozen=True)
class Column:
    """One report column: its title and the latents whose scores it averages."""

    title: str
    latents: tuple[str, ...]
    group: str | None = None  # None: a latent in no group


def part_labels(latent_names: Sequence[str]) -> dict[str, str]:
    """Labels for name prefixes: paper 000's for a 3DIdent-family store, else none (the prefix is the label)."""
    return dict(PAPER_PART_LABELS) if latent_names and set(latent_names) <= PAPER_LATENTS else {}


def columns(latent_names: Sequence[str], groups: Mapping[str, Sequence[str]],
            labels: Mapping[str, str] | None = None) -> list[Column]:
    """The report's columns for a store, in the store's latent order (paper order for the paper's layout).

    ``groups``: group -> latent names (the store's ``latent_groups``; members that are not latents, such
    as the class node, are ignored). ``labels``: prefix -> part title (default: :func:`part_labels`).
    """
    names = list(latent_names)
    labels = part_labels(names) if labels is None else labels
    index = {n: i for i, n in enumerate(names)}
    owner: dict[str, str] = {}
    for group, members in groups.items():
        for m in members:
            if m in index:
                owner.setdefault(m, group)
    cols: dict[str, Column] = {}
    for n in names:  # latent order: groups appear where their first latent does
        group = owner.get(n)
        title = n if group is None else f"{group}: {labels.get(_prefix(n), _prefix(n))}"
        old = cols.get(title)
        if old is not None and old.group != group:
            raise UserError(f"report column {title!r} would mix latents of different groups; rename latent {n!r}")
        cols[title] = Column(title, (*old.latents, n) if old else (n,), group)
    ordered = sorted(cols.values(), key=lambda c: _group_rank(c, index, owner))
    return _paper_order(ordered)


def _prefix(name: str) -> str:
    """The part a latent belongs to within its group: its name up to the first underscore."""
    return name.split("_", 1)[0]


def _group_rank(col: Column, index: Mapping[str, int], owner: Mapping[str, str]) -> tuple[int, int]:
    """Sort key keeping a group's parts together, at the position of the group's first latent."""
    first = index[col.latents[0]]
    if col.group is None:
        return first, first
    return min(i for n, i in index.items() if owner.get(n) == col.group), first


def _paper_order(cols: list[Column]) -> list[Column]:
    """Paper 000's column order when the columns are (a subset of) its layout, else unchanged."""
    if all(c.title in PAPER_COLUMNS for c in cols):
        return sorted(cols, key=lambda c: PAPER_COLUMNS.index(c.title))
    return cols


def titles(cols: Sequence[Column], has_class: bool) -> list[str]:
    """Column titles as in a report row: "Class" first when the store has classes."""
    return (["Class"] if has_class else []) + [c.title for c in cols]


def is_paper_layout(column_titles: Sequence[str]) -> bool:
    """Whether a table has exactly paper 000's Causal3DIdent columns (so its numbers can be compared)."""
    return tuple(column_titles) == PAPER_COLUMNS


def check_da_style(da_style: Any, where: str) -> dict[str, list[str]]:
    """Validate a ``da_style`` override ({recipe: name or [names]}, names of nodes, groups or change sets)."""
    if da_style is None:
        return {}
    if not isinstance(da_style, Mapping):
        raise UserError(f"{where}: da_style must map a DA recipe to latents, groups or change sets, got {da_style!r}")
    out: dict[str, list[str]] = {}
    for recipe, names in da_style.items():
        if recipe not in DA_RECIPES:
            raise UserError(f"{where}: da_style: unknown DA recipe {recipe!r}; choose from {', '.join(DA_RECIPES)}")
        items = [names] if isinstance(names, str) else names
        if not isinstance(items, list) or not all(isinstance(x, str) and x for x in items):
            raise UserError(f"{where}: da_style {recipe}: give a name or a list of names, got {names!r}")
        out[recipe] = list(items)
    return out


def check_da_style_names(da_style: Any, scm_spec: Mapping[str, Any], where: str) -> dict[str, list[str]]:
    """A checked ``da_style`` resolved to latent names through the SCM (an unknown name is an error)."""
    scm = load_scm(scm_spec)
    out = {}
    for recipe, names in check_da_style(da_style, where).items():
        try:
            out[recipe] = [n for n in scm.resolve(names) if n in scm.names]
        except UserError as exc:
            raise UserError(f"{where} {recipe}: {exc}") from None
    return out


def resolve_style(views: str, scm_spec: Mapping[str, Any], stored_views: Mapping[str, Sequence[str]],
                  da_style: Mapping[str, Any] | None = None) -> Style:
    """The latents the run's view maker changes between views (its style); the rest is content.

    The view maker answers (``ViewMaker.style``): LT makers their change set, DA makers their recipes' targets
    (``da_style`` overrides a recipe's, and an override naming an unknown node is an error) resolved through the
    SCM's change sets, groups and nodes. An unknown view maker is an error, never all-content.
    """
    override = check_da_style_names(da_style, scm_spec, "da_style")
    return make_view_maker(views, IDENTITY).style(load_scm(scm_spec), stored_views, override)


def style_latents(views: str, scm_spec: Mapping[str, Any], stored_views: Mapping[str, Sequence[str]],
                  da_style: Mapping[str, Any] | None = None) -> set[str]:
    """Just the style latents of :func:`resolve_style`."""
    return resolve_style(views, scm_spec, stored_views, da_style).latents


def marks(cols: Sequence[Column], style: set[str]) -> dict[str, str]:
    """Title -> "S" (every latent of the column is style), "C" (none is) or "C/S" (some are)."""
    out = {}
    for c in cols:
        k = sum(n in style for n in c.latents)
        out[c.title] = "S" if k == len(c.latents) else ("C" if k == 0 else "C/S")
    return out


def table_row(r2: np.ndarray, latent_names: Sequence[str], cols: Sequence[Column],
              class_acc: float | None) -> dict[str, float]:
    """One row of the report: class accuracy and the mean R^2 of each column's latents, an undefined (NaN) latent's
    left out (``evaluation.metric_inputs.defined_mean``; a column with none defined is NaN)."""
    index = {n: i for i, n in enumerate(latent_names)}
    row = {"Class": class_acc} if class_acc is not None else {}
    for c in cols:
        row[c.title] = defined_mean([r2[index[n]] for n in c.latents])
    return row


def markdown(rows: Mapping[str, Mapping[str, float]], col_marks: Mapping[str, str], note: str = "") -> str:
    """A markdown table; each column but Class is marked (S) style, (C) content or (C/S); bold for >= 0.5."""
    heads = list(next(iter(rows.values())))
    label = [h if h not in col_marks else f"{h} ({col_marks[h]})" for h in heads]
    lines = ["| representation | " + " | ".join(label) + " |", "|---" * (len(heads) + 1) + "|"]
    for name, row in rows.items():
        cells = [f"**{v:.2f}**" if v >= 0.5 else f"{v:.2f}" for v in row.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + (f"\n\n{note}" if note else "")
