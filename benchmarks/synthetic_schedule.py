"""Metric vs wall time of paper 001's synthetic setting under a training schedule (the paper's, or a fast one).

One run of the project's trainer (``ident3d.training.train`` on a synthetic source); at every checkpoint the run is
scored on held-out draws (linear R^2 and MCC; scoring time is not counted as training time). Writes JSON with
the curve and prints it. Example (the two settings the README reports, on 2 threads):

    python benchmarks/synthetic_schedule.py --setting box_normal_p2 --schedule fast --threads 2 \
        --out results/synthetic/schedule_box_normal_p2_fast.json
    python benchmarks/synthetic_schedule.py --tiny      # 4 steps of batch 32, scored twice, + its figure (a test)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

from ident3d.evaluation.synthetic import evaluate_synthetic
from ident3d.training.trainer import TrainConfig, train

SETTINGS = {  # paper 001's box experiments: p = 2 is scored by linear R^2, p = 1 by MCC
    "box_normal_p2": {"source": {"kind": "latent_pairs", "space": "box", "conditional": "normal", "scale": 0.05},
                      "p": 2},
    "box_laplace_p1": {"source": {"kind": "latent_pairs", "space": "box", "conditional": "laplace", "scale": 0.05},
                       "p": 1},
}
PAPER_HIDDEN = [100, 500, 500, 500, 500, 100]
FAST = {"lr": 2e-3, "batch_size": 512, "warmup_steps": 200, "schedule": "cosine", "hidden": [100, 200, 200, 100]}
SCHEDULES = {  # the fast ones are configs/synthetic/paper001.yaml's rows
    "paper": {"lr": 1e-4, "batch_size": 6144, "steps": 300_000, "warmup_steps": 0, "schedule": "constant",
              "hidden": PAPER_HIDDEN},
    "fast_p2": {**FAST, "steps": 20000},
    "fast_p1": {**FAST, "steps": 16000},
}


def config(setting: str, sched: dict, steps: int, eval_every: int, seed: int) -> TrainConfig:
    """The trainer config of ``setting`` under schedule ``sched`` (paper 001's loss with rolled negatives)."""
    s = SETTINGS[setting]
    return TrainConfig(data="synthetic", source=dict(s["source"]), objective="lp_infonce",
                       objective_args={"p": s["p"], "negatives": "rolled"}, encoder="mlp",
                       encoder_args={"hidden": sched["hidden"]}, out_dim=10, steps=steps,
                       batch_size=sched["batch_size"], lr=sched["lr"], schedule=sched["schedule"],
                       warmup_steps=sched["warmup_steps"], seed=seed, log_every=eval_every,
                       checkpoint_every=eval_every, device="cpu", amp=False)


def fit_steps(setting: str, sched: dict, seconds: float, seed: int, probe: int = 30) -> tuple[int, float]:
    """(steps that fit in ``seconds`` of training, seconds per step), from ``probe`` timed steps of the same run."""
    tmp = Path(tempfile.mkdtemp(prefix="synthetic_probe_"))
    try:
        last = train(config(setting, sched, probe + 5, probe + 5, seed), tmp / "run", progress=False)
        rows = [json.loads(line) for line in (tmp / "run" / "metrics.jsonl").read_text().splitlines()]
        per_step = rows[-1]["seconds"] / last["step"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return int(0.97 * seconds / per_step), per_step


def run(setting: str, sched: dict, seconds: float, eval_every: int, threads: int, seed: int,
        n_eval: int) -> dict:
    """Train until ``sched['steps']`` (``"fit"``: as many as fit in ``seconds``) or ``seconds`` of training,
    scoring every ``eval_every`` steps."""
    torch.set_num_threads(threads)
    steps, per_step = sched["steps"], None
    if steps == "fit":
        steps, per_step = fit_steps(setting, sched, seconds, seed)
        print(f"{per_step:.4f} s/step: {steps} steps fit in {seconds:.0f} s", flush=True)
    cfg = config(setting, sched, steps, eval_every, seed)
    curve: list[dict] = []
    run_dir = Path(tempfile.mkdtemp(prefix="synthetic_schedule_")) / "run"

    class Budget(Exception):
        pass

    def on_checkpoint(step: int, elapsed: float) -> None:
        scores = evaluate_synthetic(run_dir, n_eval, n_eval)
        curve.append({"step": step, "seconds": round(elapsed, 1), "linear_r2": round(scores["linear_r2"], 4),
                      "mcc": round(scores["mcc"], 4)})
        print(json.dumps(curve[-1]), flush=True)
        if elapsed > seconds:
            raise Budget

    t = time.perf_counter()
    try:
        train(cfg, run_dir, progress=False, on_checkpoint=on_checkpoint)
    except Budget:
        pass
    finally:
        shutil.rmtree(run_dir.parent, ignore_errors=True)
    return {"setting": setting, "schedule": {**sched, "steps": steps}, "probe_s_per_step": per_step,
            "threads": threads, "seed": seed, "budget_s": seconds,
            "wall_s": round(time.perf_counter() - t, 1), "curve": curve}


def plot(curves: Path, png: Path) -> None:
    """Metric vs training time of every run in a curves file ({"runs": [{setting, schedule, curve}, ...]}): linear
    R^2 for the p = 2 setting, MCC for p = 1 (the metric each one's identifiability class predicts)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = json.loads(curves.read_text())["runs"]
    fig, axes = plt.subplots(1, len(SETTINGS), figsize=(11, 3.8))
    for ax, (setting, metric) in zip(axes, (("box_normal_p2", "linear_r2"), ("box_laplace_p1", "mcc")), strict=True):
        for r in (r for r in runs if r["setting"] == setting and r["curve"]):
            sched = r["schedule"]
            label = (f"lr {sched['lr']:g}, batch {sched['batch_size']}, hidden {sched.get('hidden', 'paper')}"
                     if isinstance(sched, dict) else str(sched).split(" (")[0] + "'s schedule")
            ax.plot([p["seconds"] / 60 for p in r["curve"]], [p[metric] for p in r["curve"]], marker=".", label=label)
        ax.axhline(0.95, color="grey", lw=0.8, ls="--")
        ax.set(title=f"{setting}: {metric}", xlabel="training minutes (2 cores)", ylabel=metric, ylim=(0, 1.02))
        if ax.get_legend_handles_labels()[0]:  # a setting without runs has an empty panel
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plot", type=Path, help="only plot a curves file (JSON with 'runs') to --png, no training")
    ap.add_argument("--png", type=Path)
    ap.add_argument("--setting", choices=sorted(SETTINGS))
    ap.add_argument("--schedule", default="paper", help=f"a named schedule ({', '.join(SCHEDULES)}) or a JSON dict")
    ap.add_argument("--seconds", type=float, default=900.0, help="stop after this much training time")
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-eval", type=int, default=5000)
    ap.add_argument("--out", type=Path)
    tiny = add_tiny(ap, "box_normal_p2, 4 steps of batch 32, scored at steps 2 and 4 on 200 draws, and its figure")
    a = ap.parse_args()
    tiny.apply(a, sizes={"setting": "box_normal_p2", "eval_every": 2, "threads": 1, "n_eval": 200,
                         "schedule": json.dumps({"steps": 4, "batch_size": 32, "hidden": [16]})},
               paths={"out": "schedule.json"})
    if a.plot:
        plot(a.plot, a.png or a.plot.with_suffix(".png"))
        return
    if not a.setting:
        ap.error("--setting is required unless --plot is given")
    sched = SCHEDULES[a.schedule] if a.schedule in SCHEDULES else {**SCHEDULES["paper"], **json.loads(a.schedule)}
    result = run(a.setting, sched, a.seconds, a.eval_every, a.threads, a.seed, a.n_eval)
    result["schedule_name"] = a.schedule
    result["command"] = "python " + " ".join(sys.argv)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    if a.tiny:  # the figure of --plot, from this run
        curves = a.out.with_name(a.out.stem + "_curves.json")
        curves.write_text(json.dumps({"runs": [result]}) + "\n")
        plot(curves, curves.with_suffix(".png"))


if __name__ == "__main__":
    main()
