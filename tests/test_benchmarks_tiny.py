"""Every script in benchmarks/ still runs, end to end, at toy size: ``python benchmarks/NAME.py --tiny`` in a
subprocess (real runs: Blender renders, training steps, Dask clusters, a git worktree where the script makes them; no
mocks), each pinned to one core.

Rules:
- A script is a ``benchmarks/*.py`` file with a ``__main__`` block; every one has ``--tiny`` through the shared
  helper ``benchmarks/_tiny.py`` (a new script without it fails here, and argparse refuses ``--tiny``). The other files
  are helper modules (``imaging``, ``ssim``, ``render_frontier_figure``, ``_tiny``) and must be imported by a script.
- ``benchmarks/gpu/`` is the GPU kit, not benchmark scripts: its runner's ``--tiny`` is run by tests/test_gpu_kit.py,
  and ``pack.py``, ``record.py`` and ``estimate.py`` are its tools (tests/test_gpu_kit*.py).
- ``RUN_BY``: a script whose own test already runs its ``--tiny`` mode (in-process, through ``main(["--tiny", ...])``)
  and checks the output in detail is not run twice; the test here only checks that it still does.
- Each run gets only ``--tiny``: from an empty working directory, with ``$TMPDIR`` pointed at the test's temporary
  folder, ``OMP_NUM_THREADS=1`` and the process pinned to one core (xdist worker N takes core N). It must exit 0,
  write its outputs into its tiny folder under ``$TMPDIR``, leave the working directory empty (no output at a
  relative default path) and write none of those outputs' names under ``results/`` or ``docs/`` during its run (an
  absolute default path; other work in the checkout may write other files there meanwhile).

Cost (2026-11-28, the 2-core machine at load 4-5 from other jobs, the runs one after another): the 21 runs here take
131 s of wall time and 120 s of CPU in all (0.6 s for gallery_meshes_inputs to 26 s for synthetic_workers, which times
two fresh ``ident3d synthetic`` processes, one of them on a 2-process Dask cluster: start-ups are its cost); ``-n 2``
shares them between two workers, about half that in wall time. Most of every run is start-up, not its toy sizes:
Python, torch and ident3d imports (3-5 s per process at that load; torchvision pulls in torch._dynamo, and so does
the first torch.optim optimizer), Blender's where it renders, and each fresh process or Dask worker a script starts.
"""

from __future__ import annotations

import ast
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
TIMEOUT_S = 180  # a hang guard, not a speed check


def is_script(path: Path) -> bool:
    """Whether a benchmarks/*.py file runs as a script (an ``if __name__ == "__main__":`` block)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and ast.unparse(node.test) in (
                "__name__ == '__main__'", '__name__ == "__main__"'):
            return True
    return False


def imports(path: Path) -> set[str]:
    """Top-level module names a file imports (anywhere in it)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


FILES = sorted(BENCH.glob("*.py"))
SCRIPTS = [p for p in FILES if is_script(p)]
HELPERS = [p for p in FILES if not is_script(p)]
# scripts whose --tiny run a test of their own makes (in-process, through main(["--tiny", ...])) and checks in
# detail: not run twice (each is ~6-9 s of one core)
RUN_BY = {"render_frontier": "test_render_frontier.py", "synthetic_step": "test_synthetic_step.py"}


def test_every_script_uses_the_shared_tiny_helper_and_every_helper_is_used():
    assert len(SCRIPTS) >= 20 and {p.stem for p in HELPERS} >= {"_tiny", "imaging", "ssim"}
    assert [p.name for p in SCRIPTS if "_tiny" not in imports(p)] == []
    used = set().union(*(imports(p) for p in FILES))
    assert [p.name for p in HELPERS if p.stem not in used] == []


def test_the_tiny_helper_keeps_what_is_given_and_moves_what_is_not(tmp_path, monkeypatch):
    import argparse
    import importlib
    import tempfile

    monkeypatch.syspath_prepend(str(BENCH))  # as a script beside it imports it
    tiny_module = importlib.import_module("_tiny")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def parse(argv):
        ap = argparse.ArgumentParser(prog="demo.py")
        ap.add_argument("--n", type=int, default=100)
        ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
        ap.add_argument("--out", type=Path, default="results/demo.json")
        ap.add_argument("--store")
        tiny = tiny_module.add_tiny(ap, "a test")
        args = ap.parse_args(argv)
        return args, tiny.apply(args, sizes={"n": 2, "sizes": [16]}, paths={"out": None, "store": "s.zarr"})

    args, folder = parse(["--tiny", "--n", "5"])
    assert (args.n, args.sizes) == (5, [16]) and folder.parent == tmp_path and folder.name.startswith("ident3d_tiny_demo_")
    assert args.out == folder / "demo.json" and isinstance(args.out, Path) and args.store == str(folder / "s.zarr")
    args, folder = parse(["--tiny", "--out", "x.json", "--store", "y.zarr"])  # nothing to move: no folder
    assert (args.n, args.out, args.store, folder) == (2, Path("x.json"), "y.zarr", None)
    args, folder = parse([])
    assert (args.n, args.sizes, args.out, args.store, folder) == (100, [64, 128], Path("results/demo.json"), None, None)


def test_the_scripts_left_to_their_own_tests_run_tiny_there():
    for name, test in RUN_BY.items():
        text = (ROOT / "tests" / test).read_text()
        assert BENCH / f"{name}.py" in SCRIPTS and f'benchmark("{name}")' in text and '"--tiny"' in text, test


def pin_to_one_core() -> None:
    """In the child, before exec: one core, the xdist worker's own (gw0 -> the first allowed core, gw1 -> the
    second), so two workers' runs do not share one."""
    cores = sorted(os.sched_getaffinity(0))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    os.sched_setaffinity(0, {cores[int(worker.removeprefix("gw") or 0) % len(cores)]})


def written_since(folder: Path, t0: float) -> list[str]:
    """Files under ``folder`` (not .md) modified at or after ``t0``."""
    return sorted(str(p.relative_to(ROOT)) for p in folder.rglob("*")
                  if p.is_file() and p.suffix != ".md" and p.stat().st_mtime >= t0)


RUN_HERE = [p for p in SCRIPTS if p.stem not in RUN_BY]


@pytest.mark.parametrize("script", RUN_HERE, ids=[p.stem for p in RUN_HERE])
def test_tiny_run(script, tmp_path):
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
    t0 = time.time() - 1  # file systems keep mtimes to the second or finer
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, str(script), "--tiny"], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=TIMEOUT_S, preexec_fn=pin_to_one_core if hasattr(os, "sched_setaffinity") else None)
    seconds = time.time() - t0 - 1
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the script and every process it waited for
    cpu = cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime
    assert r.returncode == 0, f"{script.name} --tiny failed after {seconds:.0f} s:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    folders = list(tmp.glob(f"ident3d_tiny_{script.stem}_*"))
    assert len(folders) == 1 and any(p.is_file() for p in folders[0].rglob("*")), (script.name, r.stdout[-1000:])
    assert list(cwd.iterdir()) == [], f"{script.name} --tiny wrote into its working directory"
    # what it wrote in its tiny folder, it did not also write into the checkout (other work may write elsewhere there)
    names = {p.name for p in folders[0].rglob("*") if p.is_file()}
    assert [f for f in written_since(ROOT / "results", t0) + written_since(ROOT / "docs", t0)
            if Path(f).name in names] == []
    print(f"{script.name} --tiny: {seconds:.1f} s, {cpu:.1f} s of CPU")
