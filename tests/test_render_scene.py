"""Scene data, latent-to-scene mapping and the Blender worker, rendered for real with bpy (64 px, few samples).

Image geometry used below, from the camera at (8, 0, 8) looking at the origin with +z up: world +y is image
right, world +x is image down (towards the camera), so +x moves an object's centroid down the rows.
"""

from __future__ import annotations

import colorsys
import math
from dataclasses import replace

import numpy as np
import pytest

from ident3d.render.scene import LATENT_NAMES, SceneError, load_scene, pose, scene_from_dict
from ident3d.render.settings import render_settings

RES = 64
SETTINGS = render_settings("fast", resolution=RES, samples=8)
COL = {name: i for i, name in enumerate(LATENT_NAMES)}


def latents(**kw: float) -> np.ndarray:
    """One raw latent row: zeros except the named entries."""
    row = np.zeros(len(LATENT_NAMES), dtype=np.float32)
    for k, v in kw.items():
        row[COL[k]] = v
    return row


def linear(img: np.ndarray) -> np.ndarray:
    """uint8 sRGB -> linear float (the scene uses the Standard view transform)."""
    c = img.astype(np.float64) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def hue(rgb: np.ndarray) -> float:
    """Hue (turns) of one linear RGB triple."""
    return colorsys.rgb_to_hsv(*rgb)[0]


def hue_dist(a: float, b: float) -> float:
    """Distance between two hues on the circle (turns)."""
    d = abs(a - b) % 1.0
    return min(d, 1.0 - d)


def red_mask(img: np.ndarray) -> np.ndarray:
    """Pixels of a pure-red object (hue ~0, saturated) over a chartreuse ground lit by a chartreuse spot."""
    lin = linear(img)
    r, g, b = lin[..., 0], lin[..., 1], lin[..., 2]
    return (r > 0.01) & (r > 3 * g) & (r > 3 * b)


def centroid(mask: np.ndarray) -> np.ndarray:
    """(row, col) centre of a boolean mask."""
    assert mask.sum() > 10, "mask is (almost) empty"
    return np.argwhere(mask).mean(0)


# red object, chartreuse ground and spot: object pixels separable by colour
RED_ON_GREEN = {"obj_hue": 0.0, "bg_hue": 1.0, "spot_hue": 1.0, "pos_z": -0.3}


@pytest.fixture(scope="module")
def renderer():
    """One Causal3DIdent renderer for the module (Blender builds the scene once)."""
    from ident3d.render.blender import BlenderRenderer

    return BlenderRenderer(load_scene("causal3dident"), SETTINGS)


# ---- scene data (no Blender) -------------------------------------------------------------------------------
def test_builtin_scenes_classes_and_round_trip():
    c3d = load_scene("causal3dident")
    assert c3d.class_names == ("Teapot", "Hare", "Dragon", "Cow", "Armadillo", "Horse", "Head")
    assert c3d.classes[0].mesh == "builtin:teapot" and c3d.classes[6].mesh == "builtin:monkey"
    assert c3d.latent_names == LATENT_NAMES
    three = load_scene("3dident")
    assert three.class_names == ("Teapot",)
    assert scene_from_dict(c3d.to_dict()) == c3d
    with pytest.raises(SceneError, match="target"):
        scene_from_dict({**three.to_dict(), "latents": [{"name": "a", "target": "object.w"}]})


def test_pose_follows_spec_mapping():
    sc = load_scene("3dident")
    s = sc.extent
    raw = [0.5, -0.25, 1.0, 0.2, -0.4, 1.0, 0.5, -1.0, -0.6, 0.8]
    p = pose(sc, raw)
    np.testing.assert_allclose(p.location, (1.5, -0.75, 3.0 + s / 2))
    np.testing.assert_allclose(p.rotation, (0.1 * math.pi, -0.2 * math.pi, math.pi / 2))
    t = math.pi / 4
    np.testing.assert_allclose(p.lights["spot"].location, (4 * math.sin(t), 4 * math.cos(t), 6 + s))
    # hues wrap mod 1: raw -1 -> hue 0.75 (violet), not a clamped red
    np.testing.assert_allclose(p.object_rgb, colorsys.hsv_to_rgb(0.75, 1.0, 1.0))
    np.testing.assert_allclose(p.lights["spot"].rgb, colorsys.hsv_to_rgb(1 - 0.15, 0.8, 1.0))
    np.testing.assert_allclose(p.ground_rgb, colorsys.hsv_to_rgb(0.2, 0.6, 1.0))


def test_hue_modes_hand_computed():
    """'original': colorsys on the unwrapped hue, negatives clamped to 0, values above 1 kept; 'wrap': mod 1."""
    sc = load_scene("3dident")

    def colours(mode: str, raw: float) -> tuple:
        p = pose(sc, latents(obj_hue=raw, spot_hue=raw, bg_hue=raw), hue_mode=mode)
        return p.object_rgb, p.lights["spot"].rgb, p.ground_rgb

    obj, spot, ground = colours("original", -0.4)  # hue -0.1: colorsys gives (1, -0.6, 0) for the object
    np.testing.assert_allclose(obj, (1.0, 0.0, 0.0), atol=1e-6)
    np.testing.assert_allclose(spot, (1.0, 0.0, 0.2), atol=1e-6)  # (1, -0.28, 0.2) clamped
    np.testing.assert_allclose(ground, (1.0, 0.04, 0.4), atol=1e-6)  # t = 1 - 0.6 * 1.6
    obj, _, _ = colours("original", -0.8)  # hue -0.2: sector 5, q = 1 - (-0.2) = 1.2
    np.testing.assert_allclose(obj, (1.0, 0.0, 1.2), atol=1e-6)
    obj, spot, ground = colours("wrap", -0.4)  # hue 0.9: sector 5, f = 0.4
    np.testing.assert_allclose(obj, (1.0, 0.0, 0.6), atol=1e-6)
    np.testing.assert_allclose(spot, (1.0, 0.2, 0.68), atol=1e-6)
    np.testing.assert_allclose(ground, (1.0, 0.4, 0.76), atol=1e-6)
    for mode in ("wrap", "original"):  # non-negative hues agree
        np.testing.assert_allclose(colours(mode, 0.4)[0], (1.0, 0.6, 0.0), atol=1e-6)
    with pytest.raises(SceneError, match="hue mode"):
        pose(sc, latents(), hue_mode="clamp")


def test_3dident_scene_holds_the_original_numbers():
    sc = load_scene("3dident")
    lights = {lt.name: lt for lt in sc.lights}
    assert (lights["sun"].energy, math.radians(lights["sun"].angle_deg)) == (0.5, pytest.approx(0.199, abs=1e-5))
    assert lights["sun"].location == (0, 0, 25.8) and lights["sun"].rotation_deg == (0, 0, 0)  # pointing down
    assert (lights["area"].energy, lights["area"].size, lights["area"].location) == (39.27, 1.0, (0, 0, 7))
    spot = lights["spot"]
    assert (spot.energy, spot.spot_size_deg, spot.spot_blend, spot.size, spot.aim) == (3000, 35, 0.1, 0.5, "object")
    assert (sc.ground.size, sc.ground.z) == (1500, -4.442)
    for m in (sc.material, sc.ground.material):
        assert (m.ior, m.roughness, m.glossy_distribution, m.sheen_distribution) == (1.2, 0.35, "BECKMANN", "ASHIKHMIN")
    assert sc.ground.material.color_hsv[1:] == (0.6, 1.0) and sc.material.color_hsv[1:] == (1.0, 1.0)
    cam = sc.camera
    assert (cam.location, cam.look_at, cam.lens_mm, cam.sensor_mm) == ((8, 0, 8), (0, 0, 0), 35, 50)
    t = 0.3 * math.pi / 2
    p = pose(sc, latents(pos_x=0.1, pos_y=-0.2, pos_z=0.3, spot_angle=0.3))
    np.testing.assert_allclose(p.location, (0.3, -0.6, 0.9 + 2.221))
    np.testing.assert_allclose(p.lights["spot"].location, (4 * math.sin(t), 4 * math.cos(t), 10.442))
    teapot = sc.classes[0]
    assert (teapot.mesh_size(sc.extent), teapot.yaw_deg) == (6.125, -45)


def test_scene_validation_of_camera_and_classes():
    base = load_scene("3dident").to_dict()
    cam = {**base["camera"], "look_at": None, "rotation_rad": [1.1093, 0.0108, 0.8149]}
    assert scene_from_dict({**base, "camera": cam}).camera.rotation_rad == (1.1093, 0.0108, 0.8149)
    with pytest.raises(SceneError, match="exactly one of look_at and rotation_rad"):
        scene_from_dict({**base, "camera": {**cam, "look_at": [0, 0, 0]}})
    teapot = base["classes"][0]
    for bad in ("body", [0, 0], [0, "axis", 0]):
        with pytest.raises(SceneError, match="pivot"):
            scene_from_dict({**base, "classes": [{**teapot, "pivot": bad}]})
    with pytest.raises(SceneError, match="glossy_distribution"):
        scene_from_dict({**base, "material": {"glossy_distribution": "PHONG"}})
    # a user mesh replacing a class drops the built-in's conventions (size, yaw, pivot)
    user = load_scene("3dident").with_meshes({"Teapot": "my_teapot.obj"}).classes[0]
    assert (user.mesh, user.size, user.yaw_deg, user.pivot) == ("my_teapot.obj", None, 0.0, "bbox_centre")


def test_teapot_mesh_follows_the_original_conventions():
    """Length 6.125 (spout to handle) and height 3.0; spout towards -45 deg; pivot on the body axis (lid knob)."""
    import bpy

    from ident3d.render.meshes import class_mesh

    sc = load_scene("3dident")
    cls = sc.classes[0]
    meshes = {yaw: class_mesh(cls.mesh, "t", cls.mesh_size(sc.extent), yaw, cls.pivot) for yaw in (0.0, cls.yaw_deg)}
    co = {yaw: np.array([v.co[:] for v in m.vertices]) for yaw, m in meshes.items()}
    for m in meshes.values():
        bpy.data.meshes.remove(m)
    size = co[0.0].max(0) - co[0.0].min(0)
    np.testing.assert_allclose(size[[0, 2]], (6.125, 3.0), rtol=0.01)
    np.testing.assert_allclose((co[0.0].max(0) + co[0.0].min(0)) / 2, (0.2066, 0.0, 0.1396), atol=2e-3)
    stored = co[cls.yaw_deg]
    np.testing.assert_allclose(stored.max(0) - stored.min(0), (4.44, 4.44, 3.0), rtol=0.01)
    tip = stored[np.argmax(np.hypot(stored[:, 0], stored[:, 1]))]  # farthest from the body axis: the spout tip
    assert math.degrees(math.atan2(tip[1], tip[0])) == pytest.approx(-45.0, abs=1.0)
    knob = stored[np.argmax(stored[:, 2])]  # the top of the lid knob sits on the body axis, above the pivot
    np.testing.assert_allclose(knob[:2], 0.0, atol=1e-3)


# ---- rendering ----------------------------------------------------------------------------------------------
def test_output_shape_and_batch(renderer):
    lat = np.stack([latents(), latents(pos_x=0.5)])
    out = renderer.render_batch(lat, np.array([0, 6]), np.array([1, 2]))
    assert out.shape == (2, RES, RES, 3) and out.dtype == np.uint8
    assert out.std() > 5  # not a blank image


def test_background_hue_follows_latent(renderer):
    for raw in (-1.0, -0.4, 0.0, 0.6, 1.0):
        img = renderer.render(latents(bg_hue=raw, spot_hue=raw, pos_z=-1.0), 0, 0)
        border = np.concatenate([img[0], img[:, 0], img[:, -1]])  # bottom row may hold the spot/shadow
        got = hue(linear(border).mean(0))
        assert hue_dist(got, (raw / 4) % 1.0) < 0.02, (raw, got)


def test_object_position_moves_centroid(renderer):
    c = {}
    for key in ("pos_x", "pos_y"):
        for raw in (-0.8, 0.8):
            c[key, raw] = centroid(red_mask(renderer.render(latents(**{**RED_ON_GREEN, key: raw}), 0, 0)))
    assert c["pos_x", 0.8][0] - c["pos_x", -0.8][0] > 0.15 * RES  # +x: towards the camera = down the image
    assert abs(c["pos_x", 0.8][1] - c["pos_x", -0.8][1]) < 0.1 * RES
    assert c["pos_y", 0.8][1] - c["pos_y", -0.8][1] > 0.3 * RES  # +y: image right
    assert abs(c["pos_y", 0.8][0] - c["pos_y", -0.8][0]) < 0.1 * RES


def test_object_hue_follows_latent(renderer):
    """Hues whose RGB is made of 0s and 1s keep their hue under the same-hue spotlight; -2/3 checks the wrap."""
    base = renderer.render(latents(obj_hue=0.5, spot_hue=0.5, bg_hue=-1.0), 0, 0)
    for raw in (-2 / 3, 0.0, 2 / 3):  # hue 5/6 (magenta, not a clamped red), 0 (red), 1/6 (yellow)
        img = renderer.render(latents(obj_hue=raw, spot_hue=raw, bg_hue=-1.0), 0, 0)
        changed = np.abs(img.astype(int) - base.astype(int)).sum(-1) > 30  # only the object changes colour
        assert changed.sum() > 30
        hsv = [colorsys.rgb_to_hsv(*px) for px in linear(img)[changed]]
        hues = [h for h, s, v in hsv if s > 0.8 and v > 0.05]  # skip edges mixed with the ground
        assert len(hues) > 20
        err = np.median([hue_dist(h, (raw / 4) % 1.0) for h in hues])
        assert err < 0.01, (raw, err)


def test_spotlight_hue_changes_lit_patch(renderer):
    ground = dict(bg_hue=0.0, obj_hue=0.0, pos_z=-1.0)  # reddish ground HSV(0, 0.6, 1): all channels > 0
    violet = linear(renderer.render(latents(**ground, spot_hue=-1.0), 0, 0))  # HSV(0.75, .8, 1) = (.6, .2, 1)
    green = linear(renderer.render(latents(**ground, spot_hue=1.0), 0, 0))  # HSV(0.25, .8, 1) = (.6, 1, .2)
    diff = green - violet
    patch = np.abs(diff).sum(-1) > 0.05
    assert patch.sum() > 0.02 * RES * RES
    d = diff[patch].mean(0)
    assert d[1] > 0.02 and d[2] < -0.02  # green up, blue down
    assert abs(d[0]) < 0.3 * d[1]  # red is the same in both spot colours


def test_spotlight_angle_moves_lit_patch(renderer):
    """t = +pi/2 puts the light at +x, the patch beyond the object at -x (far: up); t = -pi/2 the other way."""
    kw = dict(bg_hue=0.0, spot_hue=0.0, pos_z=-1.0)
    far = linear(renderer.render(latents(**kw, spot_angle=1.0), 0, 0)).sum(-1)
    near = linear(renderer.render(latents(**kw, spot_angle=-1.0), 0, 0)).sum(-1)
    side = linear(renderer.render(latents(**kw, spot_angle=0.0), 0, 0)).sum(-1)  # light at +y, patch at -y
    row_far = centroid(far - near > 0.1)[0]
    row_near = centroid(near - far > 0.1)[0]
    assert row_near - row_far > 0.2 * RES
    col_side = centroid(side - far > 0.1)[1]
    assert col_side < 0.4 * RES


def test_rotation_changes_silhouette_not_position(renderer):
    a = red_mask(renderer.render(latents(**RED_ON_GREEN), 0, 0))
    b = red_mask(renderer.render(latents(**RED_ON_GREEN, rot_alpha=1.0, rot_beta=0.3, rot_gamma=0.5), 0, 0))
    iou = (a & b).sum() / (a | b).sum()
    assert iou < 0.8, iou
    assert np.linalg.norm(centroid(a) - centroid(b)) < 0.12 * RES


def test_classes_have_different_silhouettes(renderer):
    masks = [red_mask(renderer.render(latents(**RED_ON_GREEN), k, 0)) for k in range(7)]
    cents = [centroid(m) for m in masks]
    for i in range(7):
        for j in range(i + 1, 7):
            iou = (masks[i] & masks[j]).sum() / (masks[i] | masks[j]).sum()
            assert iou < 0.9, (i, j, iou)
            assert np.linalg.norm(cents[i] - cents[j]) < 0.25 * RES  # same pose: bounding boxes share a centre


def test_same_seed_same_pixels_any_threads(renderer):
    from ident3d.render.blender import BlenderRenderer

    rng = np.random.default_rng(0)
    lat = rng.uniform(-1, 1, (3, len(LATENT_NAMES))).astype(np.float32)
    classes, seeds = np.array([0, 3, 6]), np.array([11, 12, 13], dtype=np.uint64)
    first = renderer.render_batch(lat, classes, seeds)
    np.testing.assert_array_equal(renderer.render_batch(lat, classes, seeds), first)
    assert not np.array_equal(renderer.render_batch(lat, classes, seeds + 1), first)  # the seed matters
    scene = load_scene("causal3dident")
    one = BlenderRenderer(scene, replace(SETTINGS, threads=1)).render_batch(lat, classes, seeds)
    two = BlenderRenderer(scene, replace(SETTINGS, threads=2)).render_batch(lat, classes, seeds)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, first)


def test_sequences_render_the_same_pixels_as_one_image_at_a_time(renderer, monkeypatch):
    """render_batch renders frame sequences in one persistent Cycles session; each image equals the one the
    per-image operator renders from scratch, whatever the sequence length and the order of the batch."""
    import bpy

    import ident3d.render.blender as rb

    rng = np.random.default_rng(5)
    lat = rng.uniform(-1, 1, (5, len(LATENT_NAMES))).astype(np.float32)
    classes, seeds = np.array([0, 2, 6, 0, 4]), np.array([3, 1, 4, 1, 5], dtype=np.uint64)
    monkeypatch.setattr(rb, "SEQUENCE_FRAMES", 3)  # two sequences: 3 + 2 frames
    batch = renderer.render_batch(lat, classes, seeds)
    bpy.context.scene.render.use_persistent_data = False
    try:
        single = np.stack([renderer.render_pose(pose(renderer.scene, lat[i].tolist(), int(classes[i])), int(seeds[i]))
                           for i in range(5)])
    finally:
        bpy.context.scene.render.use_persistent_data = True
    np.testing.assert_array_equal(batch, single)
    order = [4, 2, 0, 3, 1]
    np.testing.assert_array_equal(renderer.render_batch(lat[order], classes[order], seeds[order]), single[order])
    assert len({single[i].tobytes() for i in range(5)}) == 5  # five different images, not one repeated


def test_cpu_threads_are_fixed_and_persistent_data_on():
    import bpy

    from ident3d.render.blender import BlenderRenderer

    r = BlenderRenderer(load_scene("3dident"), replace(SETTINGS, device="cpu"), threads=1)
    sc = bpy.context.scene
    assert (sc.render.threads_mode, sc.render.threads, sc.render.use_persistent_data) == ("FIXED", 1, True)
    r.close()


def test_3dident_scene_renders_teapot(renderer):
    from ident3d.render.blender import BlenderRenderer

    three_scene, c3d = load_scene("3dident"), load_scene("causal3dident")
    # same set-up (camera, lights, ground, materials, bindings) and class 0 is 3DIdent's teapot
    assert replace(c3d, name="3dident", description=three_scene.description, classes=c3d.classes[:1]) == three_scene
    rng = np.random.default_rng(3)
    lat = np.concatenate([latents(**RED_ON_GREEN)[None], rng.uniform(-1, 1, (2, len(LATENT_NAMES)))]).astype(np.float32)
    seeds = np.array([0, 5, 9])
    three = BlenderRenderer(three_scene, SETTINGS).render_batch(lat, None, seeds)
    # 3dident's only object is class 0 (Teapot) of causal3dident: same scene, same pixels
    np.testing.assert_array_equal(three, renderer.render_batch(lat, np.zeros(3, dtype=np.int64), seeds))


def test_renderer_uses_the_hue_mode(renderer):
    """In 'original' mode every object raw hue in (-2/3, 0) renders the same red as raw 0; 'wrap' tells them apart."""
    from ident3d.render.blender import BlenderRenderer

    lat = np.stack([latents(obj_hue=0.0, bg_hue=1.0), latents(obj_hue=-0.4, bg_hue=1.0)])
    seeds = np.array([4, 4])
    orig = BlenderRenderer(load_scene("3dident"), replace(SETTINGS, hue_mode="original")).render_batch(lat, None, seeds)
    np.testing.assert_array_equal(orig[0], orig[1])
    wrap = renderer.render_batch(lat, np.zeros(2, dtype=np.int64), seeds)
    assert np.abs(wrap[0].astype(int) - wrap[1].astype(int)).sum(-1).max() > 100


def _top_view_body(scene_dict: dict, rot_gamma: float) -> tuple[float, float]:
    """Teapot seen from straight above with its spout-handle line along a row: the column of the body's centre,
    and how much farther the silhouette reaches right of it than left (> 0: the spout, the longer side, is right)."""
    from ident3d.render.blender import BlenderRenderer

    # camera above the object (below the spotlight), turned so image right is world direction +45 deg
    d = {**scene_dict, "camera": {**scene_dict["camera"], "location": [0, 0, 9], "look_at": None,
                                  "rotation_rad": [0.0, 0.0, math.pi / 4]}}
    img = BlenderRenderer(scene_from_dict(d), SETTINGS).render(latents(**{**RED_ON_GREEN, "pos_z": 0.0, "rot_gamma": rot_gamma}))
    mask = red_mask(img)
    widths = mask.sum(0)  # body: the columns where the silhouette is wide (spout and handle are thin)
    body = np.nonzero(widths > 0.6 * widths.max())[0]
    centre, cols = (body.min() + body.max()) / 2, np.nonzero(widths)[0]
    return centre, (cols.max() - centre) - (centre - cols.min())


def test_rotation_about_z_turns_the_teapot_about_its_body_axis():
    """rot_gamma = +-1 is a half turn about z: the spout flips sides while the body (on the pivot) stays put; the
    same check on a teapot pivoted at its bounding-box centre must fail (the body moves 2 * 0.21 units)."""
    base = load_scene("3dident").to_dict()
    body_a, reach_a = _top_view_body(base, 1.0)  # spout at +45 deg: image right
    body_b, reach_b = _top_view_body(base, -1.0)  # spout at -135 deg: image left
    assert reach_a >= 1.5 and reach_b <= -1.5, (reach_a, reach_b)  # the spout side flips
    assert abs(body_a - body_b) < 0.75, (body_a, body_b)
    boxed = {**base, "classes": [{**base["classes"][0], "pivot": "bbox_centre"}]}
    body_a, _ = _top_view_body(boxed, 1.0)
    body_b, _ = _top_view_body(boxed, -1.0)
    assert abs(body_a - body_b) > 1.5, (body_a, body_b)


def test_missing_mesh_file_is_a_clear_error(tmp_path):
    from ident3d.render.blender import BlenderRenderer
    from ident3d.render.meshes import MeshFileError

    missing = tmp_path / "no_such_hare.obj"
    scene = load_scene("causal3dident").with_meshes({"Hare": missing})
    with pytest.raises(FileNotFoundError) as info:
        BlenderRenderer(scene, SETTINGS)
    msg = str(info.value)
    assert isinstance(info.value, MeshFileError)
    assert "Hare" in msg and str(missing) in msg and "\n" not in msg


@pytest.mark.parametrize("suffix", [".obj", ".ply", ".stl", ".glb", ".blend"])
def test_load_user_mesh_files(tmp_path, suffix):
    import bpy

    from ident3d.render.meshes import builtin_mesh, class_mesh

    bpy.ops.wm.read_factory_settings(use_empty=True)
    mesh = builtin_mesh("cone")
    obj = bpy.data.objects.new("src", mesh)
    obj.scale = (1.0, 2.0, 3.0)  # world-space size 2 x 4 x 6 after import
    bpy.context.scene.collection.objects.link(obj)
    path = tmp_path / f"mesh{suffix}"
    if suffix == ".blend":
        bpy.data.libraries.write(str(path), {obj})
    else:
        op = {".obj": bpy.ops.wm.obj_export, ".ply": bpy.ops.wm.ply_export, ".stl": bpy.ops.wm.stl_export}
        if suffix == ".glb":
            bpy.ops.export_scene.gltf(filepath=str(path), export_format="GLB")
        else:
            op[suffix](filepath=str(path))
    bpy.data.objects.remove(obj)
    loaded = class_mesh(str(path), "Test", 4.4)
    co = np.array([v.co[:] for v in loaded.vertices])
    size = co.max(0) - co.min(0)
    assert size.max() == pytest.approx(4.4, rel=1e-4)
    np.testing.assert_allclose(np.sort(size), np.array([2.0, 4.0, 6.0]) * 4.4 / 6.0, rtol=1e-3)
    np.testing.assert_allclose((co.max(0) + co.min(0)) / 2, 0.0, atol=1e-4)
