"""The temporal learners on synthetic interventional sequences: Temporal Causal3DIdent rollout latents (10 factors,
7 causal variables, hard interventions with p = 1/7) mixed by a fixed random invertible MLP into 20 dimensions,
not rendered images.

    OMP_NUM_THREADS=1 python benchmarks/temporal_synthetic.py [--seeds 0 1] [--steps 4000] [--regressor mlp]
        [--out results/temporal_synthetic]

Per seed (the rollout, the weights and the batches; the mix is fixed): 200 training sequences of 20 steps (3,800
transitions) and 50 held-out sequences; each learner gets 16 latent dimensions, an MLP encoder 20-128-128-16,
Adam at lr 3e-3, batches of 256, ``--steps`` steps. Rows: the untrained encoder, time-contrastive InfoNCE on
(x^t, x^{t+1}), the CITRIS-style VAE, the iVAE-style baseline and the CITRIS-style VAE trained on shuffled targets.
Scores on held-out frames (regressors fit on the training frames): variable-level R^2 diag / sep (CITRIS's learned
assignment where the model has one, else post hoc), factor-level CITRIS diag / sep (Hungarian), DCI D (Lasso), MIG.
Writes OUT/results.json and OUT/table.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ident3d.causal import load_dynamic_scm  # noqa: E402
from ident3d.evaluation.temporal_scores import temporal_scores  # noqa: E402
from ident3d.training.temporal.fit import build_learner, encode, fit  # noqa: E402
from ident3d.training.temporal.synthetic import SyntheticSequences, synthetic_sequences  # noqa: E402

LATENT_DIM, OBS_DIM, LR, BATCH = 16, 20, 3e-3, 256
N_TRAIN, N_TEST, LENGTH = 200, 50, 20
# row -> (learner, its hyperparameters, train on shuffled targets, train at all)
ROWS = {"untrained": ("citris_vae", {"lambda_reg": 0.0}, False, False),
        "time_contrastive": ("time_contrastive", {"tau": 0.1}, False, True),
        "citris_vae": ("citris_vae", {"lambda_reg": 0.0}, False, True),
        "citris_vae_classifier": ("citris_vae", {"lambda_reg": 0.0, "beta_classifier": 2.0}, False, True),
        "ivae": ("ivae", {}, False, True),
        "citris_vae_shuffled_targets": ("citris_vae", {"lambda_reg": 0.0}, True, True),
        "citris_vae_classifier_shuffled_targets": ("citris_vae", {"lambda_reg": 0.0, "beta_classifier": 2.0}, True,
                                                   True)}
METRICS = ("diag", "sep", "diag_factors", "sep_factors", "dci_d", "mig")


def synthetic(seed: int) -> SyntheticSequences:
    """The synthetic setting of one seed."""
    return synthetic_sequences(load_dynamic_scm("temporal_causal3dident"), N_TRAIN, N_TEST, LENGTH, obs_dim=OBS_DIM,
                               seed=seed)


def run_row(row: str, data: SyntheticSequences, seed: int, steps: int, regressor: str) -> dict:
    """Train one row's learner on one seed's data and score it on the held-out frames."""
    name, hp, shuffled, trains = ROWS[row]
    learner = build_learner(name, OBS_DIM, len(data.variable_names), LATENT_DIM, seed, **hp)
    train = data.train.shuffled_targets(seed) if shuffled else data.train
    log = fit(learner, train, steps if trains else 0, BATCH, LR, seed)
    (x_fit, z_fit), (x_test, z_test) = data.train.frames(), data.test.frames()
    c_fit, c_test = encode(learner, x_fit), encode(learner, x_test)
    learned = learner.assignment() if trains else None  # an untrained model's uniform assignment means nothing
    s = temporal_scores(z_fit, c_fit, z_test, c_test, data.node_variable, learned, regressor, seed)
    out = {k: float(s[k]) for k in METRICS}
    out.update(row=row, seed=seed, steps=steps if trains else 0, train_seconds=round(log.seconds, 1),
               assignment_kind=s["assignment_kind"], assignment=s["assignment"].tolist(),
               final_loss=float(np.mean(log.losses[-50:])) if log.losses else None)
    if learned is not None:  # the same model under the post-hoc grouping the baselines get
        out["diag_posthoc"] = float(temporal_scores(z_fit, c_fit, z_test, c_test, data.node_variable, None,
                                                    regressor, seed)["diag"])
    return out


def table(results: list[dict]) -> str:
    """Markdown table: mean and per-seed values of every metric per row."""
    lines = ["| learner | " + " | ".join(METRICS) + " | diag (post hoc) | train s |",
             "|---|" + "---|" * (len(METRICS) + 2)]
    for row in ROWS:
        rs = [r for r in results if r["row"] == row]
        if not rs:
            continue
        cells = []
        for m in (*METRICS, "diag_posthoc"):
            vals = [r[m] for r in rs if m in r]
            cells.append(f"{np.mean(vals):.3f} ({', '.join(f'{v:.2f}' for v in vals)})" if vals else "-")
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {np.mean([r['train_seconds'] for r in rs]):.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Run every row for every seed and write the results and the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--regressor", choices=("mlp", "linear"), default="mlp")
    p.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    p.add_argument("--out", type=Path, default=Path("results/temporal_synthetic"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start, results = time.perf_counter(), []
    for seed in args.seeds:
        data = synthetic(seed)
        for row in args.rows:
            results.append(run_row(row, data, seed, args.steps, args.regressor))
            r = results[-1]
            print(f"seed {seed} {row}: " + " ".join(f"{m}={r[m]:.3f}" for m in METRICS), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"command": " ".join(["python", "benchmarks/temporal_synthetic.py", *(argv or sys.argv[1:])]),
            "seeds": args.seeds, "steps": args.steps, "regressor": args.regressor, "lr": LR, "batch": BATCH,
            "latent_dim": LATENT_DIM, "obs_dim": OBS_DIM, "sequences": [N_TRAIN, N_TEST, LENGTH],
            "total_seconds": round(time.perf_counter() - start), "torch": torch.__version__,
            "python": platform.python_version()}
    (args.out / "results.json").write_text(json.dumps({"meta": meta, "runs": results}, indent=1) + "\n")
    (args.out / "table.md").write_text(table(results))
    print(table(results))


if __name__ == "__main__":
    main()
