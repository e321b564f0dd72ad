"""Probe a trained run on labelled images as paper 004 does: classification probes on its representation
and reconstructions (the run's own decoder, or a decoder fit on frozen features for discriminative runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from ident3d.causal.errors import UserError


def load_objective(run_dir: str, image_size: int) -> tuple[Any, torch.nn.Module]:
    """(TrainConfig, objective with trained weights, in eval mode) of a run, built for ``image_size`` px."""
    from ident3d.store.info import store_info
    from ident3d.store.zarr_io import store_reachable
    from ident3d.training.run_dir import RunDir, StoreData

    run = RunDir(Path(run_dir)).load()
    if isinstance(run.data, StoreData) and store_reachable(run.data.path):
        trained = store_info(run.data.path, allow_partial=True).image_size
        if trained != image_size:
            raise UserError(f"the run was trained on {trained} px images but the probe data has {image_size} px; "
                            f"probe on data of the same size (ident3d dataset ... --size {trained})")
    return run.cfg, run.objective("cpu", image_size=image_size)


@torch.no_grad()
def encode(objective: torch.nn.Module, cfg: Any, images: np.ndarray,
           batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(representations (N, Z), normalised images (N, 3, H, W)) of uint8 images (N, H, W, 3)."""
    from ident3d.training.run_dir import normalizer
    from ident3d.training.views import to_float

    norm = normalizer(cfg)
    x = torch.cat([norm(to_float(torch.from_numpy(images[i:i + batch_size])))
                   for i in range(0, len(images), batch_size)])
    z = torch.cat([objective.representation(x[i:i + batch_size]) for i in range(0, len(x), batch_size)])
    return z.float().numpy(), x.numpy()


def unnormalise(x: np.ndarray, mean: list[float], std: list[float]) -> np.ndarray:
    """Normalised images (N, C, H, W) back to [0, 1] pixels; one channel (a grey target) uses the channel averages."""
    m, s = np.asarray(mean, float), np.asarray(std, float)
    if x.shape[1] == 1:
        m, s = m.mean(keepdims=True), s.mean(keepdims=True)
    return x * s.reshape(1, -1, 1, 1) + m.reshape(1, -1, 1, 1)


@torch.no_grad()
def reconstructions(objective: torch.nn.Module, x: np.ndarray, z: np.ndarray, fit: np.ndarray, seed: int = 0,
                    epochs: int = 30) -> tuple[np.ndarray, np.ndarray, str]:
    """(targets, reconstructions, how) for all rows, normalised: the run's own decoder if it has one
    (generative objectives), else a decoder fit on the ``fit`` rows' frozen features
    (``ident3d.evaluation.recon_probe``)."""
    xt = torch.from_numpy(x)
    if hasattr(objective, "reconstruct"):
        target = objective.target(xt).numpy()
        rec = torch.cat([objective.reconstruct(xt[i:i + 256]) for i in range(0, len(xt), 256)]).numpy()
        return target, rec, "own decoder"
    from ident3d.evaluation.recon_probe import decode, fit_decoder

    with torch.enable_grad():
        decoder = fit_decoder(z[fit], x[fit], epochs=epochs, seed=seed)
    return x, decode(decoder, z), f"decoder fit on frozen features ({epochs} epochs)"


def split_rows(n: int, fit_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of ``n`` rows into sorted (fit, test) row ids."""
    if not 0 < fit_fraction < 1:
        raise UserError(f"--fit-fraction must be between 0 and 1, got {fit_fraction}")
    order = np.random.default_rng(seed).permutation(n)
    cut = int(round(n * fit_fraction))
    return np.sort(order[:cut]), np.sort(order[cut:])


def probe_run(run_dir: str, images: np.ndarray, classes: np.ndarray, fit: np.ndarray, test: np.ndarray,
              seed: int = 0, recon: bool = True) -> tuple[dict[str, Any], np.ndarray | None]:
    """One run's report (classification probes on its representation; with ``recon`` the test rows'
    reconstruction MSE in [0, 1] pixels) and its reconstructions of the test rows in [0, 1] (None without recon)."""
    from ident3d.evaluation.probe_suite import classification_probes
    from ident3d.evaluation.uniformity import reconstruction_mse

    cfg, objective = load_objective(run_dir, images.shape[1])
    z, x = encode(objective, cfg, images)
    report: dict[str, Any] = {"run": str(run_dir), "objective": cfg.objective, "views": cfg.views,
                              "n_fit": len(fit), "n_test": len(test), "dim": int(z.shape[1]),
                              "scores": classification_probes(z[fit], classes[fit], z[test], classes[test], seed)}
    if not recon:
        return report, None
    target, rec, how = reconstructions(objective, x, z, fit, seed)
    target = unnormalise(target, cfg.normalize["mean"], cfg.normalize["std"])[test]
    rec = np.clip(unnormalise(rec, cfg.normalize["mean"], cfg.normalize["std"])[test], 0, 1)
    report["scores"]["recon_mse"] = reconstruction_mse(target, rec)
    report["recon_method"] = how
    return report, rec


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
        report, rec = probe_run(run_dir, images, classes, fit, test, seed, recon or figure is not None)
        reports.append(report)
        recs[f"{name} ({report['objective']})"] = rec
    out: dict[str, Any] = {"runs": reports, "seed": seed, "fit_fraction": fit_fraction,
                           "markdown": markdown({k: r["scores"] for k, r in zip(recs, reports, strict=True)})}
    if figure is not None:
        from ident3d.evaluation.figures_recon import reconstruction_figure

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
