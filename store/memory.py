"""The one memory bound of every command that holds data in memory before it works: the caller estimates the bytes
it will hold (render workers, a render's chunk bookkeeping, a sequence rollout, a training step's view batch, a
dataset's images and canvases), :func:`check_fits` compares them with the memory available and refuses in one line
saying how much is needed, how much is available and which flags to lower, before anything is allocated or
written. Below ``render``, ``ingest`` and ``training``, which must not import each other for it."""

from __future__ import annotations

import os

from ident3d.causal.errors import UserError


def available_memory() -> int | None:
    """Bytes of memory available to new processes (MemAvailable on Linux, else free physical pages); None if
    unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def gb(nbytes: int) -> str:
    """A byte count as GB for messages, e.g. '1,248.4 GB'."""
    return f"{nbytes / 2**30:,.1f} GB"


def check_fits(need: int, what: str, advice: str, available: int | None = None) -> None:
    """Refuse work whose estimated ``need`` (bytes) exceeds the ``available`` memory (None: this machine's,
    :func:`available_memory`; unknown there: no check), in one line: "``what`` about N GB of memory but M GB is
    available; ``advice``", ``what`` ending in its verb ("... need") and ``advice`` naming the flags to lower."""
    have = available_memory() if available is None else available
    if have is not None and need > have:
        raise UserError(f"{what} about {gb(need)} of memory but {gb(have)} is available; {advice}")
