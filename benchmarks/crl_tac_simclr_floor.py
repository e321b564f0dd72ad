"""Why SimCLR's loss sits at log(B m - 1) on the canvases: the ink statistics of the 289 crops and the lowest
multi-view InfoNCE loss (``weighted_views_nce``, unweighted, as the encoder phase computes it) that ANY encoder
could reach on batches drawn as training draws them (B canvases x m uniform crops).

An encoder is a function of the crop's pixels, so crops with identical pixels (every crop of the blank canvas)
get one embedding. The floor is found by giving every distinct crop of the batch its own free unit vector and
minimising the loss over them (Adam); it bounds every encoder of that output size from below (up to the
optimiser's tolerance, checked by restarts). "all distinct" gives every view its own vector (what the loss
could reach if blank crops could be told apart).

    OMP_NUM_THREADS=1 python benchmarks/crl_tac_simclr_floor.py --batches 3 --betas 0.5 2 5 10 \
        --out results/crl_tac_mnist5k/simclr_floor.json
    python benchmarks/crl_tac_simclr_floor.py --tiny      # one batch of 4 canvases x 2 crops, 5 Adam steps (a test)
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import torch
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script
from torch.nn import functional as F

from ident3d.ingest.datasets import load_dataset
from ident3d.training.channel import crop_grid, cut, nonblank_crops
from ident3d.training.objectives.crl_tac import weighted_views_nce


def floor(groups: torch.Tensor, b: int, m: int, beta: float, dim: int, iters: int, seed: int) -> float:
    """min over free unit vectors, one per group id (B * m,), of the unweighted loss of (B, m) views."""
    g = torch.Generator().manual_seed(seed)
    n = int(groups.max()) + 1
    e = torch.randn(n, dim, generator=g).requires_grad_(True)
    opt = torch.optim.Adam([e], lr=0.05)
    best = math.inf
    for it in range(iters):
        z = F.normalize(e, dim=1)[groups].view(b, m, dim)
        loss = weighted_views_nce(z, None, beta)
        opt.zero_grad()
        loss.backward()
        opt.step()
        best = min(best, loss.item())
        if it == iters // 2:
            for group in opt.param_groups:
                group["lr"] = 0.01
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--m", type=int, default=8)
    ap.add_argument("--betas", type=float, nargs="+", default=[0.5, 2.0, 5.0, 10.0])
    ap.add_argument("--iters", type=int, default=1500)
    ap.add_argument("--out", help="write the numbers here as JSON (else only printed)")
    tiny = add_tiny(ap, "one batch of 4 canvases x 2 crops, beta 0.5, 5 Adam steps")
    args = ap.parse_args()
    tiny.apply(args, sizes={"batches": 1, "batch": 4, "m": 2, "betas": [0.5], "iters": 5},
               paths={"out": "simclr_floor.json"})
    torch.set_num_threads(1)
    ds = load_dataset("mnist5k_canvas", train=True)
    grid = crop_grid(ds.images.shape[1])
    ink = nonblank_crops(torch.from_numpy(ds.images), grid).numpy()  # (N, 289)
    q = ink.mean(axis=1)
    out: dict = {"canvases": len(q), "crops": grid.n, "ink_fraction_mean": float(q.mean()),
                 "ink_fraction_min_max": [float(q.min()), float(q.max())],
                 "ink_crops_per_canvas_mean": float(ink.sum(axis=1).mean()),
                 "p_both_views_ink": float((q ** 2).mean()),
                 "p_neither_view_ink": float(((1 - q) ** 2).mean())}
    b, m = args.batch, args.m
    out["log(Bm-1)"] = math.log(b * m - 1)
    rng = np.random.default_rng(0)
    rows_per_batch, stats = [], []
    for _ in range(args.batches):
        rows = rng.choice(len(q), b, replace=False)
        idx = torch.from_numpy(rng.integers(0, grid.n, (b, m)))
        x = torch.from_numpy(ds.images[rows]).permute(0, 3, 1, 2).contiguous()
        crops = cut(x, idx, grid).reshape(b * m, -1).numpy()
        _, groups = np.unique(crops, axis=0, return_inverse=True)
        groups = torch.from_numpy(groups.reshape(-1))
        blank = ~ink[rows[:, None], idx.numpy()]  # (b, m)
        pairs_ink = float((~blank[:, 0] & ~blank[:, 1]).mean())
        rows_per_batch.append((groups, blank))
        stats.append({"blank_views": int(blank.sum()), "distinct_crops": int(groups.max()) + 1,
                      "images_with_no_ink_view": int(blank.all(axis=1).sum()),
                      "first_pair_both_ink": pairs_ink})
    out["batches"] = stats
    out["floor"] = {}
    for beta in args.betas:
        tied, free = [], []
        for groups, _ in rows_per_batch:
            tied.append(min(floor(groups, b, m, beta, 50, args.iters, s) for s in (0, 1)))
            free.append(floor(torch.arange(b * m), b, m, beta, 50, args.iters, 0))
        out["floor"][str(beta)] = {"identical_crops_tied": tied, "all_distinct": free,
                                   "all_collapsed": math.log(b * m - 1)}
        print(beta, out["floor"][str(beta)], flush=True)
    print(json.dumps(out, indent=1))
    if args.out:
        from pathlib import Path

        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
