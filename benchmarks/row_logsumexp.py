"""Paper 001's rolled Lp-InfoNCE trained with torch.logsumexp and with ``row_logsumexp``, side by side in one run:
seconds per step of each on the same cells (one thread) and whether the final weights are bit-identical.

    python benchmarks/row_logsumexp.py [--steps 1000] [--out results/row_logsumexp.json]
    python benchmarks/row_logsumexp.py --tiny      # 2 steps per cell (a test)

The cells are rows of configs/synthetic/paper001.yaml (box, normal -> p = 2 and box, laplace -> p = 1, seed 0) at
the table's batch size; their logits spread over hundreds of nats, where torch's CPU exp takes a slow path for
the subnormal terms. Writes the JSON and a bar figure next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

from ident3d.training import trainer
from ident3d.training.config import TrainConfig
from ident3d.training.objectives import lp_infonce

CELLS = {"p=2, normal": ("normal", 2), "p=1, laplace": ("laplace", 1)}
IMPLEMENTATIONS = {"torch.logsumexp": lambda x: torch.logsumexp(x, dim=1), "row_logsumexp": lp_infonce.row_logsumexp}


def cell(conditional: str, p: int, steps: int) -> TrainConfig:
    """The paper-001 table's settings for one box row (its encoder, batch, lr and schedule), ``steps`` long."""
    return TrainConfig(data="synthetic", source={"kind": "latent_pairs", "space": "box", "conditional": conditional,
                                                 "scale": 0.05},
                       objective="lp_infonce", objective_args={"p": p, "negatives": "rolled"}, encoder="mlp",
                       encoder_args={"hidden": [100, 200, 200, 100]}, out_dim=10, steps=steps, batch_size=512,
                       lr=2e-3, schedule="cosine", warmup_steps=200, seed=0, log_every=steps, checkpoint_every=steps,
                       device="cpu", amp=False)


def timed(cfg: TrainConfig, impl: str) -> tuple[float, dict[str, torch.Tensor]]:
    """(seconds per step, final weights) of ``cfg`` trained with the loss's log-sum-exp set to ``impl``."""
    lp_infonce.row_logsumexp = IMPLEMENTATIONS[impl]
    work = Path(tempfile.mkdtemp(prefix="row_lse_"))
    try:
        trainer.train(cfg, work / "run", progress=False)
        seconds = trainer.read_metrics(work / "run")[-1]["seconds"]
        weights = torch.load(work / "run" / trainer.CHECKPOINT, weights_only=False)["model"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
        lp_infonce.row_logsumexp = IMPLEMENTATIONS["row_logsumexp"]
    return seconds / cfg.steps, weights


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--out", type=Path, default=Path("results/row_logsumexp.json"))
    tiny = add_tiny(p, "2 steps per cell")
    args = p.parse_args()
    tiny.apply(args, sizes={"steps": 2})
    torch.set_num_threads(1)
    rows = []
    for name, (conditional, pnorm) in CELLS.items():
        cfg = cell(conditional, pnorm, args.steps)
        per_step, weights = {}, {}
        for impl in IMPLEMENTATIONS:
            per_step[impl], weights[impl] = timed(cfg, impl)
        same = all(torch.equal(weights["torch.logsumexp"][k], weights["row_logsumexp"][k])
                   for k in weights["torch.logsumexp"])
        rows.append({"cell": name, **{f"{k} ms/step": round(1e3 * v, 2) for k, v in per_step.items()},
                     "speedup": round(per_step["torch.logsumexp"] / per_step["row_logsumexp"], 2),
                     "weights_bit_identical": same})
        print(rows[-1], flush=True)
    result = {"command": "python benchmarks/row_logsumexp.py " + " ".join(sys.argv[1:]), "steps": args.steps,
              "threads": 1, "rows": rows, "cpus": os.cpu_count(), "python": platform.python_version(),
              "torch": torch.__version__}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out.with_suffix(".png"))


def plot(result: dict, png: Path) -> None:
    """Bars of ms/step per cell, torch.logsumexp beside row_logsumexp."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    width = 0.38
    for j, impl in enumerate(IMPLEMENTATIONS):
        xs = [i + (j - 0.5) * width for i in range(len(result["rows"]))]
        ax.bar(xs, [r[f"{impl} ms/step"] for r in result["rows"]], width, label=impl)
    ax.set_xticks(range(len(result["rows"])), [r["cell"] for r in result["rows"]])
    ax.set_ylabel("ms per training step (1 thread)")
    ax.set_title(f"paper-001 rolled Lp-InfoNCE, batch 512, {result['steps']} steps")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main()
