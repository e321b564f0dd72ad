"""Paper 001's 3DIdent table from a finished ``ident3d compare`` output: per-latent linear R^2, their mean and
MCC per row (mean +- std over seeds), the fraction of the supervised ceiling, and the NN positives' snap distance.

    python benchmarks/paper001_table.py runs/paper001_3dident_cpu --out results/paper001_3dident
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

PAPER_MEAN_R2 = 0.98  # paper 001, 3DIdent: mean linear R^2 of InfoNCE with NN positives (250k images, 224 px)


def _json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def cell_scores(cell: Path) -> dict:
    """Per-latent linear R^2, mean, MCC and (NN rows) the mean logged snap distance of one cell."""
    rep = json.loads((cell / "report.json").read_text())["layers"]["output"]
    r2 = rep["r2_linear"]
    snaps = [r["views/snap_distance"] for r in _json_lines(cell / "metrics.jsonl") if "views/snap_distance" in r]
    return {"r2": r2, "mean": statistics.fmean(r2.values()), "mcc": rep["mcc_pearson_out_of_sample"],
            "snap": statistics.fmean(snaps) if snaps else None}


def _ms(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {statistics.pstdev(values):.2f}"


def table(out: Path) -> tuple[str, dict]:
    """The markdown table and its numbers, one row per compare row (its cells are cells/ROW/seedN)."""
    rows = {}
    for row in sorted((out / "cells").iterdir()):
        cells = [cell_scores(c) for c in sorted(row.glob("seed*")) if (c / "report.json").exists() and
                 c.name[4:].isdigit()]
        if cells:
            rows[row.name] = cells
    names = list(next(iter(rows.values()))[0]["r2"])
    ceiling = next((k for k in rows if k.startswith("supervised")), None)
    top = statistics.fmean(c["mean"] for c in rows[ceiling]) if ceiling else None
    head = ["row", "seeds", *names, "mean R^2", "MCC", "x ceiling", "snap distance"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    summary = {}
    for name, cells in rows.items():
        mean = [c["mean"] for c in cells]
        snaps = [c["snap"] for c in cells if c["snap"] is not None]
        summary[name] = {"n_seeds": len(cells), "mean_r2": statistics.fmean(mean),
                         "mcc": statistics.fmean(c["mcc"] for c in cells),
                         "r2": {k: statistics.fmean(c["r2"][k] for c in cells) for k in names},
                         "fraction_of_ceiling": statistics.fmean(mean) / top if top else None,
                         "snap_distance": statistics.fmean(snaps) if snaps else None}
        lines.append("| " + " | ".join([name, str(len(cells)), *(_ms([c["r2"][k] for c in cells]) for k in names),
                                        _ms(mean), _ms([c["mcc"] for c in cells]),
                                        f"{summary[name]['fraction_of_ceiling']:.2f}" if top else "-",
                                        f"{statistics.fmean(snaps):.3f}" if snaps else "-"]) + " |")
    note = (f"\n\nlinear R^2 per latent on held-out images (mean ± std over seeds); MCC: out-of-sample Pearson; "
            f"x ceiling: the row's mean R^2 over the supervised ceiling's; snap distance: mean L2 distance in latent "
            f"space between the drawn z~ and the stored latents it was snapped to (NN positives only; exact "
            f"positives have none). The paper's figure (quoted, 250k images at 224 px, ResNet-18, 30k steps): mean "
            f"linear R^2 about {PAPER_MEAN_R2}.")
    return "\n".join(lines) + note, summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compare_out", type=Path, help="the folder `ident3d compare --out` wrote")
    ap.add_argument("--out", type=Path, default=Path("results/paper001_3dident"))
    args = ap.parse_args()
    md, summary = table(args.compare_out)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(md + "\n")
    (args.out / "table.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(md)


if __name__ == "__main__":
    main()
