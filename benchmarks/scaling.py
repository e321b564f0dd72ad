"""Scaling curves: how image results and their fraction of the supervised ceiling grow with images x resolution x
steps, from finished ``ident3d compare`` outputs (one per scale point), with a verdict per paper fact at the largest
point and a labelled log-linear extrapolation of where each curve would reach the paper's value.

    python benchmarks/scaling.py --out results/scaling \\
        --paper001 configs/scaling/paper001_s1.yaml=runs/scaling/paper001_s1 \\
                   configs/scaling/paper001_s2.yaml=runs/scaling/paper001_s2 \\
                   configs/paper001_3dident_cpu.yaml=runs/paper001_3dident_cpu \\
        --paper000 configs/da_vs_lt_small.yaml=runs/da_vs_lt_small \\
                   configs/scaling/paper000_s2.yaml=runs/scaling/paper000_s2 \\
                   configs/scaling/paper000_s3.yaml=runs/scaling/paper000_s3
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from paper001_table import PAPER_MEAN_R2
from paper001_table import table as paper001_summary

from evaluation.ceiling import CEILING_NAME, MATCH, verdict

PAPER000_ROWS = ("LT: change hues", "DA: crop (large) + colour distortion", "LT: change positions + hues")


def scale_of(cfg: dict[str, Any]) -> dict[str, Any]:
    """A point's scale: training images, resolution, steps, batch and the pixels the encoder saw (the x axis)."""
    store, train = cfg["stores"]["train"], cfg["train"]
    n, px, steps, batch = store["n"], store["resolution"], train["steps"], train["batch_size"]
    return {"images": n, "resolution": px, "steps": steps, "batch_size": batch, "seeds": len(cfg.get("seeds", [0])),
            "pixels_seen": steps * batch * px * px, "label": f"{n / 1024:g}k img / {px} px / {steps} steps"}


def trend(xs: list[float], ys: list[float], target: float) -> dict[str, Any]:
    """Least-squares line of score against log10(pixels seen); where it rises towards ``target`` (or falls towards
    it), the pixels seen at which the line reaches it and that as a multiple of the largest point (extrapolation)."""
    x = np.log10(np.asarray(xs, dtype=float))
    slope, icept = np.polyfit(x, np.asarray(ys, dtype=float), 1)
    out: dict[str, Any] = {"slope_per_decade": float(slope)}
    gap = target - ys[-1]
    if abs(gap) <= MATCH:
        out["reaches_paper"] = f"already within {MATCH}"
    elif slope != 0 and np.sign(slope) == np.sign(gap):
        at = 10 ** ((target - icept) / slope)
        out["reaches_paper"] = "extrapolation"
        out["times_largest"] = float(at / xs[-1])
    else:
        out["reaches_paper"] = "not on this trend"
    return out


def paper001_points(points: list[tuple[Path, Path]]) -> dict[str, Any]:
    """Per point, each row's mean linear R^2, per-latent R^2, MCC, fraction of the ceiling and snap distance."""
    out = []
    for cfg_path, run in points:
        cfg = yaml.safe_load(cfg_path.read_text())
        _, rows = paper001_summary(run)
        out.append({"config": str(cfg_path), "run": str(run), "scale": scale_of(cfg), "rows": rows})
    return {"points": out}


def paper000_points(points: list[tuple[Path, Path]]) -> dict[str, Any]:
    """Per point, the three rows' and the ceiling's column means (compare's table.json) and the paper's values."""
    out, paper = [], {}
    for cfg_path, run in points:
        cfg = yaml.safe_load(cfg_path.read_text())
        summary = json.loads((run / "table.json").read_text())
        rows = {name: {c: v[0] for c, v in summary["table"][name].items()}
                for name in (*PAPER000_ROWS, CEILING_NAME) if name in summary["table"]}
        paper.update({r["name"]: dict(zip(summary["columns"], r["paper"], strict=True))
                      for r in cfg["rows"] if r["name"] in PAPER000_ROWS and r.get("paper")})
        out.append({"config": str(cfg_path), "run": str(run), "scale": scale_of(cfg), "columns": summary["columns"],
                    "rows": rows})
    return {"points": out, "paper": paper}


def paper000_facts(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each paper-000 cell of the three rows at the largest point: ours, paper's, the ceiling, compare's verdict
    (=, +, bounded, open) and the trend over the points."""
    pts = data["points"]
    last, ceiling = pts[-1], CEILING_NAME
    xs = [p["scale"]["pixels_seen"] for p in pts]
    facts = []
    for row, cols in data["paper"].items():
        for col, want in cols.items():
            ys = [p["rows"][row][col] for p in pts if row in p["rows"]]
            top = last["rows"].get(ceiling, {}).get(col)
            facts.append({"row": row, "column": col, "paper": want, "ours": ys[-1], "ceiling": top,
                          "verdict": verdict(ys[-1], want, top), "curve": ys,
                          **({"trend": trend(xs, ys, want)} if len(ys) == len(xs) >= 3 else {})})
    return facts


def paper001_facts(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Paper 001's mean linear R^2 claim (0.98) per row at the largest point, and the issue's goal for exact
    positives (>= 0.90 and >= 0.95 x the ceiling)."""
    pts = data["points"]
    xs = [p["scale"]["pixels_seen"] for p in pts]
    ceiling = next((k for k in pts[-1]["rows"] if k.startswith("supervised")), None)
    top = pts[-1]["rows"][ceiling]["mean_r2"] if ceiling else None
    facts = []
    for row in pts[-1]["rows"]:
        if row == ceiling:
            continue
        ys = [p["rows"][row]["mean_r2"] for p in pts if row in p["rows"]]
        fact = {"row": row, "paper": PAPER_MEAN_R2, "ours": ys[-1], "ceiling": top,
                "fraction_of_ceiling": ys[-1] / top if top else None,
                "verdict": verdict(ys[-1], PAPER_MEAN_R2, top), "curve": ys,
                **({"trend": trend(xs, ys, PAPER_MEAN_R2)} if len(ys) == len(xs) >= 3 else {})}
        if "exact" in row:
            fact["goal_met"] = bool(ys[-1] >= 0.90 and top and ys[-1] >= 0.95 * top)
        facts.append(fact)
    return facts


def figure(p001: dict[str, Any] | None, p000: dict[str, Any] | None, path: Path) -> None:
    """Scores and fractions of the ceiling against pixels seen (log axis), one panel per row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    panels = (1 if p001 else 0) + (len(PAPER000_ROWS) + 1 if p000 else 0)
    fig, axes = plt.subplots(2, panels, figsize=(3.6 * panels, 6.4), squeeze=False)
    k = 0
    if p001:
        xs = [p["scale"]["pixels_seen"] for p in p001["points"]]
        ax, fx = axes[0][k], axes[1][k]
        for row in p001["points"][-1]["rows"]:
            ys = [p["rows"].get(row, {}).get("mean_r2", math.nan) for p in p001["points"]]
            ax.plot(xs, ys, "o-", label=row[:38])
            fr = [p["rows"].get(row, {}).get("fraction_of_ceiling") or math.nan for p in p001["points"]]
            if not row.startswith("supervised"):
                fx.plot(xs, fr, "o-", label=row[:38])
        ax.axhline(PAPER_MEAN_R2, ls="--", c="k", lw=0.8, label="paper 001 (250k, 224 px)")
        ax.set_title("paper 001, 3DIdent: mean linear R^2", fontsize=9)
        fx.set_title("paper 001: fraction of the ceiling", fontsize=9)
        ax.legend(fontsize=6)
        k += 1
    if p000:
        xs = [p["scale"]["pixels_seen"] for p in p000["points"]]
        cols = p000["points"][-1]["columns"]
        for row in (CEILING_NAME, *PAPER000_ROWS):
            ax, fx = axes[0][k], axes[1][k]
            for col in cols:
                ys = [p["rows"].get(row, {}).get(col, math.nan) for p in p000["points"]]
                line, = ax.plot(xs, ys, "o-", label=col, lw=1)
                if row in p000["paper"]:
                    ax.plot([xs[-1] * 1.6], [p000["paper"][row][col]], "_", c=line.get_color(), ms=12, mew=2)
                    top = [p["rows"].get(CEILING_NAME, {}).get(col, math.nan) for p in p000["points"]]
                    fx.plot(xs, [y / t if t > 0 else math.nan for y, t in zip(ys, top, strict=True)], "o-", lw=1,
                            c=line.get_color())
            ax.set_title(f"paper 000: {row}" + (" (dash: paper)" if row in p000["paper"] else ""), fontsize=8)
            fx.set_title(f"{row}: fraction of the ceiling" if row in p000["paper"] else "", fontsize=8)
            if row == CEILING_NAME:
                ax.legend(fontsize=6)
                fx.axis("off")
            k += 1
    for ax in axes.flat:
        if ax.axison:
            ax.set_xscale("log")
            ax.set_xlabel("pixels seen (steps x batch x px^2)", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_ylim(-0.1, 1.1) if ax in axes[0] else ax.set_ylim(-0.1, 1.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _pairs(values: list[str] | None) -> list[tuple[Path, Path]]:
    out = []
    for v in values or []:
        cfg, sep, run = v.partition("=")
        if not sep:
            raise SystemExit(f"scaling: give CONFIG=RUN, got {v!r}")
        out.append((Path(cfg), Path(run)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paper001", nargs="+", metavar="CONFIG=RUN", help="paper 001 scale points, smallest first")
    ap.add_argument("--paper000", nargs="+", metavar="CONFIG=RUN", help="paper 000 scale points, smallest first")
    ap.add_argument("--out", type=Path, default=Path("results/scaling"))
    args = ap.parse_args()
    p001 = paper001_points(_pairs(args.paper001)) if args.paper001 else None
    p000 = paper000_points(_pairs(args.paper000)) if args.paper000 else None
    result: dict[str, Any] = {"match": MATCH}
    if p001:
        result["paper001"] = {**p001, "facts": paper001_facts(p001)}
    if p000:
        result["paper000"] = {**p000, "facts": paper000_facts(p000)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scaling.json").write_text(json.dumps(result, indent=2) + "\n")
    figure(p001, p000, args.out / "scaling.png")
    print(f"wrote {args.out / 'scaling.json'} and {args.out / 'scaling.png'}")


if __name__ == "__main__":
    main()
