"""One controlled CRL-TAC run on 5k real MNIST digits on the 84 px canvas at a small CPU budget, scored on subsets.

Run from the repository root. The ablations are crl_tac hyperparameters given with --args (channel_anchor false
leaves the anchor out of the channel phase's denominator, as before the fix; channel_warmup N holds the channel for
the first N steps; channel_draws N draws N uniform crops per image in the channel phase). The store, the runs and
results.jsonl (one JSON row appended per run) go under --work; results/crl_tac_mnist5k/README.md lists the runs.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, ".")
sys.path.insert(0, "benchmarks")
import crl_tac_canvas as bench  # noqa: E402

from ident3d.evaluation.channel import channel_summary  # noqa: E402
from ident3d.evaluation.probe_run import load_objective  # noqa: E402
from ident3d.evaluation.probes import linear_probe_accuracy  # noqa: E402
from ident3d.ingest.datasets import load_dataset, write_dataset_store  # noqa: E402
from ident3d.training.trainer import TrainConfig, train  # noqa: E402


def main() -> None:
    """Train (or resume) one run, then probe its layers and summarise its channel."""
    torch.set_num_threads(1)
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--args", default="{}", help="crl_tac objective arguments, JSON")
    ap.add_argument("--nfit", type=int, default=1000)
    ap.add_argument("--ntest", type=int, default=500)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--work", default="runs/crl_tac_controlled", help="folder of the store, runs and results.jsonl")
    a = ap.parse_args()
    root = Path(a.work) / "data"
    root.mkdir(parents=True, exist_ok=True)
    tr, te = load_dataset("mnist5k_canvas", train=True), load_dataset("mnist5k_canvas", train=False)
    store = root / "train.zarr"
    if not store.exists():
        write_dataset_store(tr, store, chunk_size=256)
    run = Path(a.work) / "runs" / f"{a.name}_s{a.seed}"
    oa = json.loads(a.args)
    cfg = TrainConfig(data=str(store), objective="crl_tac", views="learned_crop", encoder="tac_cnn", out_dim=50,
                      steps=a.steps, batch_size=a.batch, lr=a.lr, seed=a.seed, log_every=50,
                      checkpoint_every=10**6, objective_args=oa)
    t0 = time.perf_counter()
    train(cfg, run, resume=True, progress=False)
    ttrain = time.perf_counter() - t0
    cfg, obj = load_objective(str(run), 84)
    fi, ti = tr.images[:a.nfit], te.images[:a.ntest]
    t0 = time.perf_counter()
    fit, test = bench.represent(obj, cfg, fi)[0], bench.represent(obj, cfg, ti)[0]
    out = {k: linear_probe_accuracy(fit[v], tr.classes[:a.nfit], test[v], te.classes[:a.ntest])
           for k, v in bench.LAYERS.items() if v in fit}
    s = channel_summary(test["probs"], ti, obj.grid)
    out.update(mass=s["mass_on_nonblank"], entropy=s["entropy"], maxp=s["max_probability"], train_s=ttrain,
               eval_s=time.perf_counter() - t0)
    row = {"name": a.name, "seed": a.seed, "steps": a.steps, "args": oa, **out}
    print(json.dumps(row), flush=True)
    with open(Path(a.work) / "results.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
