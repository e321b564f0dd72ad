"""render.projection: the numpy camera model lands each object where Blender draws it (real bpy renders)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ident3d.render.projection import _euler_xyz, _look_at, object_pixels, project
from ident3d.render.scene import Camera, load_scene, pose
from ident3d.render.settings import render_settings

RES = 48


def test_camera_axes_agree_between_euler_and_look_at():
    """A look_at camera's axes are a rotation whose -Z points at the target; the same rotation as Euler angles
    projects the target to the image centre."""
    axes = _look_at((8.0, 0.0, 8.0), (0.0, 0.0, 0.0))
    assert np.allclose(axes.T @ axes, np.eye(3)) and np.isclose(np.linalg.det(axes), 1)
    assert np.allclose(-axes[:, 2], -np.array([8.0, 0, 8]) / np.hypot(8, 8))
    cam = Camera(location=(8.0, 0.0, 8.0), look_at=(0.0, 0.0, 0.0))
    assert np.allclose(project(cam, np.zeros((1, 3)), 64, 64), [[32, 32]])
    assert np.allclose(_euler_xyz(0.0, 0.0, np.pi / 2) @ [1, 0, 0], [0, 1, 0])
    behind = project(cam, np.array([[16.0, 0.0, 16.0]]), 64, 64)
    assert np.isnan(behind).all()


@pytest.mark.parametrize("scene_name", ["3dident", "causal3dident"])
def test_projected_object_lies_on_the_rendered_object(scene_name):
    """Render each sample twice with only the object's colour changed: the pixels that change are the object.
    Its projected origin is inside that mask and near its centroid; another sample's projection is not."""
    from ident3d.render.blender import BlenderRenderer

    scene = load_scene(scene_name)
    renderer = BlenderRenderer(scene, render_settings("fast", resolution=RES, samples=8))
    raw = np.random.default_rng(3).uniform(-1, 1, (4, len(scene.latents)))
    px = object_pixels(scene, raw, None, RES)
    centroids = []
    for i, row in enumerate(raw):
        p = pose(scene, row, 0)
        a = renderer.render_pose(p, 0).astype(int)
        b = renderer.render_pose(replace(p, object_rgb=tuple(1 - c for c in p.object_rgb)), 0).astype(int)
        mask = np.abs(a - b).sum(axis=-1) > 30
        assert mask.sum() > 10, "the object should be visible"
        r, c = np.round(px[i]).astype(int)
        assert mask[max(r - 1, 0):r + 2, max(c - 1, 0):c + 2].any(), (i, px[i])
        centroids.append(np.argwhere(mask).mean(axis=0))
    centroids = np.array(centroids)
    own = np.linalg.norm(px - centroids, axis=1)
    other = np.linalg.norm(px - np.roll(centroids, 1, axis=0), axis=1)
    assert own.mean() < 3 and other.mean() > 2 * own.mean(), (own, other)


def test_object_centres_read_the_stores_scene_and_column_order():
    """evaluate's channel report projects with the scene a store records, picking latents by name; a store of
    plain images (no scene) gets none."""
    from ident3d.evaluation.channel import object_centres
    from ident3d.store.attrs import StoreAttrs

    def store(**kw):
        return StoreAttrs(**{"scene_spec": {}, "scm": {}, "n": 5, "chunk_size": 5, **kw})

    scene = load_scene("causal3dident")
    raw = np.random.default_rng(0).uniform(-1, 1, (5, len(scene.latents)))
    want = object_pixels(scene, raw, None, 32)
    names = list(scene.latent_names)
    order = np.random.default_rng(1).permutation(len(names))  # the store's columns in another order
    attrs = store(scene="causal3dident", scene_spec=scene.to_dict(), latent_names=[names[i] for i in order])
    assert np.allclose(object_centres(attrs, raw[:, order], None, 32), want)
    assert not np.allclose(object_centres(attrs, raw, None, 32), want)  # the column order matters
    imported = store(scene="imported", source_format="causal3dident", latent_names=names)
    assert np.allclose(object_centres(imported, raw, None, 32), want)
    dataset = store(scene="dataset:digits", scene_spec={"dataset": "digits"}, latent_names=["digit"])
    assert object_centres(dataset, raw[:, :1], None, 32) is None
