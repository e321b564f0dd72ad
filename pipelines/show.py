"""``ident3d show``: print a store's summary and save a grid of its images with their latents; given several
stores, save them side by side (the same latent rows, one figure row per store), e.g. a store rendered with
your own meshes (``ident3d render --meshes-dir``) next to one rendered with the stand-ins."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ident3d.causal.errors import UserError
from ident3d.pipelines.files import check_output, write_atomic
from ident3d.pipelines.show_masks import legend, object_summary, overlay, placement_line
from ident3d.store.attrs import StoreAttrs, read_attrs

# zarr (store.zarr_io, store.layout) and matplotlib are imported where they are used: `ident3d show --help` (and
# `ident3d --help`) import this module and need neither (zarr +0.13 s, matplotlib +0.45 s)


def summary(group: Any, path: str) -> Table:
    """A table of what the store holds and how it was made."""
    from ident3d.store.zarr_io import done_mask, view_names  # zarr: not for --help

    a = read_attrs(group, path)
    done = done_mask(group, path)
    n, h, w, _ = group["images"].shape
    t = Table(title=escape(f"store {path}"), title_justify="left", show_header=False)
    rows = [
        ("scene", a.scene),
        ("images", f"{n} x {h}x{w} RGB, {int(done.sum())}/{len(done)} chunks done"
                   f" (chunk size {group['images'].chunks[0]})"),
        ("latents", ", ".join(a.latent_names)),
        ("groups", "; ".join(f"{g}: {', '.join(m)}" for g, m in a.latent_groups.items())),
        ("classes", ", ".join(a.class_names or []) or "-"),
        ("meshes", mesh_note(a)),
        ("views", "; ".join(f"{v}: {', '.join(c) or 'no latent changed'}" for v, c in a.views.items()) or "-"),
        *([("mechanisms", mechanism_note(a))] if a.view_mechanisms else []),
        ("render", ", ".join(f"{k}={v}" for k, v in a.render.items())),
        ("seed", str(a.seed)),
        *([("sequences", f"{a.sequences['sequences']} x {a.sequences['length']} steps of "
                         f"{a.sequences['spec'].get('name', 'a dynamic SCM')} ({sequence_origin(a.sequences)})")]
          if a.sequences else []),
        *([("captions", f"{(a.text.get('spec') or {}).get('name', 'imported')}; text latents "
                        f"{', '.join(a.text['names'])}")] if a.text else []),
        ("software", ", ".join(f"{k} {v}" for k, v in a.software.items())),
    ]
    if view_names(group):
        rows.append(("pairs", "anchor left, views to the right in the grid"))
    finished = _done_rows(group, path)
    objects = object_summary(group, finished, path)
    if objects:
        rows.append(("objects", objects))
    placed = placement_line(group, finished, a.scm, path)
    if placed:
        rows.append(("placement", placed))
    for k, v in rows:
        t.add_row(k, escape(str(v)))
    return t


def mechanism_note(a: StoreAttrs) -> str:
    """The views rendered by a second mechanism, each with its knobs and the latents only one image shows."""
    notes = []
    for view, knobs in (a.view_mechanisms or {}).items():
        specific = a.blocks.get(view, {}).get("specific")
        notes.append(f"{view}: {', '.join(f'{k}={v}' for k, v in knobs.items())}"
                     + (f" (specific: {', '.join(specific)})" if specific else ""))
    return "; ".join(notes)


def sequence_origin(record: dict) -> str:
    """Where a sequence store's sequences came from: a rollout's seed, or the file they were imported from."""
    return f"imported from {record['imported_from']}" if record.get("imported_from") else f"seed {record['seed']}"


def mesh_note(attrs: StoreAttrs) -> str:
    """Which classes used a mesh file (name and sha256 prefix) and which their built-in stand-in, from a store's
    attributes."""
    meshes, hashes = attrs.meshes or {}, attrs.mesh_sha256 or {}
    files = [f"{c}={Path(m).name} ({hashes[c][:8]})" if c in hashes else f"{c}={Path(m).name}"
             for c, m in meshes.items() if not str(m).startswith("builtin:")]
    standins = [c for c, m in meshes.items() if str(m).startswith("builtin:")]
    if not files:
        return "built-in stand-ins" if standins else "-"
    return ", ".join(files) + (f"; stand-ins: {', '.join(standins)}" if standins else "")


CAPTION_VALUES = 6  # values per caption line: a multi-object store's groups (13 positions) wrap instead of overflowing
CAPTION_WIDTH, CAPTION_LINES = 34, 4  # a stored caption under its image: characters per line, lines at most


def _caption(latents: np.ndarray, names: list[str], groups: dict[str, list[str]], cls: str | None) -> str:
    """A cell's caption: the class name, then each latent group's values (wrapped, so long groups fit the cell)."""
    lines = [cls] if cls else []
    for g, members in groups.items():
        vals = [f"{latents[names.index(m)]:+.2f}" for m in members if m in names]
        for start in range(0, len(vals), CAPTION_VALUES):
            lines.append(f"{g[:4] if start == 0 else '':4} " + " ".join(vals[start:start + CAPTION_VALUES]))
    return "\n".join(lines)


def wrap_caption(text: str) -> str:
    """A caption wrapped to a grid cell's width, at most ``CAPTION_LINES`` lines (the rest elided)."""
    lines = textwrap.wrap(text, CAPTION_WIDTH) or [""]
    if len(lines) > CAPTION_LINES:
        lines = lines[:CAPTION_LINES - 1] + [lines[CAPTION_LINES - 1][:CAPTION_WIDTH - 3] + "..."]
    return "\n".join(lines)


def save_grid(group: Any, out: Path, count: int = 12, cols: int = 4, seed: int | None = None,
              path: str | None = None, masks: bool | None = None) -> list[list[tuple[int, int, int, int]]]:
    """Save a grid of (done) images; each cell shows the anchor and its views side by side.

    ``masks``: draw each image with its object masks blended over it (pipelines/show_masks.py; None: when the store
    has masks). A damaged chunk among the shown rows is a one-line error naming it (``path``: the store's name in
    it). Returns each image's pixel box (x0, y0, x1, y1) in the saved PNG, ``boxes[i][j]`` for the i-th shown row and
    its anchor (j = 0) or view j, so callers can compare cells with the store.
    """
    import matplotlib  # not for --help

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ident3d.store.zarr_io import (  # zarr: not for --help
        chunk_bounds,
        done_mask,
        read_rows,
        store_name,
        view_names,
    )

    path = path or store_name(group)
    a = read_attrs(group, path)
    n, c = group["images"].shape[0], group["images"].chunks[0]
    rows_done = np.concatenate([np.arange(*chunk_bounds(k, c, n)) for k in np.flatnonzero(done_mask(group, path))]
                               or [np.zeros(0, int)])
    if rows_done.size == 0:
        raise UserError("the store has no finished chunk yet; render it first")
    pick = rows_done[:count] if seed is None else np.sort(
        np.random.default_rng(seed).choice(rows_done, min(count, rows_done.size), replace=False))
    views = view_names(group)
    prefixes = [""] + [f"views/{v}/" for v in views]
    masks = "masks" in group if masks is None else masks
    if masks:  # every drawn masks array and the slots of the legend, as declared: else one line saying what to run
        from ident3d.store.layout import require_layout  # zarr: not for --help

        require_layout(group, a, path, [f"{pre}{name}" for pre in prefixes for name in ("masks", "present")])
    names, groups, class_names = a.latent_names, a.latent_groups, a.class_names
    cols = max(1, cols // len(prefixes)) * len(prefixes)
    per_row = cols // len(prefixes)
    nrows = -(-len(pick) // per_row)
    lines = _caption(np.zeros(len(names)), names, groups, "class" if class_names else None).count("\n") + 1
    captioned = bool(a.text) and "text" in group
    lines += CAPTION_LINES if captioned else 0
    fig, axes = plt.subplots(nrows, cols, figsize=(2.0 * cols, max(2.6, 1.9 + 0.11 * lines) * nrows), squeeze=False,
                             dpi=130)
    for ax in axes.flat:
        ax.axis("off")
    cells: list[list[Any]] = []
    for i, row in enumerate(pick):
        cells.append([])
        for j, pre in enumerate(prefixes):
            ax = axes[i // per_row, (i % per_row) * len(prefixes) + j]
            cells[-1].append(ax)
            image = read_rows(group[f"{pre}images"], int(row), path)
            if masks:
                image = overlay(image, read_rows(group[f"{pre}masks"], int(row), path))
            ax.imshow(image, interpolation="nearest")
            lat = read_rows(group[f"{pre}latents"], int(row), path)
            cls = class_names[int(read_rows(group[f"{pre}classes"], int(row), path))] if class_names else None
            title = f"#{row}" if not pre else views[j - 1]
            ax.set_title(title, fontsize=7)
            text = _caption(lat, names, groups, cls)
            if captioned and not pre:  # the image's caption under it (captions belong to the anchors)
                text = wrap_caption(str(read_rows(group["text"], int(row), path))) + "\n" + text
            ax.text(0.0, -0.02, text, transform=ax.transAxes, fontsize=5.5, va="top", family="monospace")
    key = f"; {legend(group['present'].shape[1])}" if masks else ""
    fig.suptitle(f"{a.scene}: {len(pick)} of {n} images" + (f" with views {', '.join(views)}"
                                                                         if views else "") + key, fontsize=9)
    fig.tight_layout()
    fig.canvas.draw()
    height = fig.canvas.get_width_height()[1]
    boxes = [[_pixel_box(ax, height) for ax in row_axes] for row_axes in cells]
    write_atomic(out, lambda p: fig.savefig(p, dpi=130, format=out.suffix[1:]))
    plt.close(fig)
    return boxes


def _done_rows(group: Any, path: str) -> np.ndarray:
    """Rows of the store's finished chunks, in order."""
    from ident3d.store.zarr_io import chunk_bounds, done_mask  # zarr: not for --help

    n, c = group["images"].shape[0], group["images"].chunks[0]
    return np.concatenate([np.arange(*chunk_bounds(k, c, n)) for k in np.flatnonzero(done_mask(group, path))]
                          or [np.zeros(0, int)])


def _shared_rows(groups: Sequence[Any], names: Sequence[str], count: int, seed: int | None) -> np.ndarray:
    """Up to ``count`` rows finished in every store (the first ones, or a random pick with ``seed``)."""
    rows = _done_rows(groups[0], names[0])
    for g, name in zip(groups[1:], names[1:], strict=True):
        rows = np.intersect1d(rows, _done_rows(g, name))
    if rows.size == 0:
        raise UserError(f"{', '.join(names)} have no finished rows in common; render them first")
    if seed is None:
        return rows[:count]
    return np.sort(np.random.default_rng(seed).choice(rows, min(count, rows.size), replace=False))


def _same_latents(groups: Sequence[Any], names: Sequence[str], rows: np.ndarray) -> None:
    """Every store holds the first store's latents and classes in ``rows``; else a one-line UserError."""
    from ident3d.store.zarr_io import read_rows  # zarr: not for --help

    def values(g: Any, name: str, key: str) -> np.ndarray | None:
        return read_rows(g[key], slice(0, int(rows.max()) + 1), name)[rows] if key in g else None

    for key in ("latents", "classes"):
        ref = values(groups[0], names[0], key)
        for g, name in zip(groups[1:], names[1:], strict=True):
            bad = _first_mismatch(ref, values(g, name, key), rows)
            if bad is not None:
                raise UserError(f"{name} holds other {key} than {names[0]} (row {bad}); side by side needs stores "
                                "rendered from the same rows (same --seed and --n, or the same --latents)")


def _first_mismatch(a: np.ndarray | None, b: np.ndarray | None, rows: np.ndarray) -> int | None:
    """The first of ``rows`` where two stores' values (rows x ...) differ; None when they all agree."""
    if a is None and b is None:
        return None
    if a is None or b is None or a.shape != b.shape:
        return int(rows[0])
    differ = ~np.isclose(a, b, atol=1e-6).reshape(len(rows), -1).all(1)
    return int(rows[np.argmax(differ)]) if differ.any() else None


def _store_label(group: Any, name: str) -> str:
    """A figure row's label: the store's folder name, then one line per class mesh file (or 'stand-ins')."""
    meshes = read_attrs(group, name).meshes or {}
    files = [f"{c}: {Path(m).name}" for c, m in meshes.items() if not str(m).startswith("builtin:")]
    rest = "other classes: stand-ins" if files and len(files) < len(meshes) else None
    lines = [Path(name.rstrip("/")).name, *(files or ["built-in stand-ins"]), *([rest] if rest else [])]
    return "\n".join(lines)


def save_side_by_side(groups: Sequence[Any], names: Sequence[str], out: Path, count: int = 12,
                      seed: int | None = None) -> list[list[tuple[int, int, int, int]]]:
    """Save several stores' images of the same latent rows side by side: one figure row per store (labelled
    with its name and mesh files), one column per row, captioned with row index and class. The stores must hold
    the same latents (and classes) in those rows, else a one-line UserError. Returns each image's pixel box
    (x0, y0, x1, y1) in the saved PNG, ``boxes[store][column]``, so callers can compare cells."""
    import matplotlib  # not for --help

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ident3d.store.zarr_io import read_rows  # zarr: not for --help

    rows = _shared_rows(groups, names, count, seed)
    _same_latents(groups, names, rows)
    class_names = read_attrs(groups[0], names[0]).class_names
    labels = [_store_label(g, name) for g, name in zip(groups, names, strict=True)]
    left = 0.2 + 0.045 * max(len(line) for label in labels for line in label.splitlines())  # inches, 6 pt text
    fig, axes = plt.subplots(len(groups), len(rows), figsize=(1.25 * len(rows) + left, 1.3 * len(groups) + 0.3),
                             squeeze=False, dpi=100)
    for i, (g, name) in enumerate(zip(groups, names, strict=True)):
        for j, row in enumerate(rows):
            ax = axes[i, j]
            ax.imshow(read_rows(g["images"], int(row), name), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                cls = class_names[int(read_rows(g["classes"], int(row), name))] if class_names else ""
                ax.set_title(f"#{row} {cls}".strip(), fontsize=7)
        axes[i, 0].set_ylabel(labels[i], fontsize=6, rotation=0, ha="right", va="center")
    fig.subplots_adjust(left=left / fig.get_figwidth(), right=0.99, top=1 - 0.25 / fig.get_figheight(),
                        bottom=0.02, wspace=0.05, hspace=0.05)
    fig.canvas.draw()
    height = fig.canvas.get_width_height()[1]
    boxes = [[_pixel_box(ax, height) for ax in axes[i]] for i in range(len(groups))]
    write_atomic(out, lambda p: fig.savefig(p, dpi=100, format=out.suffix[1:]))
    plt.close(fig)
    return boxes


def _pixel_box(ax: Any, height: int) -> tuple[int, int, int, int]:
    """An axes' image area as (x0, y0, x1, y1) PNG pixels, rounded inwards (top row first)."""
    b = ax.get_window_extent()
    return (int(np.ceil(b.x0)), int(np.ceil(height - b.y1)), int(np.floor(b.x1)), int(np.floor(height - b.y0)))


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``ident3d show STORE [STORE ...]``."""
    p = sub.add_parser("show", help="summarise a store and save a grid of its images (or stores side by side)",
                       description="Print a store's summary (scene, size, progress, latents, views, settings, "
                                   "meshes) and, with --out, save a grid of images captioned with their latents "
                                   "(LT pairs side by side). Given two or more stores rendered from the same "
                                   "latents (e.g. with and without --meshes-dir), --out saves them side by side: "
                                   "one figure row per store, the same rows in every column.",
                       epilog="examples:\n  ident3d show stores/c3d.zarr --out grid.png --count 16\n"
                              "  ident3d show stores/multi.zarr --out grid.png --no-masks   # without mask overlays\n"
                              "  ident3d show stores/scans.zarr stores/standins.zarr --out side_by_side.png --count 7",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", metavar="STORE", nargs="+", help="one or more stores made by `ident3d render`")
    p.add_argument("--out", help="grid image to write (.png, .pdf or .svg)")
    p.add_argument("--count", type=int, default=12, help="images in the grid (default 12)")
    p.add_argument("--cols", type=int, default=4, help="columns in the grid (default 4)")
    p.add_argument("--seed", type=int, default=None, help="pick random images with this seed "
                                                          "(default: the first ones)")
    p.add_argument("--masks", action=argparse.BooleanOptionalAction, default=None,
                   help="blend each object's mask over the grid's images in its slot's colour, background untouched "
                        "(default: on for stores with masks, i.e. multi-object stores; --no-masks: plain images)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing grid image")
    p.set_defaults(run=run)


def _readable(path: str) -> Any:
    """The store at ``path``, its per-row arrays held against the store format first (``store.layout``): a missing
    or reshaped array is one line saying what to run, before anything is printed or drawn."""
    from ident3d.store.layout import require_layout  # zarr: not for --help
    from ident3d.store.zarr_io import open_store

    group = open_store(path)
    require_layout(group, read_attrs(group, path), path)
    return group


def run(args: argparse.Namespace) -> int:
    """Print each store's summary; with --out save the grid (one store) or the side-by-side figure (several)."""
    if args.count <= 0 or args.cols <= 0:
        raise UserError("--count and --cols must be positive")
    out = check_output(args.out, (".png", ".pdf", ".svg"), args.overwrite) if args.out else None
    groups = [_readable(path) for path in args.store]
    first = read_attrs(groups[0], args.store[0])
    if args.masks and (len(groups) > 1 or first.sequences):
        raise UserError("--masks draws over one store's grid of images; show a single (non-sequence) store with it")
    if args.masks and "masks" not in groups[0]:
        raise UserError(f"--masks: {args.store[0]} has no object masks (multi-object stores have them, e.g. "
                        "--scene multi3dident); drop --masks")
    for group, path in zip(groups, args.store, strict=True):
        Console(width=140).print(summary(group, path))
    if out and len(groups) == 1 and first.sequences:  # a sequence store: strips of frames, interventions marked
        from ident3d.pipelines.show_sequences import save_strips  # matplotlib, zarr: not for --help

        save_strips(groups[0], first, out, count=min(args.count, 6), path=args.store[0])
    elif out and len(groups) == 1:
        save_grid(groups[0], out, args.count, args.cols, args.seed, path=args.store[0], masks=args.masks)
    elif out:
        save_side_by_side(groups, args.store, out, args.count, args.seed)
    if out:
        print(f"wrote {out}")
    return 0
