"""Given latents: read them from .csv/.npy/.npz files or arrays, check them against an SCM, fingerprint them.

Used by ``render_store(latents=...)`` and ``ident3d render --latents FILE`` to render chosen rows instead
of sampled ones. Every problem is one ``UserError`` line naming the column, key or row at fault; values outside
the range the SCM documents for their latent (its nodes' ``range:``, what a store's latents are) and rows outside
the SCM's support (``ident3d.causal.support``) are refused. What ``ident3d sample`` writes is read back as it is.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ident3d.causal import SCM, Samples
from ident3d.causal.errors import UserError
from ident3d.causal.support import support_breach

SUFFIXES = (".csv", ".npy", ".npz")
INDEX_COLUMN = "index"  # the row-id column `ident3d sample` writes; accepted and ignored (file order is kept)
NPZ_KEYS = {"latents", "classes", "names", "class_names", "index", "present"}  # `ident3d sample`'s .npz keys
MAGIC = {".npy": (b"\x93NUMPY", "numpy.save"), ".npz": (b"PK\x03\x04", "numpy.savez")}  # how each file starts
RANGE_SLACK = 1e-6  # float32 rounding of a value on a range's edge is not outside it

# {latent: (low, high)} and what the ranges are, for the message (default: the SCM's node ranges)
Ranges = tuple[dict[str, tuple[float, float]], str]


@dataclass(frozen=True)
class GivenLatents:
    """Rows to render: ``latents`` (N x D float32, SCM column order), ``classes`` (N int64 or None), their source."""

    latents: np.ndarray
    classes: np.ndarray | None
    source: str

    def __len__(self) -> int:
        return int(self.latents.shape[0])

    def sha256(self) -> str:
        """Digest of the exact bytes the store will hold (shape, float32 latents, int64 classes)."""
        h = hashlib.sha256(repr(self.latents.shape).encode())
        h.update(np.ascontiguousarray(self.latents, dtype="<f4").tobytes())
        if self.classes is not None:
            h.update(np.ascontiguousarray(self.classes, dtype="<i8").tobytes())
        return h.hexdigest()


def given_latents(latents: str | Path | np.ndarray | Samples, classes: np.ndarray | None, scm: SCM) -> GivenLatents:
    """Latents from a file path, an (N, D) array (+ ``classes``) or a ``causal.Samples``, checked against ``scm``."""
    if isinstance(latents, Samples):
        if classes is not None:
            raise UserError("classes= is taken from the Samples given as latents=; do not pass both")
        if list(latents.names) != list(scm.names):
            raise UserError(f"the given Samples have latents {latents.names} but SCM {scm.name} has {scm.names}")
        return replace(checked_rows(latents.latents, latents.classes, scm, "the given Samples", latents.present),
                       source="Samples")
    if isinstance(latents, str | Path):
        if classes is not None:
            raise UserError("classes= goes with a latents array; a latents file holds its own classes")
        return read_latents(latents, scm)
    return replace(checked_rows(latents, classes, scm, "the given latents"), source="array")


def checked_rows(latents: object, classes: object, scm: SCM, source: str, present: object = None) -> GivenLatents:
    """Rows to render, checked as :func:`check` does and against the SCM's support (``ident3d.causal.support``: category
    indices, Bernoulli 0/1, object plates' presence rules), and ``present`` (N x K, as ``ident3d sample`` writes it
    beside a multi-object SCM's rows) against the rows' presence columns; each problem one line naming the row."""
    given = check(latents, classes, scm, source)
    breach = support_breach(scm, given.latents)
    if breach is not None:
        raise UserError(f"{source}: {breach}; give rows the SCM can sample")
    if present is not None:
        _check_present(present, given, scm, source)
    return given


def _check_present(present: object, given: GivenLatents, scm: SCM, source: str) -> None:
    """``present``, the (N, K) object flags written beside the rows, says what their present_k columns say."""
    if scm.plates is None:
        raise UserError(f"{source}: 'present' (object flags) given but SCM {scm.name} has no object plates")
    flags = np.asarray(present)
    k = scm.plates.slots
    if flags.shape != (len(given), k) or flags.dtype.kind not in "biu":
        raise UserError(f"{source}: 'present' must be {len(given)} x {k} object flags, got {flags.dtype} "
                        f"{flags.shape}")
    cols = [scm.names.index(name) for name in scm.plates.present]
    differ = (flags != 0) != (given.latents[:, cols] == 1)
    if differ.any():
        i, j = (int(v) for v in np.argwhere(differ)[0])
        raise UserError(f"{source}: row {i}'s 'present' says slot {j} is {'full' if flags[i, j] else 'empty'} but its "
                        f"{scm.plates.present[j]} is {given.latents[i, cols[j]]:g}; give one or the other")


def read_latents(path: str | Path, scm: SCM) -> GivenLatents:
    """Read a .csv (header of names, any column order), .npy (N x D) or .npz (``latents``, ``classes``) file."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise UserError(f"latents file {path}: use a .csv, .npy or .npz file")
    if not path.is_file():
        raise UserError(f"latents file {path} not found")
    try:
        if path.suffix.lower() == ".csv":
            return _read_csv(path, scm)
        return _read_numpy(path, scm)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader error (corrupt file, bad encoding) becomes one line
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"cannot read latents file {path}: {why}") from None


def check(latents: object, classes: object, scm: SCM, source: str, documented: Ranges | None = None) -> GivenLatents:
    """Validate shapes, finiteness, ranges and class indices; returns float32 latents and int64 classes.
    ``documented``: the ranges to hold the values to (default: the SCM's node ranges; unbounded nodes are not
    checked)."""
    try:
        x = np.asarray(latents, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(f"{source}: latents must be numbers (an N x D array)") from None
    d = len(scm.names)
    if x.ndim != 2 or x.shape[1] != d:
        raise UserError(f"{source}: latents must have shape (N, {d}) for SCM {scm.name} ({', '.join(scm.names)}), "
                        f"got {x.shape}")
    if x.shape[0] == 0:
        raise UserError(f"{source}: no rows")
    bad = ~np.isfinite(x)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise UserError(f"{source}: row {i} has a non-finite value ({x[i, j]}) in {scm.names[j]}")
    _check_ranges(x, scm, source, documented)
    k = _check_classes(classes, scm, x.shape[0], source)
    return GivenLatents(x.astype(np.float32), k, source)


def _check_ranges(x: np.ndarray, scm: SCM, source: str, documented: Ranges | None) -> None:
    """The first value outside its latent's range is one line naming the row, the column and the range."""
    ranges, what = documented or ({n: scm.nodes[n].range for n in scm.names if scm.nodes[n].range},
                                  f"its range in SCM {scm.name}")
    for j, name in enumerate(scm.names):
        if name not in ranges:
            continue
        lo, hi = ranges[name]
        slack = RANGE_SLACK * max(1.0, abs(lo), abs(hi))
        out = (x[:, j] < lo - slack) | (x[:, j] > hi + slack)
        if out.any():
            i = int(np.flatnonzero(out)[0])
            raise UserError(f"{source}: row {i} has {name} = {x[i, j]:g}, outside {what}, [{lo:g}, {hi:g}]; "
                            "give values in that range")


def load_numpy(path: Path, where: str) -> object:
    """``np.load`` of a .npy/.npz file (no pickles); a file that is not one (a text table, say) is one line saying
    what it is instead of numpy's "Cannot load file containing pickled data"."""
    suffix = path.suffix.lower()
    magic, writer = MAGIC.get(suffix, MAGIC[".npy"])
    with path.open("rb") as fh:
        head = fh.read(64)
    if not head.startswith(magic):
        first = head.split(b"\n")[0][:40]
        text = first.decode("ascii", "replace") if first.isascii() and first.strip() else ""
        what = f"a text file starting {text!r}" if text else "not in numpy's format"
        hint = "; a table of latents goes in a .csv file with a header of names" if text else ""
        raise UserError(f"cannot read {where}: not a NumPy {suffix} file ({what}); write it with {writer}{hint}")
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - a truncated or corrupt numpy file becomes one line
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"cannot read {where}: a damaged NumPy {suffix} file ({why}); write it again") from None


def _check_classes(classes: object, scm: SCM, n: int, source: str) -> np.ndarray | None:
    if scm.class_node is None:
        if classes is not None:
            raise UserError(f"{source}: classes given but SCM {scm.name} has no class node")
        return None
    if classes is None:
        raise UserError(f"{source}: SCM {scm.name} needs a class per row ({scm.class_node}: "
                        f"{', '.join(scm.class_names or [])}); give classes")
    raw = np.asarray(classes)
    if raw.shape != (n,):
        raise UserError(f"{source}: classes must have shape ({n},), got {raw.shape}")
    if raw.dtype.kind in "US":
        raw = np.array([_class_index(str(v), scm, source, i) for i, v in enumerate(raw)])
    if raw.dtype.kind not in "iu" and not (raw.dtype.kind == "f" and np.all(raw == np.round(raw))):
        raise UserError(f"{source}: classes must be class indices or names")
    k = raw.astype(np.int64)
    out = (k < 0) | (k >= len(scm.class_names or []))
    if out.any():
        i = int(np.flatnonzero(out)[0])
        raise UserError(f"{source}: row {i} has class {k[i]}, outside 0..{len(scm.class_names or []) - 1}")
    return k


def _class_index(value: str, scm: SCM, source: str, row: int) -> int:
    """A class given as its name or its index (as text)."""
    names = scm.class_names or []
    if value in names:
        return names.index(value)
    try:
        return int(value)
    except ValueError:
        raise UserError(f"{source}: row {row} has unknown class {value!r}; classes: {', '.join(names)}") from None


def _read_csv(path: Path, scm: SCM) -> GivenLatents:
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise UserError(f"latents file {path} is empty; it needs a header of latent names")
    header = [h.strip() for h in rows[0]]
    wanted = list(scm.names) + ([scm.class_node] if scm.class_node else [])
    for name in header:
        if header.count(name) > 1:
            raise UserError(f"latents file {path}: column {name!r} appears twice")
        if name not in wanted and name != INDEX_COLUMN:
            raise UserError(f"latents file {path}: unknown column {name!r}; SCM {scm.name} has {', '.join(wanted)}")
    for name in wanted:
        if name not in header:
            raise UserError(f"latents file {path}: missing column {name!r}")
    body = rows[1:]
    cols = [header.index(n) for n in scm.names]
    x = np.empty((len(body), len(cols)), dtype=np.float64)
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise UserError(f"latents file {path}: row {i} (line {i + 2}) has {len(row)} values, "
                            f"the header has {len(header)}")
        for j, c in enumerate(cols):
            try:
                x[i, j] = float(row[c])
            except ValueError:
                raise UserError(f"latents file {path}: row {i} (line {i + 2}) has {row[c]!r} in {scm.names[j]}, "
                                "not a number") from None
    classes = None
    if scm.class_node:
        c = header.index(scm.class_node)
        classes = np.array([_class_index(row[c].strip(), scm, f"latents file {path}", i) for i, row in enumerate(body)])
    return replace(checked_rows(x, classes, scm, f"latents file {path}"), source=path.name)


def _read_numpy(path: Path, scm: SCM) -> GivenLatents:
    where = f"latents file {path}"
    data = load_numpy(path, where)
    if path.suffix.lower() == ".npy":
        if scm.class_node is not None:
            raise UserError(f"{where} holds no classes but SCM {scm.name} has a class node ({scm.class_node}); "
                            "use a .npz with 'latents' and 'classes', or a .csv with a class column")
        return replace(checked_rows(data, None, scm, where), source=path.name)
    with data:
        keys = set(data.files)
        if unknown := sorted(keys - NPZ_KEYS):
            raise UserError(f"{where}: unknown key {unknown[0]!r}; expected 'latents' and optional 'classes' "
                            "(and what `ident3d sample` writes: names, class_names, index, present)")
        if "latents" not in keys:
            raise UserError(f"{where}: no 'latents' array (keys: {', '.join(sorted(keys)) or 'none'})")
        if "names" in keys and [str(v) for v in data["names"]] != list(scm.names):
            raise UserError(f"{where}: its names {[str(v) for v in data['names']]} are not SCM {scm.name}'s "
                            f"latents {scm.names}")
        if "class_names" in keys and [str(v) for v in data["class_names"]] != list(scm.class_names or []):
            raise UserError(f"{where}: its class_names are not SCM {scm.name}'s classes {scm.class_names}")
        latents, classes = data["latents"], data["classes"] if "classes" in keys else None
        present = data["present"] if "present" in keys else None
    return replace(checked_rows(latents, classes, scm, where, present), source=path.name)
