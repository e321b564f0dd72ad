"""``ident3d show``: print a store's summary and save a grid of its images with their latents."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipelines.files import check_output, write_atomic


def summary(group: Any, path: str) -> Table:
    """A table of what the store holds and how it was made."""
    from render.store import done_mask, view_names

    a = dict(group.attrs)
    done = done_mask(group, path)
    n, h, w, _ = group["images"].shape
    t = Table(title=escape(f"store {path}"), title_justify="left", show_header=False)
    rows = [
        ("scene", a.get("scene", "?")),
        ("images", f"{n} x {h}x{w} RGB, {int(done.sum())}/{len(done)} chunks done"
                   f" (chunk size {group['images'].chunks[0]})"),
        ("latents", ", ".join(a.get("latent_names", []))),
        ("groups", "; ".join(f"{g}: {', '.join(m)}" for g, m in a.get("latent_groups", {}).items())),
        ("classes", ", ".join(a.get("class_names") or []) or "-"),
        ("views", "; ".join(f"{v}: {', '.join(c)}" for v, c in a.get("views", {}).items()) or "-"),
        ("render", ", ".join(f"{k}={v}" for k, v in a.get("render", {}).items())),
        ("seed", str(a.get("seed"))),
        ("software", ", ".join(f"{k} {v}" for k, v in a.get("software", {}).items())),
    ]
    if view_names(group):
        rows.append(("pairs", "anchor left, views to the right in the grid"))
    for k, v in rows:
        t.add_row(k, escape(str(v)))
    return t


def _caption(latents: np.ndarray, names: list[str], groups: dict[str, list[str]], cls: str | None) -> str:
    lines = [cls] if cls else []
    for g, members in groups.items():
        vals = [f"{latents[names.index(m)]:+.2f}" for m in members if m in names]
        if vals:
            lines.append(f"{g[:4]} " + " ".join(vals))
    return "\n".join(lines)


def save_grid(group: Any, out: Path, count: int = 12, cols: int = 4, seed: int | None = None,
              path: str | None = None) -> Path:
    """Save a grid of (done) images; each cell shows the anchor and its views side by side.

    A damaged chunk among the shown rows is a one-line error naming it (``path``: the store's name in it).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from render.store import chunk_bounds, done_mask, read_rows, store_name, view_names

    a = dict(group.attrs)
    path = path or store_name(group)
    n, c = group["images"].shape[0], group["images"].chunks[0]
    rows_done = np.concatenate([np.arange(*chunk_bounds(k, c, n)) for k in np.flatnonzero(done_mask(group, path))]
                               or [np.zeros(0, int)])
    if rows_done.size == 0:
        from causal.errors import UserError

        raise UserError("the store has no finished chunk yet; render it first")
    pick = rows_done[:count] if seed is None else np.sort(
        np.random.default_rng(seed).choice(rows_done, min(count, rows_done.size), replace=False))
    views = view_names(group)
    prefixes = [""] + [f"views/{v}/" for v in views]
    names, groups = a.get("latent_names", []), a.get("latent_groups", {})
    class_names = a.get("class_names")
    cols = max(1, cols // len(prefixes)) * len(prefixes)
    per_row = cols // len(prefixes)
    nrows = -(-len(pick) // per_row)
    fig, axes = plt.subplots(nrows, cols, figsize=(2.0 * cols, 2.6 * nrows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for i, row in enumerate(pick):
        for j, pre in enumerate(prefixes):
            ax = axes[i // per_row, (i % per_row) * len(prefixes) + j]
            ax.imshow(read_rows(group[f"{pre}images"], int(row), path))
            lat = read_rows(group[f"{pre}latents"], int(row), path)
            cls = class_names[int(read_rows(group[f"{pre}classes"], int(row), path))] if class_names else None
            title = f"#{row}" if not pre else views[j - 1]
            ax.set_title(title, fontsize=7)
            ax.text(0.0, -0.02, _caption(lat, names, groups, cls), transform=ax.transAxes, fontsize=5.5,
                    va="top", family="monospace")
    fig.suptitle(f"{a.get('scene', '')}: {len(pick)} of {n} images" + (f" with views {', '.join(views)}"
                                                                         if views else ""), fontsize=9)
    fig.tight_layout()
    write_atomic(out, lambda p: fig.savefig(p, dpi=130, format=out.suffix[1:]))
    plt.close(fig)
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="summarise a store and save a grid of its images",
                       description="Print a store's summary (scene, size, progress, latents, views, settings) "
                                   "and, with --out, save a grid of images captioned with their latents "
                                   "(LT pairs side by side).",
                       epilog="example: ident3d show stores/c3d.zarr --out grid.png --count 16")
    p.add_argument("store", metavar="STORE", help="a store made by `ident3d render`")
    p.add_argument("--out", help="grid image to write (.png, .pdf or .svg)")
    p.add_argument("--count", type=int, default=12, help="images in the grid (default 12)")
    p.add_argument("--cols", type=int, default=4, help="columns in the grid (default 4)")
    p.add_argument("--seed", type=int, default=None, help="pick random images with this seed "
                                                          "(default: the first ones)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing grid image")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from causal.errors import UserError
    from render.store import open_store

    if args.count <= 0 or args.cols <= 0:
        raise UserError("--count and --cols must be positive")
    out = check_output(args.out, (".png", ".pdf", ".svg"), args.overwrite) if args.out else None
    group = open_store(args.store)
    Console(width=140).print(summary(group, args.store))
    if out:
        save_grid(group, out, args.count, args.cols, args.seed, path=args.store)
        print(f"wrote {out}")
    return 0
