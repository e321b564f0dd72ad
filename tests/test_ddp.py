"""DDP means the same loss: 2 CPU processes on gloo, each with half of a fixed global batch, give the loss,
the parameter gradients (and MoCo's queue) of 1 process with the whole batch.

The ranks run this file as a script (``python tests/test_ddp.py OUT_DIR`` with RANK / WORLD_SIZE /
MASTER_ADDR / MASTER_PORT set), all objectives in one process group, and save what they saw; the test
compares that with the single-process run done in the pytest process. The encoder has no BatchNorm (torch
has no SyncBatchNorm on CPU), so equality is exact up to float64 rounding.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
WORLD = 2
GLOBAL_BATCH = 8
STEPS = 2  # two SGD steps: the second sees updated weights and (MoCo) the first step's keys in the queue
TOL = 1e-9

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "infonce": ("infonce", {"tau": 0.5}),
    "lp_infonce_batch": ("lp_infonce", {"negatives": "batch", "p": 2, "tau": 0.7}),
    "lp_infonce_batch_one_way_p1": ("lp_infonce", {"negatives": "batch", "p": 1, "symmetric": False}),
    "lp_infonce_rolled_compat": ("lp_infonce", {"negatives": "rolled", "p": 2, "simclr_compat": True}),
    "lp_infonce_rolled_logmeanexp": ("lp_infonce", {"negatives": "rolled", "p": 3, "simclr_compat": False}),
    "barlow_twins": ("barlow_twins", {"lambd": 0.1}),
    "vicreg": ("vicreg", {}),
    "align_maxent_kl": ("align_maxent", {"entropy": "kl"}),
    "align_maxent_uniformity": ("align_maxent", {"entropy": "uniformity"}),
    "moco_v2": ("moco_v2", {"queue_size": 12, "tau": 0.3}),  # 2 steps x 16 keys: the ring buffer wraps
}


class SmallEncoder(nn.Sequential):
    """Linear -> LeakyReLU -> Linear, no BatchNorm: per-sample, so DDP equivalence is exact."""

    def __init__(self, d_in: int = 6, hidden: int = 16, d_out: int = 4):
        super().__init__(nn.Linear(d_in, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, d_out))
        self.out_dim = d_out


def build(case: str) -> nn.Module:
    """The objective of ``case`` with identical float64 weights (and MoCo queue) in every process."""
    from ident3d.training.objectives import OBJECTIVES

    name, hp = CASES[case]
    torch.manual_seed(0)
    return OBJECTIVES.get(name)(SmallEncoder().double(), **hp).double()


def global_views(step: int) -> list[torch.Tensor]:
    """The fixed global batch of step ``step``: two noisy views of the same anchors, (GLOBAL_BATCH, 6)."""
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=torch.float64)
    return [x + 0.3 * torch.randn(x.shape, generator=g, dtype=torch.float64) for _ in range(2)]


def run_steps(case: str, rank: int = 0, world: int = 1) -> list[dict[str, Any]]:
    """STEPS plain-SGD steps on this rank's slice of the global batch; per step: loss, grads, queue."""
    objective = build(case)
    model = objective
    if world > 1:
        model = nn.parallel.DistributedDataParallel(objective)
    opt = torch.optim.SGD(objective.parameters(), lr=0.1)
    share = GLOBAL_BATCH // world
    record = []
    for step in range(STEPS):
        views = [v[rank * share:(rank + 1) * share] for v in global_views(step)]
        out = model(views, step, STEPS)
        opt.zero_grad()
        out["loss"].backward()
        grads = {n: p.grad.detach().clone() for n, p in objective.named_parameters() if p.grad is not None}
        opt.step()
        objective.after_step(step, STEPS)
        row = {"loss": out["loss"].item(), "grads": grads}
        if hasattr(objective, "queue"):
            row["queue"], row["queue_ptr"] = objective.queue.clone(), int(objective.queue_ptr)
        record.append(row)
    return record


def worker(out_dir: Path) -> None:
    """One rank: every case in one gloo process group; saves {case: record} to out_dir/rank{r}.pt."""
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = {case: run_steps(case, rank, world) for case in CASES}
    finally:
        torch.distributed.destroy_process_group()
    torch.save(results, out_dir / f"rank{rank}.pt")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict[str, list[dict[str, Any]]]]:
    """Run the WORLD ranks once for all cases; their saved records, in rank order."""
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(WORLD),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, __file__, str(out)], cwd=ROOT, env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(WORLD)]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-3000:]
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


@pytest.mark.parametrize("case", list(CASES))
def test_two_processes_give_the_single_process_loss_and_gradients(ranks, case):
    torch.set_num_threads(1)
    single = run_steps(case)
    per_rank = [r[case] for r in ranks]
    for step, ref in enumerate(single):
        rows = [rec[step] for rec in per_rank]
        if case == "moco_v2":  # local queries: each rank's loss is its half's mean, their mean the global loss
            assert abs(sum(r["loss"] for r in rows) / WORLD - ref["loss"]) < TOL, (step, rows, ref["loss"])
            assert abs(rows[0]["loss"] - rows[1]["loss"]) > 1e-6  # really two different halves
        else:  # losses over the gathered global batch: the same value on every rank
            for r in rows:
                assert abs(r["loss"] - ref["loss"]) < TOL, (step, r["loss"], ref["loss"])
        for r in rows:  # DDP-averaged gradients = the single-process gradient
            assert max_diff(r["grads"], ref["grads"]) < TOL, (step, max_diff(r["grads"], ref["grads"]))
        if "queue" in ref:  # every rank holds the single process's queue
            for r in rows:
                assert r["queue_ptr"] == ref["queue_ptr"]
                assert (r["queue"] - ref["queue"]).abs().max().item() < TOL


def test_half_batch_loss_differs_from_the_global_loss():
    """The test's power: a rank's half-batch loss (what per-rank negatives / statistics give) is far from the
    global-batch loss, so a missing gather cannot pass within TOL."""
    torch.set_num_threads(1)
    for case in CASES:
        if case == "moco_v2":
            continue  # per-sample terms: the mean of the halves IS the global loss (checked above)
        half = [v[: GLOBAL_BATCH // WORLD] for v in global_views(0)]
        assert abs(build(case)(half)["loss"].item() - run_steps(case)[0]["loss"]) > 1e-3, case


@pytest.mark.parametrize("in_memory", [True, False])
@pytest.mark.parametrize("lanes", [1, 3])
def test_rank_slices_make_the_single_process_batch(in_memory, lanes):
    """--batch-size is global: the ranks' rows, concatenated in rank order, are one process's rows."""
    import numpy as np

    from ident3d.store.attrs import StoreAttrs
    from ident3d.store.info import StoreInfo
    from ident3d.training.data import StoreBatches

    attrs = StoreAttrs(scene="test", scene_spec={}, scm={}, n=1000, chunk_size=50, latent_names=["a"])
    info = StoreInfo("unused.zarr", 1000, 50, 8, attrs, np.arange(1000, dtype=np.int64))
    one = StoreBatches(info, 24, seed=3, in_memory=in_memory, lanes=lanes)
    for world in (2, 3, 4):
        parts = [StoreBatches(info, 24, seed=3, in_memory=in_memory, lanes=lanes, rank=r, world=world)
                 for r in range(world)]
        for step in (0, 1, 7, 40):
            rows = [p.batch_rows(step) for p in parts]
            assert all(r.size == 24 // world for r in rows)
            assert np.array_equal(np.concatenate(rows), one.batch_rows(step)), (world, step)
    with pytest.raises(ValueError, match="not divisible by the 5 processes"):
        StoreBatches(info, 24, seed=3, rank=0, world=5)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    worker(Path(sys.argv[1]))
