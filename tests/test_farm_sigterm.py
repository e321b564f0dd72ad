"""A farm started by hand (a ``dask scheduler`` and ``dask worker`` processes) that rendered stops cleanly on SIGTERM.

Each worker ran its render tasks, so imported bpy, in a task thread, and Blender's exit then ran in the process's
main thread at interpreter exit and segfaulted (see ``ident3d.render.bpy_module.exit_blender``). One worker runs under a
nanny (the ``dask worker`` command exited 0; the nanny logged "Worker process N was killed by signal 11") and one
with ``--no-nanny`` (the command itself exited -11), so both ways the crash surfaced are checked.
"""

import os
import signal
import subprocess
import sys
import time

from helpers import run_cli

CRASH_MARKS = ("signal 11", "status -11", "Segmentation fault")
STOP_TIMEOUT_S = 20.0


def _dask(args, log, tmp_path) -> subprocess.Popen:
    """``dask ARGS`` in its own process group (so cleanup reaches a nanny's worker too), output to ``log``."""
    env = dict(os.environ, PYTHONFAULTHANDLER="1")  # a crash also prints "Fatal Python error: Segmentation fault"
    with open(log, "w") as fh:
        return subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=fh, stderr=subprocess.STDOUT, env=env,
                                cwd=tmp_path, start_new_session=True)


def _stop(proc: subprocess.Popen) -> int:
    """SIGTERM, then the exit code; the whole process group is killed if it does not stop in time."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(f"dask pid {proc.pid} did not stop within {STOP_TIMEOUT_S} s of SIGTERM") from None


def _kill(proc: subprocess.Popen) -> None:
    """Kill a process group left running (cleanup after a failure)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wait_for(path, seconds: float = 30.0) -> None:
    """Until ``path`` exists (the scheduler wrote its file)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} not written within {seconds} s"
        time.sleep(0.1)


def _rendered_on_every_worker(client) -> None:
    """Both workers ran render tasks (imported bpy): the condition the crash needed."""
    imported = client.run(lambda: "bpy" in sys.modules)
    assert list(imported.values()) == [True, True], imported


def test_sigterm_stops_farm_workers_that_rendered_without_a_segfault(tmp_path):
    from dask.distributed import Client

    sched_file = tmp_path / "scheduler.json"
    common = ["--scheduler-file", str(sched_file), "--nthreads", "1", "--no-dashboard", "--local-directory",
              str(tmp_path / "scratch")]
    procs = [_dask(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file",
                    str(sched_file)], tmp_path / "scheduler.log", tmp_path)]
    logs = {"nanny": tmp_path / "worker-nanny.log", "no-nanny": tmp_path / "worker-no-nanny.log"}
    workers = {"nanny": _dask(["worker", *common, "--nworkers", "1"], logs["nanny"], tmp_path),
               "no-nanny": _dask(["worker", *common, "--no-nanny"], logs["no-nanny"], tmp_path)}
    procs += workers.values()
    try:
        _wait_for(sched_file)
        with Client(scheduler_file=str(sched_file), timeout=30) as client:
            client.wait_for_workers(2, timeout=30)
            r = run_cli("render", "--scene", "causal3dident", "--n", "8", "--chunk-size", "1", "--resolution", "16",
                        "--samples", "1", "--scheduler", client.scheduler.address, "--no-progress",
                        "--out", tmp_path / "s.zarr")
            assert r.returncode == 0, r.stderr
            _rendered_on_every_worker(client)
        codes = {name: _stop(proc) for name, proc in workers.items()}
        texts = {name: log.read_text() for name, log in logs.items()}
        seen = {name: (codes[name], [m for m in CRASH_MARKS if m in text]) for name, text in texts.items()}
        assert seen == {"nanny": (0, []), "no-nanny": (0, [])}, texts
        assert all("End worker" in text for text in texts.values()), texts
    finally:
        for proc in procs:
            _kill(proc)
