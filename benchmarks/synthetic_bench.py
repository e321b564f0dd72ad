"""Training steps per second of paper 001's synthetic setting at the paper's scale: batch 6144, n = 10, the paper's
MLP encoder (n-10n-50n-50n-50n-50n-10n-n), Lp-InfoNCE p = 2 with rolled negatives, data generated on the device.

Runs the project's trainer (``ident3d.training.train`` on a ``latent_pairs`` source) on the CPU (``--threads``) and,
when present, on CUDA (fp32 and bf16 autocast), and writes the figures as JSON:

    python benchmarks/synthetic_bench.py --out results/synthetic_bench.json
    python benchmarks/synthetic_bench.py --tiny      # batch 64, 2 steps, 1 thread (a test)
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

from ident3d.training.trainer import TrainConfig, train


def steps_per_second(device: str, amp: bool, steps: int, batch_size: int, warmup: int = 3) -> float:
    """Steps/s of the trainer, from the metrics log's training clock between step ``warmup`` and the last."""
    tmp = Path(tempfile.mkdtemp(prefix="synthetic_bench_"))
    try:
        cfg = TrainConfig(data="synthetic", views="synthetic",
                          source={"kind": "latent_pairs", "space": "box", "conditional": "normal", "scale": 0.05},
                          objective="lp_infonce", objective_args={"p": 2, "negatives": "rolled"}, encoder="mlp",
                          out_dim=10, steps=steps + warmup, batch_size=batch_size, lr=1e-4, device=device, amp=amp,
                          log_every=1, checkpoint_every=10**9)
        train(cfg, tmp / "run", progress=False)
        rows = [json.loads(line) for line in (tmp / "run" / "metrics.jsonl").read_text().splitlines()]
        t = {r["step"]: r["seconds"] for r in rows}
        return steps / (t[steps + warmup] - t[warmup])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=6144)
    ap.add_argument("--cpu-steps", type=int, default=10)
    ap.add_argument("--cuda-steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")
    ap.add_argument("--out", type=Path, default=Path("results/synthetic_bench.json"))
    tiny = add_tiny(ap, "batch 64, 2 steps per device, 1 thread")
    a = ap.parse_args()
    tiny.apply(a, sizes={"batch_size": 64, "cpu_steps": 2, "cuda_steps": 2, "threads": 1})
    torch.set_num_threads(a.threads)
    result = {"command": "python " + " ".join(sys.argv), "batch_size": a.batch_size, "n": 10,
              "encoder": "mlp 10-100-500-500-500-500-100-10", "threads": a.threads,
              "cpu": platform.processor() or platform.machine(), "torch": torch.__version__, "steps_per_s": {}}
    result["steps_per_s"]["cpu"] = round(steps_per_second("cpu", False, a.cpu_steps, a.batch_size), 3)
    print(f"cpu ({a.threads} threads): {result['steps_per_s']['cpu']} steps/s", flush=True)
    if torch.cuda.is_available():
        result["gpu"] = torch.cuda.get_device_name()
        for amp in (False, True):
            key = "cuda_bf16" if amp else "cuda_fp32"
            result["steps_per_s"][key] = round(steps_per_second("cuda", amp, a.cuda_steps, a.batch_size), 2)
            print(f"{key}: {result['steps_per_s'][key]} steps/s", flush=True)
    sps = result["steps_per_s"]
    result["paper_schedule_hours"] = {k: round(300_000 / v / 3600, 2) for k, v in sps.items()}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
