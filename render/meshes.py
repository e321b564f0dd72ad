"""Object meshes: procedural defaults (Utah teapot, Blender primitives) and user mesh files, normalised in size.

Loading and normalising need Blender, but bpy is imported lazily so that importing this module stays cheap;
finding a folder's per-class files (:func:`find_class_meshes`), hashing and writing test meshes need no bpy.

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
from ident3d.render.teapot import teapot_mesh

if TYPE_CHECKING:
    import bpy

BUILTIN_MESHES = ("teapot", "monkey", "torus", "cone", "icosphere", "cylinder", "cube")
FLAT_SHADED = ("builtin:cone", "builtin:cylinder", "builtin:icosphere", "builtin:cube")  # hard edges, no smoothing
MESH_SUFFIXES = (".obj", ".ply", ".stl", ".gltf", ".glb", ".blend")
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


class MeshLoadError(UserError):
    """A mesh file exists but could not be imported."""


def _mesh_from_arrays(name: str, verts: np.ndarray, faces: np.ndarray) -> bpy.types.Mesh:
    """A Blender mesh from vertex (V, 3) and triangle (F, 3) arrays, normals made consistent, smooth shaded."""
    from ident3d.render.bpy_module import bpy  # isort: skip (before bmesh)
    import bmesh

    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts.tolist(), [], faces.tolist())
    bm = bmesh.new()
    bm.from_mesh(mesh)
    bmesh.ops.recalc_face_normals(bm, faces=bm.faces)
    bm.to_mesh(mesh)
    bm.free()
    return mesh


def _torus(major: float = 1.0, minor: float = 0.4, n_major: int = 48, n_minor: int = 24) -> tuple:
    """Torus vertices and quads split into triangles (bmesh has no torus op)."""
    u = np.linspace(0.0, 2 * math.pi, n_major, endpoint=False)
    v = np.linspace(0.0, 2 * math.pi, n_minor, endpoint=False)
    uu, vv = np.meshgrid(u, v, indexing="ij")
    r = major + minor * np.cos(vv)
    verts = np.stack([r * np.cos(uu), r * np.sin(uu), minor * np.sin(vv)], -1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(n_major), np.arange(n_minor), indexing="ij")
    a = i * n_minor + j
    b = ((i + 1) % n_major) * n_minor + j
    c = ((i + 1) % n_major) * n_minor + (j + 1) % n_minor
    d = i * n_minor + (j + 1) % n_minor
    faces = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    return verts, faces


def builtin_mesh(shape: str, name: str | None = None) -> bpy.types.Mesh:
    """A procedural mesh: 'teapot' (Bezier patches) or a Blender primitive shape (see BUILTIN_MESHES)."""
    from ident3d.render.bpy_module import bpy  # isort: skip (before bmesh)
    import bmesh

    name = name or shape
    if shape == "teapot":
        return _mesh_from_arrays(name, *teapot_mesh(10))
    if shape == "torus":
        return _mesh_from_arrays(name, *_torus())
    if shape not in BUILTIN_MESHES:
        raise UserError(f"unknown built-in mesh {shape!r}; choose one of {', '.join(BUILTIN_MESHES)} or a file path")
    bm = bmesh.new()
    if shape == "monkey":
        bmesh.ops.create_monkey(bm)
        bmesh.ops.subdivide_edges(bm, edges=bm.edges, cuts=1, use_grid_fill=True, smooth=1.0)
    elif shape == "cone":
        bmesh.ops.create_cone(bm, cap_ends=True, cap_tris=True, segments=48, radius1=1.0, radius2=0.0, depth=2.0)
    elif shape == "cylinder":
        bmesh.ops.create_cone(bm, cap_ends=True, cap_tris=False, segments=48, radius1=1.0, radius2=1.0, depth=2.0)
    elif shape == "icosphere":
        bmesh.ops.create_icosphere(bm, subdivisions=1, radius=1.0)
    elif shape == "cube":
        bmesh.ops.create_cube(bm, size=2.0)
    mesh = bpy.data.meshes.new(name)
    bm.to_mesh(mesh)
    bm.free()
    return mesh


def _check_file(path: Path, class_name: str) -> None:
    """Raise MeshFileError / MeshLoadError for a missing file or an unsupported format."""
    if not path.is_file():
        raise MeshFileError(f"class {class_name}: mesh file {path} not found")
    if path.suffix.lower() not in MESH_SUFFIXES:
        known = ", ".join(MESH_SUFFIXES)
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
    problem = _format_problem(path.suffix.lower(), head, size, path)
    if problem:
        raise MeshLoadError(f"class {class_name}: {path} is not a valid {path.suffix.lower()[1:].upper()} mesh "
                            f"({problem}); give a real mesh file for this class")


def _format_problem(suffix: str, head: bytes, size: int, path: Path) -> str | None:
    """Why the first bytes ``head`` of a file of ``size`` bytes cannot be a mesh of ``suffix``; None if they can."""
    if size == 0:
        return "the file is empty"
    if suffix == ".ply":
        return None if head.startswith(b"ply") else "no 'ply' header"
    if suffix == ".blend":
        return None if head.startswith(b"BLENDER") else "no 'BLENDER' header"
    if suffix == ".glb":
        return None if head.startswith(b"glTF") else "no 'glTF' binary header"
    if suffix == ".gltf":
        return None if head.lstrip().startswith(b"{") else "not a glTF JSON document"
    if suffix == ".stl":
        return _stl_problem(head, size)
    if suffix == ".obj":
        return None if _obj_has_vertices(path) else "no vertex ('v x y z') lines"
    return None


def _stl_problem(head: bytes, size: int) -> str | None:
    """Binary STL: 80-byte header + triangle count, and the size must match; else ASCII starting with 'solid'."""
    if size >= 84:
        count = int.from_bytes(head[80:84], "little")
        if count > 0 and size == 84 + 50 * count:
            return None
    if head.lstrip().startswith(b"solid") and b"facet" in head:
        return None
    return "neither a binary STL whose size matches its triangle count nor an ASCII STL ('solid ... facet')"


def _obj_has_vertices(path: Path) -> bool:
    """Whether an OBJ file has at least one 'v' line of three numbers (scanned line by line, stops early)."""
    with open(path, "rb") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 4 and parts[0] == b"v":
                try:
                    [float(x) for x in parts[1:4]]
                except ValueError:
                    return False
                return True
    return False


def _import_objects(path: Path) -> list[bpy.types.Object]:
    """Run the Blender 5 importer for the file's suffix; return the objects it created. OBJ, PLY and STL are read
    +Y up, -Z forward (the module's one up-axis rule; glTF is Y-up by its specification, .blend is Z-up)."""
    from ident3d.render.bpy_module import bpy

    suffix = path.suffix.lower()
    if suffix == ".blend":
        with bpy.data.libraries.load(str(path), link=False) as (src, dst):
            dst.objects = list(src.objects)
        return [o for o in dst.objects if o is not None]
    before = set(bpy.data.objects)
    fp = str(path)
    y_up = {"forward_axis": "NEGATIVE_Z", "up_axis": "Y"}
    if suffix == ".obj":
        result = bpy.ops.wm.obj_import(filepath=fp, **y_up)
    elif suffix == ".ply":
        result = bpy.ops.wm.ply_import(filepath=fp, **y_up)
    elif suffix == ".stl":
        result = bpy.ops.wm.stl_import(filepath=fp, **y_up)
    else:
        result = bpy.ops.import_scene.gltf(filepath=fp)
    if "FINISHED" not in result:
        raise MeshLoadError(f"Blender could not import {path} ({result})")
    bpy.context.view_layer.update()
    return [o for o in bpy.data.objects if o not in before]


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
    objects = _import_objects(path)
    mesh_objects = [o for o in objects if o.type == "MESH"]
    if path.suffix.lower() == ".blend":
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
    smooth = source not in FLAT_SHADED
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
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in MESH_SUFFIXES)
    if not files:
        raise MeshFileError(f"meshes dir {folder} holds no mesh files ({', '.join(MESH_SUFFIXES)}); "
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
    suffix = path.suffix.lower()
    if suffix == ".obj":
        lines = [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in verts] + [f"f {a} {b} {c}" for a, b, c in faces + 1]
        path.write_text("\n".join(lines) + "\n")
    elif suffix == ".ply":
        head = ["ply", "format ascii 1.0", f"element vertex {len(verts)}", "property float x", "property float y",
                "property float z", f"element face {len(faces)}", "property list uchar int vertex_indices",
                "end_header"]
        body = [f"{x:.6f} {y:.6f} {z:.6f}" for x, y, z in verts] + [f"3 {a} {b} {c}" for a, b, c in faces]
        path.write_text("\n".join(head + body) + "\n")
    elif suffix == ".stl":
        path.write_bytes(_stl_bytes(verts, faces))
    else:
        raise UserError(f"write_mesh writes .obj, .ply or .stl, not {path.name}")
    return path


def _stl_bytes(verts: np.ndarray, faces: np.ndarray) -> bytes:
    """A binary STL: 80-byte header, triangle count, then per triangle its normal, 3 corners and 2 spare bytes."""
    tri = verts[faces]
    normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
    record = np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])
    data = np.zeros(len(faces), dtype=record)
    data["n"], data["v"] = normals, tri
    return b"ident3d".ljust(80, b" ") + len(faces).to_bytes(4, "little") + data.tobytes()
