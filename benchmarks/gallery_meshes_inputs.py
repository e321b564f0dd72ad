"""Inputs of the meshes gallery: a --meshes-dir of generated meshes (no real scans are shipped) and 7 latent rows,
one per Causal3DIdent class. Usage: ``python benchmarks/gallery_meshes_inputs.py OUT_DIR`` writes
``OUT_DIR/meshes/`` and ``OUT_DIR/latents.csv`` (commands in results/gallery_meshes/README.md); with ``--tiny``
(a test) the same files into a temporary folder: they are small already."""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import numpy as np
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

from ident3d.render.meshes import write_mesh
from ident3d.render.scene import LATENT_NAMES

CLASSES = ("Teapot", "Hare", "Dragon", "Cow", "Armadillo", "Horse", "Head")


def bumpy_sphere(n_theta: int = 24, n_phi: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """A UV sphere whose radius swells in 3 x 4 lobes (a lumpy body), poles as single vertices, Y up."""
    theta = np.linspace(0.0, math.pi, n_theta + 1)[1:-1]
    phi = np.linspace(0.0, 2 * math.pi, n_phi, endpoint=False)
    tt, pp = np.meshgrid(theta, phi, indexing="ij")
    r = 1.0 + 0.25 * np.sin(3 * tt) * np.cos(4 * pp)
    ring = np.stack([r * np.sin(tt) * np.cos(pp), r * np.cos(tt), r * np.sin(tt) * np.sin(pp)], -1).reshape(-1, 3)
    verts = np.concatenate([[[0.0, 1.0, 0.0]], ring, [[0.0, -1.0, 0.0]]])
    faces = _sphere_faces(n_theta - 1, n_phi)
    return verts, faces


def _sphere_faces(n_rings: int, n_phi: int) -> np.ndarray:
    """Triangles of a UV sphere with a top pole (vertex 0), ``n_rings`` rings of ``n_phi`` and a bottom pole."""
    idx = lambda i, j: 1 + i * n_phi + j % n_phi  # noqa: E731 - a ring vertex's index
    bottom = 1 + n_rings * n_phi
    faces = [(0, idx(0, j + 1), idx(0, j)) for j in range(n_phi)]
    for i in range(n_rings - 1):
        for j in range(n_phi):
            faces += [(idx(i, j), idx(i, j + 1), idx(i + 1, j + 1)), (idx(i, j), idx(i + 1, j + 1), idx(i + 1, j))]
    faces += [(bottom, idx(n_rings - 1, j), idx(n_rings - 1, j + 1)) for j in range(n_phi)]
    return np.array(faces)


def box(sx: float, sy: float, sz: float) -> tuple[np.ndarray, np.ndarray]:
    """An axis-aligned box of sides (sx, sy, sz), 12 triangles."""
    verts = np.array([[x, y, z] for x in (0, sx) for y in (0, sy) for z in (0, sz)], dtype=float)
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                      [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return verts, faces


def octahedron() -> tuple[np.ndarray, np.ndarray]:
    """A regular octahedron, stretched 1.6x along Y (up): a spinning-top."""
    verts = np.array([[1, 0, 0], [-1, 0, 0], [0, 1.6, 0], [0, -1.6, 0], [0, 0, 1], [0, 0, -1]], dtype=float)
    faces = np.array([[0, 2, 4], [4, 2, 1], [1, 2, 5], [5, 2, 0], [4, 3, 0], [1, 3, 4], [5, 3, 1], [0, 3, 5]])
    return verts, faces


def tetrahedron() -> tuple[np.ndarray, np.ndarray]:
    """A regular tetrahedron."""
    verts = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=float)
    return verts, np.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]])


def write_meshes(folder: Path) -> list[Path]:
    """Four classes get a generated mesh, named the ways --meshes-dir accepts (an alias, another case); the
    other three keep their stand-in."""
    folder.mkdir(parents=True, exist_ok=True)
    shapes = {"bunny.ply": bumpy_sphere(), "Dragon.stl": tetrahedron(), "spot.obj": box(3.0, 1.2, 1.0),
              "horse.obj": octahedron()}
    return [write_mesh(folder / name, *shape) for name, shape in shapes.items()]


def write_latents(path: Path) -> Path:
    """Seven rows, class k in row k, the object in the middle and slightly turned, hues spread over the range."""
    rows = []
    for k, cls in enumerate(CLASSES):
        row = dict.fromkeys(LATENT_NAMES, 0.0)
        row.update(pos_z=-0.3, rot_alpha=0.15, rot_gamma=0.35, spot_angle=0.4, obj_hue=-0.9 + 0.3 * k,
                   spot_hue=0.2, bg_hue=0.6)
        rows.append({"class": cls, **{n: f"{v:.3f}" for n, v in row.items()}})
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["class", *LATENT_NAMES])
        writer.writeheader()
        writer.writerows(rows)
    return path


def main(argv: list[str]) -> int:
    """Write OUT_DIR/meshes/ and OUT_DIR/latents.csv."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", nargs="?", type=Path, help="where meshes/ and latents.csv go")
    tiny = add_tiny(ap, "the same files, into a temporary folder")
    args = ap.parse_args(argv)
    tiny.apply(args, paths={"out_dir": "inputs"})
    if args.out_dir is None:
        ap.error("give OUT_DIR (or --tiny)")
    for path in [*write_meshes(args.out_dir / "meshes"), write_latents(args.out_dir / "latents.csv")]:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
