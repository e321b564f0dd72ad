"""The temporal learners on a rendered sequence store (``ident3d render --sequences``): time-contrastive InfoNCE,
the CITRIS-style VAE and the iVAE-style baseline (``ident3d.training.temporal``) with the ``cnn`` encoder on the frames,
scored with CITRIS's variable-level R^2 matrix (diag / sep), DCI and MIG on held-out sequences.

    OMP_NUM_THREADS=2 python benchmarks/temporal_images.py --store runs/temporal/tc3d_500x8.zarr \
        --out results/temporal [--seeds 0 1] [--steps 600] [--size 32]

The first 80% of the sequences train, the rest are held out (regressors fit on the training frames, scored on the
held-out ones). Frames are average-pooled from the store's resolution to ``--size`` px and standardised per channel.
Writes OUT/results.json (each (row, seed)'s scores with its R^2 matrix), OUT/table.md and OUT/r2_matrices.png (each
learner's R^2 matrix for the first of ``--seeds``). Each
finished (row, seed) is saved at once with a hash of the settings that shape it (store, training and scoring
settings, the row's learner and hyperparameters, seed, threads); a re-run skips a (row, seed) whose hash matches and
redoes one whose hash does not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ident3d.causal.dynamic import DynamicSCM  # noqa: E402
from ident3d.evaluation.temporal_scores import node_factors, temporal_scores  # noqa: E402
from ident3d.store.attrs import read_attrs  # noqa: E402
from ident3d.store.zarr_io import open_store, read_rows  # noqa: E402
from ident3d.training.temporal.fit import build_learner, encode, fit  # noqa: E402
from ident3d.training.temporal.transitions import Transitions  # noqa: E402
from ident3d.training.temporal.variables import causal_variables, node_variable, variable_targets  # noqa: E402

LATENT_DIM, BATCH = 16, 64
ROWS = {"untrained": ("citris_vae", {"lambda_reg": 0.0}, False),
        "time_contrastive": ("time_contrastive", {"tau": 0.1}, True),
        "citris_vae": ("citris_vae", {"lambda_reg": 0.0}, True),
        "citris_vae_classifier": ("citris_vae", {"lambda_reg": 0.0, "beta_classifier": 2.0}, True),
        "ivae": ("ivae", {}, True)}
METRICS = ("diag", "sep", "diag_factors", "sep_factors", "dci_d", "mig")


def load(store: str, size: int, train_frac: float = 0.8) -> tuple[Transitions, Transitions, list[str], np.ndarray]:
    """(train, held-out) transitions of a sequence store, the causal variables' names and each node's variable."""
    group = open_store(store)
    attrs = read_attrs(group, store)
    if not attrs.sequences:
        raise SystemExit(f"{store} is not a sequence store; render one with `ident3d render --sequences N`")
    n_seq, length = int(attrs.sequences["sequences"]), int(attrs.sequences["length"])
    model = DynamicSCM(attrs.sequences["spec"])
    images = read_rows(group["images"], slice(None), store).astype(np.float32) / 255.0
    x = torch.from_numpy(images).permute(0, 3, 1, 2)
    if x.shape[-1] != size:
        x = torch.nn.functional.adaptive_avg_pool2d(x, size)
    mean, std = x.mean((0, 2, 3), keepdim=True), x.std((0, 2, 3), keepdim=True).clamp_min(1e-3)
    obs = ((x - mean) / std).numpy().reshape(n_seq, length, 3, size, size)
    names = list(attrs.sequences["intervention_names"])
    classes = np.asarray(group["classes"][:], np.float32) if attrs.class_node else None
    latents = node_factors(np.asarray(group["latents"][:], np.float32), attrs.latent_names, classes,
                           attrs.class_node, names)
    variables = causal_variables(model)
    targets = variable_targets(np.asarray(group["interventions"][:], bool).reshape(n_seq, length, -1), variables)
    data = Transitions(obs, targets.astype(np.float32), latents.reshape(n_seq, length, -1))
    cut = int(round(n_seq * train_frac))
    return (data.sequences(np.arange(cut)), data.sequences(np.arange(cut, n_seq)), list(variables),
            node_variable(variables, len(names)))


def run_row(row: str, train: Transitions, test: Transitions, n_vars: int, node_var: np.ndarray, size: int,
            seed: int, steps: int, lr: float, regressor: str, device: str = "cpu") -> dict:
    """Train one row's learner on ``device`` and score it on the held-out frames (scores and the R^2 matrix)."""
    name, hp, trains = ROWS[row]
    learner = build_learner(name, 0, n_vars, LATENT_DIM, seed, image_size=size, **hp)
    log = fit(learner, train, steps if trains else 0, BATCH, lr, seed, device)
    (x_fit, z_fit), (x_test, z_test) = train.frames(), test.frames()
    c_fit, c_test = encode(learner, x_fit, batch=512), encode(learner, x_test, batch=512)
    learned = learner.assignment() if trains else None
    s = temporal_scores(z_fit, c_fit, z_test, c_test, node_var, learned, regressor, seed)
    out = {k: float(s[k]) for k in METRICS}
    out.update(row=row, seed=seed, steps=steps if trains else 0, train_seconds=round(log.seconds, 1),
               assignment_kind=s["assignment_kind"], assignment=np.asarray(s["assignment"]).tolist(),
               first_loss=float(np.mean(log.losses[:20])) if log.losses else None,
               final_loss=float(np.mean(log.losses[-20:])) if log.losses else None,
               r2=np.asarray(s["r2"]).tolist())
    return out


def table(results: list[dict]) -> str:
    """Markdown: mean and per-seed values of every metric per row."""
    lines = ["| learner | " + " | ".join(METRICS) + " | train s |", "|---|" + "---|" * (len(METRICS) + 1)]
    for row in ROWS:
        rs = [r for r in results if r["row"] == row]
        if rs:
            cells = [f"{np.mean([r[m] for r in rs]):.3f} ({', '.join(f'{r[m]:.2f}' for r in rs)})" for m in METRICS]
            lines.append(f"| {row} | " + " | ".join(cells) + f" | {np.mean([r['train_seconds'] for r in rs]):.0f} |")
    return "\n".join(lines) + "\n"


def figure(results: list[dict], seed: int, variables: list[str], path: Path) -> None:
    """Each learner's R^2 matrix (rows: latent groups, columns: causal variables) for ``seed``, or for its lowest
    seed with a matrix where ``seed`` has none; each panel names its seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    for row in ROWS:
        have = sorted((r for r in results if r["row"] == row and "r2" in r),
                      key=lambda r: (r["seed"] != seed, r["seed"]))
        if have:
            panels.append((f"{row}, seed {have[0]['seed']}", np.asarray(have[0]["r2"])))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.3), squeeze=False)
    for ax, (title, m) in zip(axes[0], panels, strict=True):
        ax.imshow(np.clip(m, 0, 1), vmin=0, vmax=1, cmap="viridis")
        ax.set_title(title, fontsize=8)
        ax.set_xticks(range(len(variables)), variables, rotation=90, fontsize=6)
        ax.set_yticks(range(len(variables)), variables, fontsize=6)
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=4.5,
                        color="black" if m[i, j] > 0.5 else "white")
    fig.suptitle("R^2 of each causal variable (columns) from each latent group (rows), held-out frames", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def row_key(args: argparse.Namespace, store_fingerprint: dict, row: str, seed: int) -> str:
    """A hash of everything that shapes one (row, seed)'s scores: the store's fingerprint, the training/scoring
    settings and the row's learner and hyperparameters (adding a row leaves the others' results valid)."""
    shape = {"store": store_fingerprint, "size": args.size, "steps": args.steps, "lr": args.lr, "batch": BATCH,
             "latent_dim": LATENT_DIM, "regressor": args.regressor, "row": ROWS[row], "seed": seed,
             "threads": args.threads, "device": args.device}
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", required=True)
    p.add_argument("--out", type=Path, default=Path("results/temporal"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", help="where the learners train, e.g. cuda (scoring stays on the CPU)")
    p.add_argument("--regressor", choices=("mlp", "linear"), default="mlp")
    p.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    train, test, variables, node_var = load(args.store, args.size)
    fingerprint = read_attrs(open_store(args.store), args.store).fingerprint()
    args.out.mkdir(parents=True, exist_ok=True)
    saved_path = args.out / "results.json"
    saved = json.loads(saved_path.read_text()) if saved_path.exists() else {}
    results = [r for r in saved.get("runs", []) if r.get("row") in ROWS
               and r.get("key") == row_key(args, fingerprint, r["row"], r["seed"])]
    meta = {"command": " ".join(["python", "benchmarks/temporal_images.py", *(argv or sys.argv[1:])]),
            "store": args.store, "train_sequences": int(train.observations.shape[0]),
            "test_sequences": int(test.observations.shape[0]), "length": int(train.observations.shape[1]),
            "size": args.size, "steps": args.steps, "batch": BATCH, "lr": args.lr, "latent_dim": LATENT_DIM,
            "regressor": args.regressor, "variables": variables, "threads": args.threads,
            "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(args.device),
            "torch": torch.__version__, "python": platform.python_version()}
    for seed in args.seeds:
        for row in args.rows:
            if any(r["row"] == row and r["seed"] == seed for r in results):
                continue
            r = run_row(row, train, test, len(variables), node_var, args.size, seed, args.steps, args.lr,
                           args.regressor, args.device)
            r["key"] = row_key(args, fingerprint, row, seed)
            results.append(r)
            print(f"seed {seed} {row}: " + " ".join(f"{k}={r[k]:.3f}" for k in METRICS)
                  + f" ({r['train_seconds']} s)", flush=True)
            meta["seconds_this_call"] = round(time.perf_counter() - start)
            saved_path.write_text(json.dumps({"meta": meta, "runs": results}, indent=1) + "\n")
    (args.out / "table.md").write_text(table(results))
    figure(results, args.seeds[0], variables, args.out / "r2_matrices.png")
    print(table(results))


if __name__ == "__main__":
    main()
