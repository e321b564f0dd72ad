"""Verdicts against the papers: how a scaling experiment's curve compares with a paper's value at its largest
point (``ident3d.evaluation.ceiling.verdict``: matches, above, or below, and whether the supervised ceiling bounds
the gap), where a log-linear trend over pixels seen would reach it, and the goals set for a row. Pure functions of
the points' numbers; ``ident3d scaling`` writes what they return."""

from __future__ import annotations

from typing import Any

import numpy as np

from ident3d.evaluation.ceiling import CEILING_NAME, MATCH, verdict

PAPER001_MEAN_R2 = 0.98  # paper 001, 3DIdent: mean linear R^2 of InfoNCE with NN positives (250k images, 224 px)


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


def paper000_facts(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each paper-000 cell of the three rows at the largest point: ours, paper's, the ceiling, compare's verdict
    (=, +, bounded, open) and the trend over the points."""
    pts = data["points"]
    last = pts[-1]
    xs = [p["scale"]["pixels_seen"] for p in pts]
    facts = []
    for row, cols in data["paper"].items():
        for col, want in cols.items():
            ys = [p["rows"][row][col] for p in pts if row in p["rows"]]
            top = last["rows"].get(CEILING_NAME, {}).get(col)
            facts.append({"row": row, "column": col, "paper": want, "ours": ys[-1], "ceiling": top,
                          "verdict": verdict(ys[-1], want, top), "curve": ys,
                          **({"trend": trend(xs, ys, want)} if len(ys) == len(xs) >= 3 else {})})
    return facts


def paper001_facts(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Paper 001's mean linear R^2 claim (0.98) per row at the largest point, and issue 21's goal for exact
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
        fact = {"row": row, "paper": PAPER001_MEAN_R2, "ours": ys[-1], "ceiling": top,
                "fraction_of_ceiling": ys[-1] / top if top else None,
                "verdict": verdict(ys[-1], PAPER001_MEAN_R2, top), "curve": ys,
                **({"trend": trend(xs, ys, PAPER001_MEAN_R2)} if len(ys) == len(xs) >= 3 else {})}
        if "exact" in row:
            fact["goal_met"] = bool(ys[-1] >= 0.90 and top and ys[-1] >= 0.95 * top)
        facts.append(fact)
    return facts
