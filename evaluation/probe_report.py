"""``ident3d probe``'s report: paper 004's probes of one or more trained runs on labelled images, all on one seeded
fit/test split, scored by the ``probe`` and ``recon`` metrics (``ident3d.evaluation.probe_metrics``), with a table
and the reconstructions figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.evaluation.metric_suite import ScoringData, score
from ident3d.evaluation.probe_run import encode, load_objective, reconstructions, unnormalise
from ident3d.training.run_dir import RunDir


def split_rows(n: int, fit_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of ``n`` rows into sorted (fit, test) row ids."""
    if not 0 < fit_fraction < 1:
        raise UserError(f"--fit-fraction must be between 0 and 1, got {fit_fraction}")
    order = np.random.default_rng(seed).permutation(n)
    cut = int(round(n * fit_fraction))
    return np.sort(order[:cut]), np.sort(order[cut:])


def probe_run(run_dir: str, images: np.ndarray, classes: np.ndarray, fit: np.ndarray, test: np.ndarray,
              seed: int = 0, recon: bool = True, figure: bool = False) -> tuple[dict[str, Any], np.ndarray | None]:
    """One run's report (the ``probe`` metric of its representation; with ``recon`` the ``recon`` metric, the test
    rows' reconstruction MSE in [0, 1] pixels) and, with ``figure``, its reconstructions of the test rows in [0, 1]."""
    cfg, objective = load_objective(run_dir, images.shape[1])
    z, x = encode(objective, cfg, images)
    order = np.concatenate([fit, test])
    factors = classes[order].astype(np.float64)[:, None]
    data = ScoringData(factors[:len(fit)], z[fit], factors[len(fit):], z[test], images=images[order],
                       classes=classes[order], seed=seed)
    scores = score(RunDir(Path(run_dir)).load(), data, ["probe", "recon"] if recon else ["probe"])
    report: dict[str, Any] = {"run": str(run_dir), "objective": cfg.objective, "views": cfg.views,
                              "n_fit": len(fit), "n_test": len(test), "dim": int(z.shape[1]),
                              "scores": dict(scores["probe"])}
    if recon:
        report["scores"]["recon_mse"] = scores["recon"]["mse"]
        report["recon_method"] = scores["recon"]["method"]
    if not figure:
        return report, None
    _, rec, _ = reconstructions(objective, x, z, fit, seed)  # the same decoder the metric fit (same rows and seed)
    return report, np.clip(unnormalise(rec, cfg.normalize["mean"], cfg.normalize["std"])[test], 0, 1)


def run_labels(run_dirs: list[str]) -> list[str]:
    """Short unique names of run directories: their folder names, or as many trailing path parts as it takes
    (e.g. compare cells, all called seed_0)."""
    for k in range(1, max(len(Path(r).parts) for r in run_dirs) + 1):
        names = ["/".join(Path(r).parts[-k:]) for r in run_dirs]
        if len(set(names)) == len(names):
            return names
    return [f"{r} #{i + 1}" for i, r in enumerate(run_dirs)]  # the same run given twice


def probe_images(run_dirs: str | list[str], images: np.ndarray, classes: np.ndarray, fit_fraction: float = 0.5,
                 seed: int = 0, recon: bool = True, figure: str | Path | None = None,
                 n_figure: int = 10) -> dict[str, Any]:
    """Probe one or more runs on labelled uint8 images (N, H, W, 3), all on the same seeded fit/test split:
    {"runs": [one report each], "markdown": one table row per run}; ``figure`` saves the first test images
    above each run's reconstructions of them (paper 004's Fig. 2)."""
    runs = [run_dirs] if isinstance(run_dirs, str) else list(run_dirs)
    fit, test = split_rows(len(images), fit_fraction, seed)
    if min(len(fit), len(test)) < 20 or len(np.unique(classes[fit])) < 2:
        raise UserError(f"probing needs at least 20 images on each side of the split and 2 classes; "
                        f"got {len(images)} images")
    reports, recs = [], {}
    for run_dir, name in zip(runs, run_labels(runs), strict=True):
        report, rec = probe_run(run_dir, images, classes, fit, test, seed, recon, figure is not None)
        reports.append(report)
        recs[f"{name} ({report['objective']})"] = rec
    out: dict[str, Any] = {"runs": reports, "seed": seed, "fit_fraction": fit_fraction,
                           "markdown": markdown({k: r["scores"] for k, r in zip(recs, reports, strict=True)})}
    if figure is not None:
        from ident3d.evaluation.figures_recon import reconstruction_figure  # matplotlib: only with a figure

        show = slice(0, n_figure)
        reconstruction_figure(images[test][show] / 255.0, {k: v[show] for k, v in recs.items()}, figure)
        out["figure"] = str(figure)
    return out


COLUMNS = (("linear", "linear"), ("mlp", "MLP"), ("knn", "kNN"), ("gmm_accuracy", "GMM acc"), ("gmm_nmi", "GMM NMI"),
           ("gmm_ari", "GMM ARI"), ("recon_mse", "recon MSE"))


def markdown(rows: dict[str, dict[str, float]]) -> str:
    """A markdown table with one row per method (accuracies in %, reconstruction MSE as is)."""
    cols = [(k, t) for k, t in COLUMNS if any(k in r for r in rows.values())]
    lines = ["| method | " + " | ".join(t for _, t in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, r in rows.items():
        cells = [("-" if k not in r else f"{r[k]:.4f}" if k == "recon_mse" else f"{100 * r[k]:.1f}") for k, _ in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
