"""The training loop: device selection, mixed precision on GPU, gradient clipping, checkpoints with
exact resume, a metrics log (JSONL + CSV, optional TensorBoard), a progress bar, NaN/inf guard,
and optional DDP under ``torchrun``.

Everything random is a function of (seed, step): the model's initial weights, batch b's rows
(``training.data``) and the view maker's generator, so resuming from a checkpoint continues exactly.

Under DDP (``torchrun``) ``batch_size`` is the global batch: rank r trains on slice r of the rows a single
process would use, the objectives gather the embeddings of all ranks so their losses (negatives, batch
statistics, entropy estimates, MoCo's queue) are those of the global batch, and on CUDA BatchNorm layers
become SyncBatchNorm; the gradients are then the single-process gradients (see ``training.distributed``).
What still differs from one process: the view maker's per-sample random parameters (each rank draws its
own, from a generator keyed by (seed, step, rank)), LT-NN partners (drawn per rank), and, on CPU/gloo,
BatchNorm statistics (per rank: torch's SyncBatchNorm needs a GPU).
"""

from __future__ import annotations

import csv
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from causal.errors import UserError
from causal.rng import stream_key
from training.distributed import mean_across_ranks

CHECKPOINT = "checkpoint.pt"


class TrainingDiverged(UserError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


@dataclass
class TrainConfig:
    """Everything that defines a run; saved as ``config.json`` in the run directory."""

    data: str
    objective: str = "infonce"
    views: str = "crop_large+colour"
    encoder: str = "resnet18"
    out_dim: int = 10
    constraint: str = "none"
    steps: int = 1000
    batch_size: int = 256
    lr: float = 1e-4
    seed: int = 0
    device: str = "auto"
    amp: bool = True
    grad_clip: float = 0.0
    split: str | None = None
    allow_partial: bool = False
    num_workers: int = 0
    log_every: int = 10
    checkpoint_every: int = 100
    tensorboard: bool = False
    objective_args: dict[str, Any] = field(default_factory=dict)
    encoder_args: dict[str, Any] = field(default_factory=dict)
    normalize: dict[str, list[float]] = field(default_factory=dict)  # filled from the store


def pick_device(want: str) -> torch.device:
    """'auto' -> CUDA if available else CPU; 'cuda' without a GPU is a user error."""
    if want == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if want == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA GPU is available here; use --device auto or cpu")
    if want not in ("cpu", "cuda"):
        raise UserError(f"--device must be auto, cpu or cuda, got {want!r}")
    return torch.device(want)


def step_generator(seed: int, step: int) -> torch.Generator:
    """The view maker's generator for one step (CPU, so views are reproducible on any device)."""
    return torch.Generator().manual_seed(stream_key(seed, "views", step) % 2**63)


def view_generator(seed: int, step: int, rank: int = 0) -> torch.Generator:
    """The view maker's generator of one DDP rank: ``step_generator`` on rank 0 (and in a single process),
    an independent stream on the other ranks, so the ranks' slices of the global batch do not all repeat
    rank 0's augmentation parameters."""
    if rank == 0:
        return step_generator(seed, step)
    return torch.Generator().manual_seed(stream_key(seed, "views", step, "rank", rank) % 2**63)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint; a damaged file is a one-line user error."""
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - any unpickling/zip error means the file is unusable
        raise UserError(f"checkpoint {path} is unreadable ({type(exc).__name__}); delete it to start over, "
                        "or restore it from a backup") from None


class MetricsLog:
    """Appends one row per logged step to metrics.jsonl and metrics.csv (and TensorBoard if asked)."""

    def __init__(self, run_dir: Path, tensorboard: bool):
        self.jsonl, self.csv = run_dir / "metrics.jsonl", run_dir / "metrics.csv"
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise UserError("--tensorboard needs the tensorboard package: pip install tensorboard") from None
            self.tb = SummaryWriter(str(run_dir / "tensorboard"))

    def write(self, row: dict[str, float]) -> None:
        with self.jsonl.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        self._csv_row(row)
        if self.tb is not None:
            for k, v in row.items():
                if k != "step":
                    self.tb.add_scalar(k, v, row["step"])

    def _csv_row(self, row: dict[str, float]) -> None:
        new = not self.csv.exists()
        with self.csv.open("a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(row))
            if new:
                w.writeheader()
            w.writerow(row)

    def truncate(self, step: int) -> None:
        """Drop rows logged after ``step`` (they belong to a run that did not reach its next checkpoint)."""
        if not self.jsonl.exists():
            return
        rows = [json.loads(line) for line in self.jsonl.read_text().splitlines() if line.strip()]
        keep = [r for r in rows if r["step"] <= step]
        self.jsonl.write_text("".join(json.dumps(r) + "\n" for r in keep))
        self.csv.unlink(missing_ok=True)
        for r in keep:
            self._csv_row(r)


def _distributed() -> tuple[int, int]:
    """(rank, world size); initialises torch.distributed under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not torch.distributed.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend)
    return (torch.distributed.get_rank(), world) if world > 1 else (0, 1)


def train(cfg: TrainConfig, run_dir: Path, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Train ``cfg`` into ``run_dir``; returns the final step's metrics."""
    from training.components import build_run

    rank, world = _distributed()
    device = pick_device(cfg.device)
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    ckpt_path = run_dir / CHECKPOINT
    start = 0
    state = None
    if resume and ckpt_path.exists():
        state = load_checkpoint(ckpt_path)
        start = int(state["step"])
    torch.manual_seed(cfg.seed)
    run = build_run(cfg, start_batch=start, rank=rank, world=world)  # validates names, store, views, batch size
    if rank == 0:  # written once everything is valid, with the store's normalisation statistics filled in
        (run_dir / "config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")
    objective: nn.Module = run.objective.to(device)
    if world > 1 and device.type == "cuda":  # global-batch BatchNorm statistics; torch has no CPU SyncBatchNorm
        objective = nn.SyncBatchNorm.convert_sync_batchnorm(objective)
    optimizer = torch.optim.Adam(objective.parameters(), lr=cfg.lr)
    if state is not None:
        objective.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    model = objective
    if world > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(objective, device_ids=ids)
    log = MetricsLog(run_dir, cfg.tensorboard) if rank == 0 else None
    if log is not None and state is not None:
        log.truncate(start)
    use_amp = cfg.amp and device.type == "cuda"
    last: dict[str, Any] = {"step": start}
    loader = iter(run.loader)
    from tqdm import tqdm

    bar = tqdm(total=cfg.steps, initial=start, desc="train", unit="step", disable=not progress or rank != 0)
    t0 = time.perf_counter()
    try:
        for step in range(start, cfg.steps):
            batch = {k: v.to(device, non_blocking=True) for k, v in next(loader).items()}
            views = run.views(batch, view_generator(cfg.seed, step, rank))
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
                out = model(views, step, cfg.steps)
            loss = out["loss"]
            if not torch.isfinite(loss):
                raise TrainingDiverged(f"loss became {loss.item()} at step {step}; kept the last good checkpoint "
                                       f"({ckpt_path if ckpt_path.exists() else 'none yet'}); try a lower --lr "
                                       "or --grad-clip")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(objective.parameters(), cfg.grad_clip)
            optimizer.step()
            objective.after_step(step, cfg.steps)
            done = step + 1
            bar.update(1)
            if done % cfg.log_every == 0 or done == cfg.steps:
                # averaged over the ranks (a collective: every rank takes part; losses computed from gathered
                # embeddings are equal on all ranks, per-rank means like MoCo's average to the global value)
                means = mean_across_ranks(torch.stack([v.detach().float().mean() for v in out.values()])).tolist()
            if log is not None and (done % cfg.log_every == 0 or done == cfg.steps):
                last = {"step": done, **dict(zip(out, means, strict=True)),
                        **{f"views/{k}": float(v.float().mean()) for k, v in run.views.last_params.items()
                           if v.numel()}, "seconds": round(time.perf_counter() - t0, 3)}
                log.write(last)
                bar.set_postfix(loss=f"{last['loss']:.4f}")
            if rank == 0 and (done % cfg.checkpoint_every == 0 or done == cfg.steps):
                save_checkpoint(ckpt_path, objective, optimizer, done, cfg)
    finally:
        bar.close()
        if world > 1:
            torch.distributed.destroy_process_group()
    return last


def save_checkpoint(path: Path, objective: nn.Module, optimizer: torch.optim.Optimizer, step: int,
                    cfg: TrainConfig) -> None:
    """Write atomically (temp file + rename) so an interrupted save never leaves a broken checkpoint."""
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, "model": objective.state_dict(), "optimizer": optimizer.state_dict(),
                "config": asdict(cfg)}, tmp)
    os.replace(tmp, path)

