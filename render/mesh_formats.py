"""Mesh file formats by suffix: one ``MeshFormat`` class each, registered in ``MESH_FORMATS`` (in the order messages
list them), that says whether a file's first bytes can be that format (no Blender), imports it in Blender and,
for OBJ, PLY and STL, writes small test meshes. See ``ident3d.render.meshes`` for the up-axis rule."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.causal.registry import Registry

if TYPE_CHECKING:
    import bpy

MESH_FORMATS = Registry("mesh format", hint="docs/rendering.md#meshes", sort=False)
Y_UP = {"forward_axis": "NEGATIVE_Z", "up_axis": "Y"}  # exchange formats are read +Y up, -Z forward


class MeshLoadError(UserError):
    """A mesh file exists but could not be imported."""


class MeshFormat:
    """A mesh file format (registered by its suffix): a cheap header check and Blender's importer for it."""

    registry_name: ClassVar[str]
    operator: ClassVar[str] = ""  # the bpy.ops importer, 'group.name'
    y_up: ClassVar[bool] = True  # pass the +Y up, -Z forward axes to the importer
    first_mesh_only: ClassVar[bool] = False  # keep only the file's first mesh object
    writable: ClassVar[bool] = False  # ``write`` makes files of it

    def problem(self, head: bytes, size: int, path: Path) -> str | None:
        """Why a file whose first bytes are ``head`` (of ``size`` > 0 bytes) cannot be this format; None if it can."""
        return None

    def import_objects(self, path: Path) -> list[bpy.types.Object]:
        """Run Blender's importer on ``path``; the objects it created."""
        from ident3d.render.bpy_module import bpy

        before = set(bpy.data.objects)
        group, name = self.operator.split(".")
        result = getattr(getattr(bpy.ops, group), name)(filepath=str(path), **(Y_UP if self.y_up else {}))
        if "FINISHED" not in result:
            raise MeshLoadError(f"Blender could not import {path} ({result})")
        bpy.context.view_layer.update()
        return [o for o in bpy.data.objects if o not in before]

    def write(self, path: Path, verts: np.ndarray, faces: np.ndarray) -> None:
        """Write a triangle mesh (float vertices (V, 3), 0-based int faces (F, 3)) to ``path``."""
        raise NotImplementedError


@MESH_FORMATS.register(".obj")
class Obj(MeshFormat):
    """Wavefront OBJ (text, read +Y up): the most common exchange format; checked for a vertex line."""

    operator, writable = "wm.obj_import", True

    def problem(self, head: bytes, size: int, path: Path) -> str | None:
        return None if _obj_has_vertices(path) else "no vertex ('v x y z') lines"

    def write(self, path: Path, verts: np.ndarray, faces: np.ndarray) -> None:
        lines = [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in verts] + [f"f {a} {b} {c}" for a, b, c in faces + 1]
        path.write_text("\n".join(lines) + "\n")


@MESH_FORMATS.register(".ply")
class Ply(MeshFormat):
    """Stanford PLY (read +Y up): the Stanford scans' format; checked for its 'ply' header."""

    operator, writable = "wm.ply_import", True

    def problem(self, head: bytes, size: int, path: Path) -> str | None:
        return None if head.startswith(b"ply") else "no 'ply' header"

    def write(self, path: Path, verts: np.ndarray, faces: np.ndarray) -> None:
        head = ["ply", "format ascii 1.0", f"element vertex {len(verts)}", "property float x", "property float y",
                "property float z", f"element face {len(faces)}", "property list uchar int vertex_indices",
                "end_header"]
        body = [f"{x:.6f} {y:.6f} {z:.6f}" for x, y, z in verts] + [f"3 {a} {b} {c}" for a, b, c in faces]
        path.write_text("\n".join(head + body) + "\n")


@MESH_FORMATS.register(".stl")
class Stl(MeshFormat):
    """STL, binary or ASCII (read +Y up): what 3D printing exchanges; checked for a size matching its triangles."""

    operator, writable = "wm.stl_import", True

    def problem(self, head: bytes, size: int, path: Path) -> str | None:
        """Binary STL: 80-byte header + triangle count, and the size must match; else ASCII starting with 'solid'."""
        if size >= 84:
            count = int.from_bytes(head[80:84], "little")
            if count > 0 and size == 84 + 50 * count:
                return None
        if head.lstrip().startswith(b"solid") and b"facet" in head:
            return None
        return "neither a binary STL whose size matches its triangle count nor an ASCII STL ('solid ... facet')"

    def write(self, path: Path, verts: np.ndarray, faces: np.ndarray) -> None:
        path.write_bytes(_stl_bytes(verts, faces))


@MESH_FORMATS.register(".gltf")
class Gltf(MeshFormat):
    """glTF as JSON (Y-up by its specification): a web format; checked for a JSON document."""

    operator, y_up = "import_scene.gltf", False

    def problem(self, head: bytes, size: int, path: Path) -> str | None:
        return None if head.lstrip().startswith(b"{") else "not a glTF JSON document"


@MESH_FORMATS.register(".glb")
class Glb(MeshFormat):
    """Binary glTF (Y-up by its specification): glTF in one file; checked for its 'glTF' header."""

    operator, y_up = "import_scene.gltf", False

    def problem(self, head: bytes, size: int, path: Path) -> str | None:
        return None if head.startswith(b"glTF") else "no 'glTF' binary header"


@MESH_FORMATS.register(".blend")
class Blend(MeshFormat):
    """A Blender file (Z-up, taken as it is): its first mesh object, with its object transform (Multimodal3DIdent)."""

    first_mesh_only = True

    def problem(self, head: bytes, size: int, path: Path) -> str | None:
        return None if head.startswith(b"BLENDER") else "no 'BLENDER' header"

    def import_objects(self, path: Path) -> list[bpy.types.Object]:
        """Append the file's objects (not linked into any scene)."""
        from ident3d.render.bpy_module import bpy

        with bpy.data.libraries.load(str(path), link=False) as (src, dst):
            dst.objects = list(src.objects)
        return [o for o in dst.objects if o is not None]


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


def _stl_bytes(verts: np.ndarray, faces: np.ndarray) -> bytes:
    """A binary STL: 80-byte header, triangle count, then per triangle its normal, 3 corners and 2 spare bytes."""
    tri = verts[faces]
    normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
    record = np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])
    data = np.zeros(len(faces), dtype=record)
    data["n"], data["v"] = normals, tri
    return b"ident3d".ljust(80, b" ") + len(faces).to_bytes(4, "little") + data.tobytes()


def writable_suffixes() -> list[str]:
    """The suffixes ``write`` makes files of, in registration order."""
    return [s for s, cls in MESH_FORMATS.items() if cls.writable]
