"""The GPU kit's pack format, shared by the packer (here) and the runner (on the GPU machine): the manifest, file
hashes, Zarr stores as deterministic tar streams cut into parts, and the plan of which parts travel in which carry.
Standard library only: the runner reads it before anything is installed.

A pack folder holds ``manifest.json``, ``core/*.whl`` (ident3d and what the GPU image lacks), ``optional/*.whl``
(what it may lack) and ``data/NAME.tar.NNN`` (the parts of store NAME)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
FORMAT = 1
MIB = 1 << 20
PART_MIB = 50.0  # a carry holds at most 64 MiB with the working tree (~7.3 MiB): 50 MiB of pack per command
MAX_CARRY_PATHS = 8  # the device tool's limit of paths per call
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class KitError(Exception):
    """A problem the user can fix, said in one line (the command exits 2, no traceback)."""


def sha256(path: Path) -> str:
    """The file's sha256, read in 1 MiB blocks (a 50 MiB part is never held whole)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            h.update(block)
    return h.hexdigest()


def check_name(name: str, what: str = "data name") -> str:
    """A data name is a plain file name (letters, digits, ``_ . -``): it names the tar parts and travels as a path."""
    if not NAME.fullmatch(name):
        raise KitError(f"{what} {name!r} must be letters, digits, '_', '.' or '-' (e.g. throughput64, "
                       "paper001_3dident.train)")
    return name


def part_entry(pack: Path, path: Path, group: str, **extra: Any) -> dict[str, Any]:
    """The manifest entry of one file of the pack: its path in the pack, group, size and sha256."""
    return {"path": path.relative_to(pack).as_posix(), "group": group, "size": path.stat().st_size,
            "sha256": sha256(path), **extra}


class _PartWriter(io.RawIOBase):
    """A write-only stream that cuts what is written into files ``STEM.000``, ``STEM.001``, ... of at most
    ``part_bytes`` each: a tar stream becomes parts that each fit a carry."""

    def __init__(self, stem: Path, part_bytes: int) -> None:
        """Parts ``STEM.000``, ... of ``part_bytes`` each; none is opened before the first write."""
        self.stem, self.part_bytes, self.paths = stem, part_bytes, []
        self._file: Any = None
        self._left = 0

    def writable(self) -> bool:
        """A write-only stream (what tarfile asks)."""
        return True

    def write(self, data: Any) -> int:
        """Write all of ``data``, starting the next part wherever the current one is full."""
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            if self._left == 0:
                self._next()
            n = min(self._left, len(view) - done)
            self._file.write(view[done:done + n])
            self._left -= n
            done += n
        return done

    def _next(self) -> None:
        """Close the current part and open the next."""
        if self._file is not None:
            self._file.close()
        path = self.stem.with_name(f"{self.stem.name}.{len(self.paths):03d}")
        self.paths.append(path)
        self._file, self._left = path.open("wb"), self.part_bytes

    def close(self) -> None:
        """Close the last part."""
        if self._file is not None:
            self._file.close()
            self._file = None
        super().close()


class _PartReader(io.RawIOBase):
    """A read-only stream over parts in order: they read as the one tar stream they were cut from."""

    def __init__(self, paths: list[Path]) -> None:
        """Read ``paths`` one after another; each is opened when the one before is used up."""
        self._paths, self._file = list(paths), None

    def readable(self) -> bool:
        """A read-only stream (what tarfile asks)."""
        return True

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` from the current part, going on to the next at its end; 0 after the last."""
        while True:
            if self._file is None:
                if not self._paths:
                    return 0
                self._file = self._paths.pop(0).open("rb")
            n = self._file.readinto(buffer)
            if n:
                return n
            self._file.close()
            self._file = None

    def close(self) -> None:
        """Close the part being read."""
        if self._file is not None:
            self._file.close()
        super().close()


def _reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """The same tar bytes for the same files wherever and whenever they are packed: no times, owners or modes."""
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    info.mode = 0o755 if info.isdir() else 0o644
    return info


def tar_parts(store: Path, stem: Path, part_mib: float = PART_MIB) -> list[Path]:
    """Write the folder ``store`` as an uncompressed tar stream (Zarr chunks are compressed already) cut into parts
    ``STEM.tar.000``, ... of at most ``part_mib`` MiB; the members are in sorted order, relative to the folder."""
    if part_mib <= 0:
        raise KitError(f"--part-mib must be > 0, got {part_mib}")
    stem.parent.mkdir(parents=True, exist_ok=True)
    writer = _PartWriter(stem.with_name(stem.name + ".tar"), max(1, int(part_mib * MIB)))
    with writer, tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(store.rglob("*")):
            if path.is_file() or path.is_dir():
                tar.add(path, arcname=path.relative_to(store).as_posix(), recursive=False, filter=_reset)
    return writer.paths


def untar_parts(parts: list[Path], dest: Path) -> None:
    """Unpack the tar stream that ``parts`` were cut from into ``dest`` (members may not leave it); a stream that is
    not a whole tar (empty or cut-off parts) is one line."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with _PartReader(parts) as reader, tarfile.open(fileobj=reader, mode="r|") as tar:
            tar.extractall(dest, filter="data")
    except tarfile.TarError as exc:
        raise KitError(f"the parts {parts[0].name}... do not unpack as one tar stream ({exc}); build the pack again "
                       "with pack.py and carry it") from None


def plan_carries(items: Iterable[tuple[str, int]], limit_mib: float = PART_MIB,
                 max_paths: int = MAX_CARRY_PATHS) -> list[list[str]]:
    """Group the pack's items (path in the pack, bytes) into carries of at most ``limit_mib`` MiB and
    ``max_paths`` paths, in order, each item in the first carry it fits; every carry also names the manifest (each
    device call then checks the pack on its own). An item larger than the limit gets a carry to itself."""
    carries: list[list[str]] = []
    used: list[int] = []
    limit = int(limit_mib * MIB)
    for path, size in items:
        for i, paths in enumerate(carries):
            if used[i] + size <= limit and len(paths) < max_paths:
                paths.append(path)
                used[i] += size
                break
        else:
            carries.append([MANIFEST, path])
            used.append(size)
    return carries or [[MANIFEST]]


def write_manifest(pack: Path, manifest: dict[str, Any]) -> Path:
    """Write ``manifest.json`` (through a temporary file: a reader never sees half of it)."""
    tmp = pack / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(pack / MANIFEST)
    return pack / MANIFEST


def read_manifest(pack: Path) -> dict[str, Any]:
    """The pack's manifest, or one line saying why there is none to read."""
    path = pack / MANIFEST
    if not path.is_file():
        raise KitError(f"{pack} is not a GPU-kit pack: it has no {MANIFEST} (build one with "
                       "python benchmarks/gpu/pack.py, or carry it)")
    try:
        manifest = json.loads(path.read_text())
    except ValueError as exc:
        raise KitError(f"{path} is damaged: not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("parts"),
                                                                                               list):
        raise KitError(f"{path} is not a format-{FORMAT} GPU-kit manifest")
    return manifest


def data_parts(manifest: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The manifest entries of data ``name``'s parts, in order."""
    return [p for p in manifest["parts"] if p["group"] == f"data:{name}"]


def data_names(manifest: dict[str, Any]) -> list[str]:
    """The names of the pack's data, in the order they were packed."""
    return list(dict.fromkeys(p["group"][5:] for p in manifest["parts"] if p["group"].startswith("data:")))


def mib(n: float) -> str:
    """Bytes as MiB with one decimal."""
    return f"{n / MIB:.1f} MiB"
