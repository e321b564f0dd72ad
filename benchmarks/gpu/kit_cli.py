"""Run the ``ident3d`` command in a child process the way the GPU kit needs it: from the pack's installed wheels
(their folder first on ``PYTHONPATH``), in a folder of its own (not the checkout, whose ``ident3d/`` would shadow the
wheel), with a time limit that ends its whole process group, its output kept in a log. Standard library only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# the installed distribution's console script, found through its entry point: a wheel unpacked without pip has no
# bin/ident3d, and naming the module it points to here would tie the kit to the CLI's layout
ENTRY = ("import sys; from importlib.metadata import entry_points; sys.argv[0] = 'ident3d'; "
         "sys.exit(entry_points(group='console_scripts')['ident3d'].load()())")
def child_env(paths: Sequence[Path]) -> dict[str, str]:
    """This process's environment with ``paths`` first on PYTHONPATH and unbuffered output."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_ident3d(args: Sequence[str], log: Path, paths: Sequence[Path], timeout_s: float) -> tuple[int | None, float]:
    """Run ``ident3d ARGS`` with ``paths`` first on PYTHONPATH, output to ``log``; returns (exit code, seconds), the
    code None when it ran past ``timeout_s`` and was ended (SIGTERM, then SIGKILL after 10 s)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    cwd = log.parent / "cwd"
    cwd.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", ENTRY, *args], stdout=out, stderr=subprocess.STDOUT,
                                cwd=cwd, env=child_env(paths), start_new_session=True)
        try:
            return proc.wait(timeout=max(1.0, timeout_s)), time.perf_counter() - t0
        except subprocess.TimeoutExpired:
            _end(proc)
            return None, time.perf_counter() - t0


def _end(proc: subprocess.Popen) -> None:
    """End the child's process group (it started one of its own), politely first."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def tail(log: Path, lines: int = 20) -> list[str]:
    """The last ``lines`` lines of a log (progress bars' carriage returns cut to their last state)."""
    if not log.is_file():
        return []
    text = log.read_text(errors="replace").splitlines()
    return [line.rsplit("\r", 1)[-1] for line in text[-lines:]]
