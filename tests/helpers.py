"""Helpers shared by the test modules (imported as ``helpers``: pytest puts tests/ on sys.path)."""

import errno
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def benchmark(name: str, module: str | None = None):
    """The script ``benchmarks/NAME.py`` loaded as a module (benchmarks/ is scripts, not a package), named ``module``
    (default NAME) in sys.modules' sense only."""
    spec = importlib.util.spec_from_file_location(module or name, ROOT / "benchmarks" / f"{name}.py")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def tree_digest(path) -> str:
    """sha256 over every file's relative path and bytes below ``path``: equal digests mean nothing changed."""
    h = hashlib.sha256()
    for p in sorted(Path(path).rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + p.read_bytes())
    return h.hexdigest()


def store_bytes(path) -> dict[str, str]:
    """Digest of every array folder of a store (the root zarr.json holds the creation time, so it is left out)."""
    return {d.name: tree_digest(d) for d in sorted(Path(path).iterdir()) if d.is_dir()}


def multi3dident_without_rules() -> dict:
    """The multi3dident scene with its placement rules removed: rows as the SCM draws them (objects overlap freely)."""
    from ident3d.render.scene import load_scene

    return {k: v for k, v in load_scene("multi3dident").to_dict().items() if k != "placement"}


def render_tiny_store(out):
    """The 96-image, 32 px Causal3DIdent store (with a `hues` LT view) that training tests train on (rendered in this
    process: a Dask cluster's start-up would cost more than the 96 images; conftest's ``tiny_store`` shares one)."""
    from ident3d.render import render_store

    assert render_store(out, scene="causal3dident", n=96, settings={"resolution": 32, "samples": 4},
                        views="hues:hues", chunk_size=32, workers=1, progress=False).ok
    return out


def run_cli(*args, cwd=None, env=None):
    """``ident3d ARGS`` in this process (no interpreter + torch start-up per call, which dominated the fault tests'
    time): a ``subprocess.CompletedProcess`` with the exit code and what the command wrote to stdout and stderr.
    An exception that escapes ``main`` is written to stderr as Python would (a traceback) with exit code 1, so
    "one line, no traceback" is checked exactly as for a real command. Faults that need a real process (signals,
    a killed worker) keep using subprocesses."""
    import contextlib
    import io
    import os
    import subprocess
    import traceback

    from ident3d.pipelines.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    try:
        if cwd is not None:
            os.chdir(cwd)
        os.environ.update(env or {})
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:  # noqa: BLE001 - reported like an uncaught exception in a real process
                traceback.print_exc(file=err)
                code = 1
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def default_sigint() -> None:
    """``preexec_fn`` for a command the test will Ctrl-C: SIGINT back to its default, as under a terminal. A
    shell starting the test run in the background hands SIG_IGN down to every child, which would swallow it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def read_png(path):
    """A written figure decoded (PNG signature checked): (height, width, number of distinct RGB colours)."""
    import numpy as np
    from PIL import Image

    path = Path(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    rgb = np.asarray(Image.open(path).convert("RGB"))
    return rgb.shape[0], rgb.shape[1], len(np.unique(rgb.reshape(-1, 3), axis=0))


@dataclass(frozen=True)
class KillOnce:
    """A render job's ``before_commit``: the worker writing chunk ``k`` dies after its arrays, before its done
    flag, once (``marker`` records the death, so the retry succeeds)."""

    k: int
    marker: str

    def __call__(self, k: int) -> None:
        if k == self.k and not Path(self.marker).exists():
            Path(self.marker).write_text(str(os.getpid()))
            os._exit(17)


@dataclass(frozen=True)
class SlowFrom:
    """A render job's ``before_commit``: chunks ``k >= first`` wait ``seconds`` before their done flag, so a Ctrl-C
    sent once an early chunk is done always finds later chunks in flight (a tiny render can otherwise finish first)."""

    first: int
    seconds: float

    def __call__(self, k: int) -> None:
        import time

        if k >= self.first:
            time.sleep(self.seconds)


def cli_with_hook(hook_source: str) -> list[str]:
    """argv of a Python that runs ``ident3d`` with every render job carrying ``hook_source`` (an expression over this
    module) as its ``before_commit``: the subprocess form of ``inject_before_commit``."""
    code = ("import sys; from dataclasses import replace; import helpers; from ident3d.render import api, driver; "
            f"hook = {hook_source}; "
            "api.run = lambda plan, **kw: driver.run(replace(plan, job=replace(plan.job, before_commit=hook)), **kw); "
            "from ident3d.pipelines.cli import main; sys.exit(main(sys.argv[1:]))")
    return [sys.executable, "-c", code]


@dataclass(frozen=True)
class FullDisk:
    """A render job's ``before_commit``: writing chunk ``k`` fails as a full disk would (ENOSPC)."""

    k: int

    def __call__(self, k: int) -> None:
        if k == self.k:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def inject_before_commit(monkeypatch, hook) -> None:
    """Every render this test starts (API or in-process CLI) carries ``hook`` as its job's ``before_commit``; the
    hook ships to the Dask workers with the job (they import it from this module: tests/ is on their path)."""
    from ident3d.render import api, driver

    def run(plan, **kwargs):
        return driver.run(replace(plan, job=replace(plan.job, before_commit=hook)), **kwargs)

    monkeypatch.setattr(api, "run", run)


def peak_mb(call):
    """``call()``'s result and the most memory (MB) Python and NumPy held during it (``tracemalloc``): a refusal
    made before the work allocates next to nothing, whatever else the machine is doing (a wall-clock bound fails on
    a busy machine, issue 42 §4)."""
    import tracemalloc

    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def assert_refused(r, *fragments):
    """A command refused as bad input: exit 2, one line on stderr holding every fragment, no traceback; the line."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


def copy_store(store, tmp_path, name: str = "damaged.zarr"):
    """A fresh copy of ``store`` under ``tmp_path`` (to damage without touching the shared one)."""
    import shutil

    out = tmp_path / name
    shutil.copytree(store, out)
    return out
