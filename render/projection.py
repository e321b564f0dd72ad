"""Where a scene point lands in the rendered image: the pinhole projection of a scene's camera, in numpy (no bpy),
so reports can tell which pixels hold the object (e.g. whether a learned crop channel keeps it)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ident3d.render.scene import Camera, Scene, pose


def _euler_xyz(rx: float, ry: float, rz: float) -> np.ndarray:
    """Blender's XYZ Euler rotation as a matrix: X first, then Y, then Z (R = Rz Ry Rx)."""
    cx, sx, cy, sy, cz, sz = math.cos(rx), math.sin(rx), math.cos(ry), math.sin(ry), math.cos(rz), math.sin(rz)
    x = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    y = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    z = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return z @ y @ x


def _look_at(location: Sequence[float], target: Sequence[float]) -> np.ndarray:
    """The camera's axes (columns x, y, z) when its -Z points at ``target`` with +Y as close to world up as can be
    (Blender's ``to_track_quat('-Z', 'Y')``)."""
    z = np.asarray(location, float) - np.asarray(target, float)
    z /= np.linalg.norm(z)
    up = np.array([0.0, 0.0, 1.0])
    y = up - (up @ z) * z
    if np.linalg.norm(y) < 1e-9:  # looking straight down or up: any y perpendicular to z
        y = np.array([0.0, 1.0, 0.0]) - z[1] * z
    y /= np.linalg.norm(y)
    return np.stack([np.cross(y, z), y, z], axis=1)


def camera_axes(camera: Camera) -> np.ndarray:
    """The camera-to-world rotation (3, 3) of a scene's camera."""
    if camera.rotation_rad is not None:
        return _euler_xyz(*camera.rotation_rad)
    return _look_at(camera.location, camera.look_at)


def project(camera: Camera, points: np.ndarray, width: int, height: int) -> np.ndarray:
    """Pixel coordinates (N, 2) as (row from the top, column from the left) of world points (N, 3) in a
    ``width`` x ``height`` render; AUTO sensor fit (the sensor spans the larger side). Points behind the camera
    give NaN."""
    r = camera_axes(camera)
    local = (np.asarray(points, float) - np.asarray(camera.location, float)) @ r  # world -> camera frame
    depth = -local[:, 2]
    fit = {"AUTO": max(width, height), "HORIZONTAL": width, "VERTICAL": height}[camera.sensor_fit]
    scale = camera.lens_mm / camera.sensor_mm * fit
    with np.errstate(divide="ignore", invalid="ignore"):
        col = width / 2 + scale * local[:, 0] / depth
        row = height / 2 - scale * local[:, 1] / depth
    out = np.stack([row, col], axis=1)
    out[depth <= 0] = np.nan
    return out


def object_pixels(scene: Scene, raw: np.ndarray, classes: np.ndarray | None, size: int) -> np.ndarray:
    """Where each sample's object origin lands (N, 2: row, column) in a ``size`` px square render, from raw latents
    (N, D) ordered as ``scene.latents``."""
    classes = np.zeros(len(raw), int) if classes is None else classes
    locs = np.array([pose(scene, row, int(c)).location for row, c in zip(raw, classes, strict=True)])
    return project(scene.camera, locs, size, size)


def slot_pixels(scene: Scene, raw: np.ndarray, size: int) -> np.ndarray:
    """Where each object slot's origin lands (N, K, 2: row, column) in a ``size`` px square render of a scene with
    object slots, from raw latents (N, D) ordered as ``scene.latent_names``; NaN for absent slots."""
    out = np.full((len(raw), scene.slots, 2), np.nan)
    for i, row in enumerate(np.asarray(raw, float)):
        objects = pose(scene, row.tolist()).objects
        here = [k for k, o in enumerate(objects) if o.present]
        if here:
            out[i, here] = project(scene.camera, np.array([objects[k].location for k in here]), size, size)
    return out
