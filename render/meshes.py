"""Object meshes: procedural defaults (Utah teapot, Blender primitives) and user mesh files, normalised in size.

Loading and normalising need Blender, but bpy is imported lazily so that importing this module stays cheap;
finding a folder's per-class files (:func:`find_class_meshes`), hashing and writing test meshes need no bpy. The
shapes of ``builtin:<shape>`` are registered in ``BUILTIN_MESHES`` (``ident3d.render.builtin_meshes``), the file
formats by suffix in ``MESH_FORMATS`` (``ident3d.render.mesh_formats``).

Conventions for a mesh file (all formats, ``--meshes`` and ``--meshes-dir`` alike):

- **Up axis**: exchange formats (.obj, .ply, .stl, .gltf, .glb) are read as **+Y up, -Z forward** (the OBJ and
  glTF convention, and the Stanford scans' and Keenan Crane's "spot"'s) and turned into Blender's +Z up; a
  .blend is Blender's own +Z up and taken as it is (its first mesh object, with its object transform). A Z-up
  PLY/STL therefore lies on its side: re-export it Y-up or save it as .blend.
- **Size and pivot**: like the stand-ins, scaled so the largest side of its bounding box is the scene's
  ``extent`` (4.442 for Causal3DIdent) and pivoting about its bounding-box centre, with no resting yaw.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.render.builtin_meshes import BUILTIN_MESHES
from ident3d.render.mesh_formats import MESH_FORMATS, MeshFormat, MeshLoadError, writable_suffixes

if TYPE_CHECKING:
    import bpy

# The one alias table of --meshes-dir: file names (stems, lower case, '-'/' ' read as '_') that stand for a
# Causal3DIdent class besides the class's own name. Any stem may also carry Multimodal3DIdent's "Shape" prefix
# (assets/shapes/ShapeCow.blend). bun_zipper and dragon_vrip are the Stanford repository's own file names.
MESH_ALIASES: dict[str, tuple[str, ...]] = {
    "Teapot": ("utah_teapot",),
    "Hare": ("bunny", "stanford_bunny", "bun_zipper"),
    "Dragon": ("stanford_dragon", "dragon_vrip"),
    "Cow": ("spot",),  # Keenan Crane's cow
}


class MeshFileError(FileNotFoundError, UserError):
    """A class's mesh file is missing (one-line message naming the class and the path)."""


def builtin_mesh(shape: str, name: str | None = None) -> bpy.types.Mesh:
    """A procedural mesh: 'teapot' (Bezier patches) or a Blender primitive shape (see BUILTIN_MESHES)."""
    if shape not in BUILTIN_MESHES:
        raise UserError(f"unknown built-in mesh {shape!r}; choose one of {', '.join(BUILTIN_MESHES)} or a file path")
    return BUILTIN_MESHES.get(shape)().mesh(name or shape)


def mesh_format(path: Path) -> MeshFormat:
    """The format of a mesh file by its suffix (any case; it must be one of MESH_FORMATS)."""
    return MESH_FORMATS.get(path.suffix.lower())()


def _check_file(path: Path, class_name: str) -> None:
    """Raise MeshFileError / MeshLoadError for a missing file or an unsupported format."""
    if not path.is_file():
        raise MeshFileError(f"class {class_name}: mesh file {path} not found")
    if path.suffix.lower() not in MESH_FORMATS:
        known = ", ".join(MESH_FORMATS)
        raise MeshLoadError(f"class {class_name}: {path} is not a mesh file of a known type ({known})")


def sniff_mesh(path: str | Path, class_name: str = "?") -> None:
    """Cheap format check of a class's mesh file, without Blender: raise a one-line MeshFileError/MeshLoadError
    naming the class and file when it is missing or plainly not a mesh of its suffix's format.

    Run by the driver before any store is created, so a bad file fails once, up front, instead of in every
    render worker. It reads the first 64 KiB (an OBJ file is scanned line by line up to its first vertex).
    """
    path = Path(path).expanduser()
    _check_file(path, class_name)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(65536)
    problem = "the file is empty" if size == 0 else mesh_format(path).problem(head, size, path)
    if problem:
        raise MeshLoadError(f"class {class_name}: {path} is not a valid {path.suffix.lower()[1:].upper()} mesh "
                            f"({problem}); give a real mesh file for this class")


def _world_matrix(obj: bpy.types.Object):
    """World matrix from the parent chain (objects loaded from a .blend are in no scene, so never evaluated)."""
    basis = obj.matrix_basis.copy()
    if obj.parent is None:
        return basis
    return _world_matrix(obj.parent) @ obj.matrix_parent_inverse @ basis


def load_mesh(path: str | Path, class_name: str = "?") -> bpy.types.Mesh:
    """Import a mesh file (OBJ/PLY/STL/glTF, or the first mesh object of a .blend) as one world-space mesh."""
    from ident3d.render.bpy_module import bpy  # isort: skip (before bmesh)
    import bmesh

    path = Path(path).expanduser()
    _check_file(path, class_name)
    fmt = mesh_format(path)
    objects = fmt.import_objects(path)
    mesh_objects = [o for o in objects if o.type == "MESH"]
    if fmt.first_mesh_only:
        mesh_objects = mesh_objects[:1]
    if not mesh_objects:
        raise MeshLoadError(f"class {class_name}: {path} holds no mesh object")
    bm = bmesh.new()
    for obj in mesh_objects:
        tmp = obj.data.copy()
        tmp.transform(_world_matrix(obj))
        bm.from_mesh(tmp)
        bpy.data.meshes.remove(tmp)
    mesh = bpy.data.meshes.new(f"{class_name}_{path.stem}")
    bm.to_mesh(mesh)
    bm.free()
    old_meshes = {o.data for o in mesh_objects}
    for obj in objects:
        bpy.data.objects.remove(obj, do_unlink=True)
    for m in old_meshes:
        if m.users == 0:
            bpy.data.meshes.remove(m)
    return mesh


def normalise(
    mesh: bpy.types.Mesh,
    extent: float,
    pivot: str | Sequence[float | str] = "bbox_centre",
    yaw_deg: float = 0.0,
) -> float:
    """Scale the mesh so its bounding box's largest side is ``extent``, move its ``pivot`` to the origin (see
    render.scene.ObjectClass), then turn it by ``yaw_deg`` about z; return the scale factor."""
    n = len(mesh.vertices)
    if n == 0:
        raise MeshLoadError(f"mesh {mesh.name} has no vertices")
    co = np.empty(n * 3, dtype=np.float64)
    mesh.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    lo, hi = co.min(0), co.max(0)
    size = float((hi - lo).max())
    if size <= 0:
        raise MeshLoadError(f"mesh {mesh.name} is degenerate (zero size)")
    factor = extent / size
    centre = (lo + hi) / 2
    co = (co - centre) * factor - pivot_offset(pivot, centre, factor)
    co = co @ yaw_matrix(yaw_deg).T
    mesh.vertices.foreach_set("co", co.reshape(-1).astype(np.float32))
    mesh.update()
    return factor


def pivot_offset(pivot: str | Sequence[float | str], centre: np.ndarray, factor: float) -> np.ndarray:
    """The pivot relative to the bounding-box centre, in normalised units ('mesh_origin': the source's origin)."""
    if isinstance(pivot, str):
        if pivot != "bbox_centre":
            raise UserError(f"pivot {pivot!r} is not 'bbox_centre' or 3 entries")
        return np.zeros(3)
    return np.array([-centre[i] * factor if v == "mesh_origin" else float(v) for i, v in enumerate(pivot)])


def yaw_matrix(yaw_deg: float) -> np.ndarray:
    """3x3 rotation by ``yaw_deg`` about +z (counter-clockwise seen from above)."""
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def class_mesh(
    source: str,
    class_name: str,
    extent: float,
    yaw_deg: float = 0.0,
    pivot: str | Sequence[float | str] = "bbox_centre",
) -> bpy.types.Mesh:
    """The normalised mesh for one class: ``source`` is 'builtin:<shape>' or a mesh file path (see normalise)."""
    if source.startswith("builtin:"):
        mesh = builtin_mesh(source.split(":", 1)[1], class_name)
    else:
        mesh = load_mesh(source, class_name)
    try:
        normalise(mesh, extent, pivot, yaw_deg)
    except MeshLoadError as exc:  # name the class and its source besides Blender's mesh name
        raise MeshLoadError(f"class {class_name}: {source}: {exc}") from None
    if len(mesh.polygons) == 0:
        raise MeshLoadError(f"class {class_name}: {source} has no faces (a point cloud or loose vertices only); "
                            "give a surface mesh")
    smooth = not (source.startswith("builtin:") and BUILTIN_MESHES.get(source.split(":", 1)[1]).flat)
    mesh.polygons.foreach_set("use_smooth", [smooth] * len(mesh.polygons))
    return mesh


# ----- a folder of per-class mesh files (--meshes-dir); no bpy ------------------------------------------------
@dataclass(frozen=True)
class MeshFolder:
    """What a meshes folder gives a scene: ``found`` {class: absolute path}, the classes left with their
    stand-in (``standins``) and the mesh files that name no class (``ignored``, file names)."""

    folder: str
    found: dict[str, str]
    standins: tuple[str, ...]
    ignored: tuple[str, ...]


def mesh_stem(file_name: str) -> str:
    """A file name as it is matched against class names: its stem in lower case, '-' and ' ' read as '_'."""
    return Path(file_name).stem.lower().replace("-", "_").replace(" ", "_")


def class_for_file(file_name: str, class_names: Sequence[str]) -> str | None:
    """The class a mesh file is for: its stem is a class name (any case) or one of the class's MESH_ALIASES,
    optionally after a 'Shape' prefix (Multimodal3DIdent's ShapeCow.blend); None when it names no class."""
    keys = {alias: c for c in class_names for alias in (c.lower(), *MESH_ALIASES.get(c, ()))}
    stem = mesh_stem(file_name)
    for candidate in (stem, stem.removeprefix("shape").lstrip("_")):
        if candidate in keys:
            return keys[candidate]
    return None


def _mesh_files(folder: Path) -> list[Path]:
    """The mesh files (known suffixes, any case) directly inside ``folder``, sorted by name; one-line errors for
    a missing folder, a file given as the folder, or a folder without mesh files."""
    if not folder.exists():
        raise MeshFileError(f"meshes dir {folder} not found; give a folder of per-class mesh files")
    if not folder.is_dir():
        raise MeshFileError(f"meshes dir {folder} is a file, not a folder of per-class mesh files")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in MESH_FORMATS)
    if not files:
        raise MeshFileError(f"meshes dir {folder} holds no mesh files ({', '.join(MESH_FORMATS)}); "
                            "put e.g. hare.obj or bunny.ply there")
    return files


def find_class_meshes(folder: str | Path, class_names: Sequence[str]) -> MeshFolder:
    """Match the mesh files in ``folder`` to classes by file name (see :func:`class_for_file`); paths come back
    absolute (they go to the store and to remote workers). Two files for one class, or none for any class, is a
    one-line UserError; files naming no class are listed in ``ignored``."""
    if not str(folder).strip():
        raise MeshFileError("meshes dir is empty (''); give a folder of per-class mesh files")
    root = Path(folder).expanduser().resolve()
    found: dict[str, Path] = {}
    ignored: list[str] = []
    for path in _mesh_files(root):
        cls = class_for_file(path.name, class_names)
        if cls is None:
            ignored.append(path.name)
        elif cls in found:
            raise UserError(f"meshes dir {root}: both {found[cls].name} and {path.name} are meshes for class "
                            f"{cls}; keep one")
        else:
            found[cls] = path
    if not found:
        raise UserError(f"meshes dir {root}: no file names a class of the scene ({', '.join(class_names)}); "
                        f"name each file after its class, e.g. {class_names[-1].lower()}.obj (aliases: "
                        f"{_alias_text(class_names)})")
    return MeshFolder(str(root), {c: str(p) for c, p in found.items()},
                      tuple(c for c in class_names if c not in found), tuple(ignored))


def _alias_text(class_names: Sequence[str]) -> str:
    """The aliases of these classes in words, e.g. 'Hare: bunny, stanford_bunny; Cow: spot'."""
    return "; ".join(f"{c}: {', '.join(MESH_ALIASES[c])}" for c in class_names if c in MESH_ALIASES) or "none"


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes (read in 1 MiB blocks: scans can be large), recorded per class in a store."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(2**20), b""):
            h.update(block)
    return h.hexdigest()


def write_mesh(path: str | Path, verts: np.ndarray, faces: np.ndarray) -> Path:
    """Write a triangle mesh (vertices (V, 3), faces (F, 3), 0-based) as OBJ, ASCII PLY or binary STL by the
    suffix, without Blender: small generated meshes for tests and galleries. Coordinates are written as given
    (the file's frame, read back +Y up)."""
    path = Path(path)
    verts, faces = np.asarray(verts, dtype=np.float64), np.asarray(faces, dtype=np.int64)
    if path.suffix.lower() not in writable_suffixes():
        *most, last = writable_suffixes()
        raise UserError(f"write_mesh writes {', '.join(most)} or {last}, not {path.name}")
    mesh_format(path).write(path, verts, faces)
    return path
