"""Where a synthetic training step's time goes, and what would remove it (issue 36 §3): per row of a synthetic config,
the step of the engine's own run (``training.synthetic.run.build_synthetic_run``: source, views, objective, Adam) at
one torch thread, side by side in one process with the variants that keep the schedule: both views through the
encoder in one call, foreach Adam, bf16 autocast and ``torch.compile``. Also the share of the matrix products
(torch.profiler) and the arithmetic rate (FLOPs counted by torch / time), and the table's wall time each variant
implies on the config's workers (steps x ms x seeds / workers, training only).

    python benchmarks/synthetic_step.py --out results/synthetic/paper001/step_profile.json   # + .png
    python benchmarks/synthetic_step.py --rows 0 --steps 5 --variants fp32 --out /tmp/step.json  # a quick look
    python benchmarks/synthetic_step.py --tiny      # rows 0 and 4, fp32 and one_call, 2 steps (a test)

Only the ``fp32`` variant is what the engine runs; the others are measured, not used (their weights differ from
fp32's in the last bits or more, so adopting one would re-key every cell).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this script

from _tiny import add_tiny  # noqa: E402  (benchmarks/_tiny.py)

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("fp32", "one_call", "one_call+foreach", "bf16", "bf16+one_call+foreach", "compile")


def build(cfg: dict[str, Any], row: dict[str, Any], variant: str) -> tuple[Callable[[int], None], int, int]:
    """A row's step function under ``variant`` (a fresh run, the engine's components), its steps and batch."""
    from ident3d.training.synthetic.run import build_synthetic_run, train_config

    tc = train_config({**(cfg.get("train") or {}), **(row.get("train") or {})}, row["source"], row.get("hp") or {},
                      seed=0, steps=None, device="cpu")
    run = build_synthetic_run(tc, device="cpu")
    obj = run.objective
    forward: Callable[..., dict[str, torch.Tensor]] = obj
    if "one_call" in variant:
        def forward(views: list[torch.Tensor], step: int, total: int) -> dict[str, torch.Tensor]:
            return obj.loss(list(obj.encoder(torch.cat(views)).split(views[0].shape[0])))
    if variant == "compile":
        forward = torch.compile(obj)
    opt = torch.optim.Adam(obj.param_groups(), lr=tc.lr, foreach=True if "foreach" in variant else None)
    batches = iter(run.loader)
    bf16 = variant.startswith("bf16")

    def step(s: int) -> None:
        views = run.views(next(batches))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            res = forward(views, s, tc.steps)
        opt.zero_grad(set_to_none=True)
        res["loss"].backward()
        opt.step()

    return step, tc.steps, tc.batch_size


def ms_per_step(step: Callable[[int], None], steps: int, warmup: int) -> float:
    """Mean ms of ``steps`` steps after ``warmup`` untimed ones."""
    for s in range(warmup):
        step(s)
    t = time.perf_counter()
    for s in range(warmup, warmup + steps):
        step(s)
    return 1000 * (time.perf_counter() - t) / steps


def profile_fp32(cfg: dict[str, Any], row: dict[str, Any], steps: int) -> dict[str, float]:
    """The fp32 step's GFLOP (counted by torch) and the share of its CPU time in matrix products (mm, addmm)."""
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    step, _, _ = build(cfg, row, "fp32")
    for s in range(5):
        step(s)
    with FlopCounterMode(display=False) as counter:
        step(5)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for s in range(6, 6 + steps):
            step(s)
    by = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    total = sum(by.values())
    matmul = sum(v for k, v in by.items() if k in ("aten::mm", "aten::addmm", "aten::bmm"))
    return {"gflop_per_step": counter.get_total_flops() / 1e9, "matmul_share": matmul / total if total else 0.0}


def row_wall(steps: dict[str, int], ms: dict[str, dict[str, float]], seeds: int, workers: int) -> dict[str, float]:
    """Per variant, the table's training minutes: sum over rows of steps x ms/step, x seeds, / workers."""
    variants = {v for by in ms.values() for v in by}
    return {v: sum(steps[r] * ms[r][v] for r in ms if v in ms[r]) / 1000 * seeds / workers / 60 for v in variants
            if all(v in ms[r] for r in ms)}


def figure(results: dict[str, Any], out: Path) -> None:
    """ms per step per row, one bar per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = list(results["rows"])
    variants = list(results["variants"])
    fig, ax = plt.subplots(figsize=(11, 4.2))
    width = 0.8 / len(variants)
    for i, v in enumerate(variants):
        ax.bar(np.arange(len(rows)) + i * width, [results["rows"][r]["ms_per_step"].get(v, np.nan) for r in rows],
               width, label=v)
    ax.set_xticks(np.arange(len(rows)) + 0.4 - width / 2, [r.replace(" (", "\n(") for r in rows], fontsize=7)
    ax.set_ylabel("ms per step (1 torch thread)")
    ax.set_title("paper 001 synthetic: one training step by variant (fp32 is what the engine runs)")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure every row x variant at one thread, write the JSON and the figure."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "synthetic" / "paper001.yaml")
    ap.add_argument("--rows", type=int, nargs="+", help="row indices (default: every row)")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--steps", type=int, default=200, help="timed steps per row and variant")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2, help="the table's workers (one thread each)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "synthetic" / "paper001" / "step_profile.json")
    tiny = add_tiny(ap, "rows 0 and 4 (p = 2 and p = 3), the fp32 and one_call variants, 2 steps after 1")
    args = ap.parse_args(argv)
    tiny.apply(args, sizes={"rows": [0, 4], "variants": ["fp32", "one_call"], "steps": 2, "warmup": 1})
    torch.set_num_threads(1)
    cfg = yaml.safe_load(args.config.read_text())
    picked = [cfg["rows"][i] for i in (args.rows if args.rows is not None else range(len(cfg["rows"])))]
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    results: dict[str, Any] = {
        "command": "python benchmarks/synthetic_step.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "revision": rev, "config": str(args.config.relative_to(ROOT)) if args.config.is_relative_to(ROOT)
        else str(args.config), "torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "python": platform.python_version(), "threads": 1, "steps_timed": args.steps, "variants": args.variants,
        "rows": {}}
    steps, ms = {}, {}
    for row in picked:
        name = row["name"]
        ms[name] = {}
        for variant in args.variants:
            step, steps[name], batch = build(cfg, row, variant)
            ms[name][variant] = ms_per_step(step, args.steps, args.warmup)
            print(f"{name:45s} {variant:24s} {ms[name][variant]:7.2f} ms/step", flush=True)
        prof = profile_fp32(cfg, row, min(args.steps, 50))
        results["rows"][name] = {"steps": steps[name], "batch_size": batch, "ms_per_step": ms[name], **prof,
                                 "fp32_gflop_per_s": prof["gflop_per_step"] / ms[name].get("fp32", float("nan"))
                                 * 1000 if "fp32" in ms[name] else None}
    seeds = len(cfg.get("seeds", [0]))
    results["table_training_min"] = {"seeds": seeds, "workers": args.workers,
                                     "by_variant": row_wall(steps, ms, seeds, args.workers)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    figure(results, args.out.with_suffix(".png"))
    for v, minutes in sorted(results["table_training_min"]["by_variant"].items(), key=lambda kv: kv[1]):
        print(f"table training, {v}: {minutes:.1f} min on {args.workers} workers")
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return results


if __name__ == "__main__":
    main()
