"""The procedural meshes of ``builtin:<shape>`` (the Utah teapot, a torus, Blender's primitives): one ``Shape``
class each, registered by name in ``BUILTIN_MESHES`` in the order messages list them. bpy is imported only when a
mesh is built."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ident3d.causal.registry import Registry
from ident3d.render.teapot import teapot_mesh

if TYPE_CHECKING:
    import bpy

BUILTIN_MESHES = Registry("built-in mesh", hint="docs/rendering.md#meshes", sort=False)


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


class Shape:
    """A procedural shape, built as a Blender mesh by ``mesh(name)``: by default from a bmesh ``fill`` makes."""

    registry_name: ClassVar[str]
    flat: ClassVar[bool] = False  # hard edges: shaded flat, not smoothed

    def mesh(self, name: str) -> bpy.types.Mesh:
        """The shape as a new Blender mesh called ``name``."""
        from ident3d.render.bpy_module import bpy  # isort: skip (before bmesh)
        import bmesh

        bm = bmesh.new()
        self.fill(bmesh, bm)
        mesh = bpy.data.meshes.new(name)
        bm.to_mesh(mesh)
        bm.free()
        return mesh

    def fill(self, bmesh: Any, bm: Any) -> None:
        """Create the shape in the empty bmesh ``bm`` (``bmesh``: the module, for its ops)."""
        raise NotImplementedError


class ArrayShape(Shape):
    """A shape made from vertex and triangle arrays (bmesh has no op for it)."""

    def mesh(self, name: str) -> bpy.types.Mesh:
        return _mesh_from_arrays(name, *self.arrays())

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Vertices (V, 3) and triangles (F, 3)."""
        raise NotImplementedError


@BUILTIN_MESHES.register("teapot")
class Teapot(ArrayShape):
    """The Utah teapot from its Bezier patches: Causal3DIdent's teapot class without a mesh file."""

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return teapot_mesh(10)


@BUILTIN_MESHES.register("monkey")
class Monkey(Shape):
    """Blender's monkey (Suzanne), subdivided once: an irregular stand-in for a scanned object."""

    def fill(self, bmesh: Any, bm: Any) -> None:
        bmesh.ops.create_monkey(bm)
        bmesh.ops.subdivide_edges(bm, edges=bm.edges, cuts=1, use_grid_fill=True, smooth=1.0)


@BUILTIN_MESHES.register("torus")
class Torus(ArrayShape):
    """A torus (ring radius 1, tube 0.4): a shape with a hole."""

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return _torus()


@BUILTIN_MESHES.register("cone")
class Cone(Shape):
    """A capped cone of 48 segments: a pointed stand-in, shaded flat."""

    flat = True

    def fill(self, bmesh: Any, bm: Any) -> None:
        bmesh.ops.create_cone(bm, cap_ends=True, cap_tris=True, segments=48, radius1=1.0, radius2=0.0, depth=2.0)


@BUILTIN_MESHES.register("icosphere")
class Icosphere(Shape):
    """An icosphere subdivided once: a round stand-in whose facets show, shaded flat."""

    flat = True

    def fill(self, bmesh: Any, bm: Any) -> None:
        bmesh.ops.create_icosphere(bm, subdivisions=1, radius=1.0)


@BUILTIN_MESHES.register("cylinder")
class Cylinder(Shape):
    """A capped cylinder of 48 segments: a stand-in with flat ends, shaded flat."""

    flat = True

    def fill(self, bmesh: Any, bm: Any) -> None:
        bmesh.ops.create_cone(bm, cap_ends=True, cap_tris=False, segments=48, radius1=1.0, radius2=1.0, depth=2.0)


@BUILTIN_MESHES.register("cube")
class Cube(Shape):
    """A cube of side 2: the simplest stand-in, shaded flat."""

    flat = True

    def fill(self, bmesh: Any, bm: Any) -> None:
        bmesh.ops.create_cube(bm, size=2.0)
