"""Training throughput on CPU: optimiser steps/s for ResNet-18 at 64 px, batch 256 (InfoNCE, two
views), with the small CNN alongside for scale. Views are pre-made, so this times the model alone.

    python benchmarks/train_bench.py --out results/train_bench.json
    python benchmarks/train_bench.py --tiny      # 16 px, batch 4, 1 step (a test)
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

from ident3d.training.encoders import build_encoder
from ident3d.training.objectives import OBJECTIVES


def steps_per_s(encoder: str, size: int, batch: int, steps: int) -> float:
    torch.manual_seed(0)
    objective = OBJECTIVES.get("infonce")(build_encoder(encoder, 10, size))
    opt = torch.optim.Adam(objective.parameters(), lr=1e-4)
    views = [torch.randn(batch, 3, size, size), torch.randn(batch, 3, size, size)]

    def step() -> None:
        loss = objective(views)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--size", type=int, default=64, help="image size in px")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--out", default="results/train_bench.json")
    tiny = add_tiny(ap, "16 px, batch 4, 1 step")
    args = ap.parse_args()
    tiny.apply(args, sizes={"size": 16, "batch_size": 4, "steps": 1})
    res = {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "runs": {}}
    for encoder, size, batch in (("resnet18", args.size, args.batch_size), ("cnn", args.size, args.batch_size)):
        r = steps_per_s(encoder, size, batch, args.steps)
        res["runs"][f"{encoder}_{size}px_batch{batch}"] = {"steps_per_s": r, "images_per_s": r * batch}
        print(f"{encoder:9s} {size} px, batch {batch}: {r:.3f} steps/s ({r * batch:.0f} anchors/s, 2 views each)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
