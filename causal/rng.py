"""Counter-based random numbers: the draw for row i depends only on (seed, stream, i).

This is what makes sampling split-invariant: rendering workers that each sample their own
range of rows get exactly the values one big call would have produced.
"""

from __future__ import annotations

import zlib

import numpy as np

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix_int(x: int) -> int:
    """SplitMix64 finaliser on a Python int (for scalar keys, no overflow warnings)."""
    x &= _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, vectorised over a uint64 array (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def stream_key(seed: int, *labels: str | int) -> int:
    """A 64-bit key for one named stream (e.g. node name + purpose) under a seed."""
    key = _mix_int(int(seed) * _GOLDEN + 0x1D3)
    for label in labels:
        code = zlib.crc32(label.encode()) if isinstance(label, str) else int(label)
        key = _mix_int(key ^ _mix_int(code + _GOLDEN))
    return key


def uniforms(key: int, index: np.ndarray) -> np.ndarray:
    """Uniform draws in the open interval (0, 1), one per row index, for a stream key."""
    idx = np.asarray(index, dtype=np.uint64)
    h = _mix(idx * np.uint64(_GOLDEN) + np.uint64(key))
    h = _mix(h ^ np.uint64(_mix_int(key + 1)))
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / (1 << 53))
