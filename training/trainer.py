"""The training loop: device selection, mixed precision on GPU, gradient clipping, checkpoints with
exact resume, a metrics log (JSONL + CSV, optional TensorBoard), a progress bar, NaN/inf guard,
and optional DDP under ``torchrun``.

Everything the trainer draws is a function of (seed, step): the model's initial weights, batch b's rows
(``ident3d.training.data``) and the view maker's generator. What a model draws from the global streams (Slot
Attention's initial slots, a VAE's noise) is saved with each checkpoint (``ident3d.training.rng_state``), so
resuming from a checkpoint continues exactly.

Under DDP (``torchrun``) ``batch_size`` is the global batch: rank r trains on slice r of the rows a single
process would use, the objectives gather the embeddings of all ranks so their losses (negatives, batch
statistics, entropy estimates, MoCo's queue) are those of the global batch, and on CUDA BatchNorm layers
become SyncBatchNorm; the gradients are then the single-process gradients (see ``ident3d.training.distributed``).
What still differs from one process: the view maker's per-sample random parameters (each rank draws its
own, from a generator keyed by (seed, step, rank)), LT-NN partners (drawn per rank), and, on CPU/gloo,
BatchNorm statistics (per rank: torch's SyncBatchNorm needs a GPU).
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ident3d.causal.errors import UserError
from ident3d.causal.rng import stream_key
from ident3d.training import rng_state
from ident3d.training.config import TrainConfig
from ident3d.training.distributed import mean_across_ranks
from ident3d.training.run_dir import CHECKPOINT, load_checkpoint, write_config
from ident3d.training.schedule import lr_factor

ESTIMATE_AFTER = 3  # steps timed (after one warm-up step) before the run-time estimate is printed
ESTIMATE_ABOVE_S = 60.0  # print the estimate only for runs longer than this


class TrainingDiverged(UserError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during training: ``step`` is where it stopped, ``checkpoint`` the step of the last
    checkpoint on disk (0: none yet), from which ``--resume`` continues exactly. The first Ctrl-C lets the current
    step finish and checkpoints it (so ``checkpoint == step``); a second one stops at once."""

    def __init__(self, step: int, checkpoint: int):
        super().__init__(f"interrupted at step {step}; " + (f"the checkpoint of step {checkpoint} is kept"
                                                            if checkpoint else "no checkpoint yet"))
        self.step, self.checkpoint = step, checkpoint

    def __reduce__(self) -> tuple[type, tuple[int, int]]:  # pickles (e.g. from a Dask worker) with its numbers
        return type(self), (self.step, self.checkpoint)


class StopRequest:
    """While active (in the main thread of a single process), the first SIGINT only sets ``requested``, so the
    loop can finish its step and checkpoint it; a second SIGINT raises KeyboardInterrupt at once. Elsewhere (a
    Dask worker's thread, DDP ranks, SIGINT ignored by the parent) SIGINT keeps its old behaviour."""

    def __init__(self, active: bool):
        self.requested = False
        self.previous: Any = None
        self.active = active and threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> StopRequest:
        if self.active:
            self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            signal.signal(signal.SIGINT, self.previous)



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
        keep = [r for r in _json_lines(self.jsonl.read_text()) if r["step"] <= step]
        self.jsonl.write_text("".join(json.dumps(r) + "\n" for r in keep))
        self.csv.unlink(missing_ok=True)
        for r in keep:
            self._csv_row(r)


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows a run logged to metrics.jsonl (none without a log), as ``MetricsLog`` wrote them."""
    path = Path(run_dir) / "metrics.jsonl"
    return _json_lines(path.read_text()) if path.exists() else []


def _json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON rows of a metrics file; a line cut short by an interrupt is dropped, not an error."""
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def estimate_text(seconds_per_step: float, steps_left: int) -> str:
    """'about N min for S steps' (seconds under two minutes), from the timed steps' mean."""
    total = seconds_per_step * steps_left
    when = f"{total:.0f} s" if total < 120 else f"{total / 60:.0f} min" if total < 7200 else f"{total / 3600:.1f} h"
    return f"estimated run time: about {when} for {steps_left} steps ({seconds_per_step:.2f} s/step)"


def _clean_failed_start(run_dir: Path, created: bool) -> None:
    """After a fresh run fails before its first checkpoint, remove what it wrote, so the corrected command
    runs again without --overwrite: the whole directory if this run created it, else its own files."""
    if created:
        shutil.rmtree(run_dir, ignore_errors=True)
        return
    for name in ("config.json", "metrics.jsonl", "metrics.csv"):
        (run_dir / name).unlink(missing_ok=True)


def _distributed() -> tuple[int, int]:
    """(rank, world size); initialises torch.distributed under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not torch.distributed.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend)
    return (torch.distributed.get_rank(), world) if world > 1 else (0, 1)


def train(cfg: TrainConfig, run_dir: Path, resume: bool = False, progress: bool = True,
          on_ready: Callable[[], None] | None = None, say: Callable[[str], None] | None = None,
          on_checkpoint: Callable[[int, float], None] | None = None) -> dict[str, Any]:
    """Train ``cfg`` into ``run_dir``; returns the final step's metrics.

    Nothing is written until the run is validated (names, store, views, batch size): then ``on_ready()`` is
    called (e.g. to clear a run being overwritten), ``run_dir`` is made and config.json written. ``say``
    gets the run-time estimate after the first few steps of a long run. ``on_checkpoint(step, seconds)`` is called
    after each checkpoint is written, with the training time so far (its own time is not counted), e.g. to score
    the run along the way. Ctrl-C raises TrainingInterrupted
    (the last checkpoint is kept); a fresh run failing before its first checkpoint leaves nothing behind.
    """
    from ident3d.training.components import build_run

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
    run = build_run(cfg, start_batch=start, rank=rank, world=world, device=device)  # validates names, data, views
    created = not run_dir.exists()
    if rank == 0:  # written once everything is valid, with the store's normalisation statistics filled in
        if on_ready is not None:
            on_ready()
            created = created or not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)
        write_config(run_dir, cfg)
    try:
        return _fit(cfg, run, run_dir, device, state, start, rank, world, progress, say, on_checkpoint)
    except TrainingInterrupted:
        raise
    except KeyboardInterrupt:  # before the loop started
        raise TrainingInterrupted(start, start if ckpt_path.exists() else 0) from None
    except BaseException:
        if rank == 0 and state is None and not ckpt_path.exists():
            _clean_failed_start(run_dir, created)
        raise


def _fit(cfg: TrainConfig, run: Any, run_dir: Path, device: torch.device, state: dict[str, Any] | None, start: int,
         rank: int, world: int, progress: bool, say: Callable[[str], None] | None,
         on_checkpoint: Callable[[int, float], None] | None = None) -> dict[str, Any]:
    """The training loop proper (see ``train``)."""
    ckpt_path = run_dir / CHECKPOINT
    objective: nn.Module = run.objective.to(device)
    if world > 1 and device.type == "cuda":  # global-batch BatchNorm statistics; torch has no CPU SyncBatchNorm
        objective = nn.SyncBatchNorm.convert_sync_batchnorm(objective)
    if state is not None:  # the weights first: loading may decide which parameters the optimiser gets
        objective.load_state_dict(state["model"])
    optimizer = torch.optim.Adam(objective.param_groups(), lr=cfg.lr)
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
    model = objective
    phases = tuple(objective.phases) or ("",)  # one optimiser step per phase; most objectives have one, unnamed
    if world > 1 and len(phases) > 1:
        raise UserError(f"objective {cfg.objective} alternates updates, which runs in one process; "
                        "start it without torchrun")
    if world > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(objective, device_ids=ids)
    log = MetricsLog(run_dir, cfg.tensorboard) if rank == 0 else None
    if log is not None:  # rows past the checkpoint (or, starting afresh, every row) belong to a run that stopped
        log.truncate(start)
    use_amp = cfg.amp and device.type == "cuda"
    last: dict[str, Any] = {"step": start}
    loader = iter(run.loader)
    from tqdm import tqdm

    bar = tqdm(total=cfg.steps, initial=start, desc="train", unit="step", disable=not progress or rank != 0)
    t0 = time.perf_counter() - float(state.get("seconds", 0.0) if state is not None else 0.0)  # time of earlier runs
    timer = StepTimer(start, cfg.steps, say if rank == 0 else None)
    done, saved = start, start if state is not None else 0
    stop = StopRequest(active=world == 1)
    if state is not None:  # last: the global streams as the checkpoint left them, whatever set-up drew
        rng_state.restore(state.get("rng"))
    try:
        with stop:
            for step in range(start, cfg.steps):
                batch = {k: v.to(device, non_blocking=True) for k, v in next(loader).items()}
                views = run.views(batch, view_generator(cfg.seed, step, rank))
                out: dict[str, torch.Tensor] = {}
                for phase in phases:
                    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
                        res = model(views, step, cfg.steps, phase=phase) if phase else model(views, step, cfg.steps)
                    _optimise(res["loss"], objective, optimizer, cfg, step, ckpt_path)
                    out.update(res if not out else {f"{phase}/{k}": v for k, v in res.items()})
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
                if rank == 0 and (done % cfg.checkpoint_every == 0 or done == cfg.steps or stop.requested):
                    save_checkpoint(ckpt_path, objective, optimizer, done, cfg, time.perf_counter() - t0)
                    saved = done
                    if on_checkpoint is not None:
                        paused = time.perf_counter()
                        on_checkpoint(done, paused - t0)
                        t0 += time.perf_counter() - paused
                timer.tick(done)
                if stop.requested:  # Ctrl-C: this step is finished and checkpointed above
                    raise TrainingInterrupted(done, saved)
    except TrainingInterrupted:
        raise
    except KeyboardInterrupt:
        raise TrainingInterrupted(done, saved) from None
    finally:
        bar.close()
        if world > 1:
            torch.distributed.destroy_process_group()
    return last


def _optimise(loss: torch.Tensor, objective: nn.Module, optimizer: torch.optim.Optimizer, cfg: TrainConfig, step: int,
              ckpt_path: Path) -> None:
    """One optimiser step on ``loss`` (parameters it does not reach keep no gradient and are not moved), with the
    NaN guard, gradient clipping and the learning-rate schedule."""
    if not torch.isfinite(loss):
        raise TrainingDiverged(f"loss became {loss.item()} at step {step}; kept the last good checkpoint "
                               f"({ckpt_path if ckpt_path.exists() else 'none yet'}); try a lower --lr or --grad-clip")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(objective.parameters(), cfg.grad_clip)
    for group in optimizer.param_groups:
        group["lr"] = cfg.lr * group.get("lr_scale", 1.0) * lr_factor(step, cfg.steps, cfg.warmup_steps, cfg.schedule)
    optimizer.step()


class StepTimer:
    """Times the first few steps (after one warm-up step) and reports the estimated run time once, before a
    long run goes on: a user who left the defaults on a slow machine learns it in seconds, not hours."""

    def __init__(self, start: int, steps: int, say: Callable[[str], None] | None):
        self.start, self.steps, self.say = start, steps, say
        self.t0: float | None = None

    def tick(self, done: int) -> None:
        """Call after each step; ``done`` steps are finished."""
        if self.say is None:
            return
        if done == self.start + 1:
            self.t0 = time.perf_counter()
        elif self.t0 is not None and done == self.start + 1 + ESTIMATE_AFTER:
            per_step = (time.perf_counter() - self.t0) / ESTIMATE_AFTER
            left = self.steps - self.start
            if math.isfinite(per_step) and per_step * left > ESTIMATE_ABOVE_S:
                self.say(estimate_text(per_step, left))
            self.say = None


def save_checkpoint(path: Path, objective: nn.Module, optimizer: torch.optim.Optimizer, step: int,
                    cfg: TrainConfig, seconds: float = 0.0) -> None:
    """Write atomically (temp file + rename) so an interrupted save never leaves a broken checkpoint; ``seconds``
    is the training time so far (a resumed run counts on from it); the global random streams go with it."""
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, "model": objective.state_dict(), "optimizer": optimizer.state_dict(),
                "config": asdict(cfg), "seconds": round(seconds, 3), "rng": rng_state.capture()}, tmp)
    os.replace(tmp, path)

