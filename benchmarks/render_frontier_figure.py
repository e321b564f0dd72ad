"""The figure of benchmarks/render_frontier.py: per resolution, ms per image against SSIM for every point, the
Pareto frontier as a staircase, today's fast preset and derive_fast's pick marked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

FAMILIES = ("samples x denoiser", "adaptive sampling", "light tree", "OIDN quality", "filter width", "tile size")
SSIM_CLIP = (1e-3, 1 - 1e-5)  # the logit axis cannot show 0 or 1


def figure(results: dict[str, Any], path: Path) -> None:
    """One panel per resolution: x ms/img (log), y SSIM on a logit axis (0.9, 0.99 and 0.999 equally spaced, where
    the good points sit); points coloured by family, the frontier a black staircase, today's fast a red star, the
    pick of derive_fast a green ring; the reference (SSIM 1) is left out and its ms/img named in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    res = list(results["resolutions"])
    fig, axes = plt.subplots(1, len(res), figsize=(5.2 * len(res), 4.6), squeeze=False)
    colours = dict(zip(FAMILIES, plt.get_cmap("tab10").colors, strict=False))
    for ax, r in zip(axes[0], res, strict=True):
        row = results["resolutions"][r]
        points = [p for p in row["points"] if not p["reference"]]
        by_label = {p["label"]: p for p in points}
        y = {p["label"]: float(np.clip(p["ssim"], *SSIM_CLIP)) for p in points}
        for fam in FAMILIES:
            mine = [p for p in points if p["family"] == fam]
            if mine:
                ax.scatter([p["ms_per_img"] for p in mine], [y[p["label"]] for p in mine], s=14, color=colours[fam],
                           label=fam)
        front = [by_label[label] for label in row["frontier"]]
        ax.plot([p["ms_per_img"] for p in front], [y[p["label"]] for p in front], color="black", lw=1,
                drawstyle="steps-post", label="frontier")  # the best SSIM reachable within a time
        for p in front:
            ax.annotate(p["label"], (p["ms_per_img"], y[p["label"]]), fontsize=5, xytext=(3, -6),
                        textcoords="offset points")
        fast = next(p for p in points if p["fast"])
        ax.scatter([fast["ms_per_img"]], [y[fast["label"]]], marker="*", s=140, color="red", zorder=5,
                   label="today's fast")
        pick = results.get("derive_fast", {}).get(r)
        if pick is not None:
            ax.scatter([pick["ms_per_img"]], [float(np.clip(pick["ssim"], *SSIM_CLIP))], s=120, facecolors="none",
                       edgecolors="green", lw=1.5, zorder=6, label="derive_fast")
        ax.set_xscale("log")
        ax.set_yscale("logit")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("ms per image (render phase)")
        ax.set_ylabel("SSIM vs the reference")
        ax.set_title(f"{r} px, {row['n']} images (reference {row['reference_ms_per_img']:.0f} ms/img)", fontsize=9)
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
    axes[0][0].legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
