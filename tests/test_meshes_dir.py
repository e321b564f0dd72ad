"""``ident3d render --meshes-dir``: per-class mesh files found by name, normalised like the stand-ins, recorded
(absolute paths, sha256) in the store and refused on resume when they change; and ``ident3d show A B`` side by
side. Real bpy, Zarr and one Dask LocalCluster (1 worker) shared by the module; meshes are generated here."""

import shutil

import numpy as np
import pytest
import zarr
from helpers import tree_digest
from PIL import Image

from ident3d.causal.errors import UserError
from ident3d.pipelines.cli import main
from ident3d.render import render_store
from ident3d.render.meshes import class_mesh, file_sha256, find_class_meshes, write_mesh
from ident3d.render.scene import LATENT_NAMES

CLASSES = ("Teapot", "Hare", "Dragon", "Cow", "Armadillo", "Horse", "Head")
TINY = {"resolution": 32, "samples": 4}
ROW_CLASSES = np.array([0, 1, 3, 5])  # Teapot and Horse keep their stand-in; Hare and Cow get a file


def box(sx: float, sy: float, sz: float, at=(0.0, 0.0, 0.0)) -> tuple[np.ndarray, np.ndarray]:
    """An axis-aligned box of sides (sx, sy, sz) with its low corner at ``at``, 12 triangles."""
    verts = np.array([[x, y, z] for x in (0, sx) for y in (0, sy) for z in (0, sz)], dtype=float) + at
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                      [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return verts, faces


def octahedron() -> tuple[np.ndarray, np.ndarray]:
    """A regular octahedron."""
    verts = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=float)
    faces = np.array([[0, 2, 4], [4, 2, 1], [1, 2, 5], [5, 2, 0], [4, 3, 0], [1, 3, 4], [5, 3, 1], [0, 3, 5]])
    return verts, faces


def tetrahedron() -> tuple[np.ndarray, np.ndarray]:
    """A regular tetrahedron."""
    verts = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=float)
    return verts, np.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]])


def one_line(capsys) -> str:
    """The single stderr line of a failed in-process command (no traceback)."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.fixture(scope="module")
def cluster():
    """One local Dask cluster (a single 1-thread worker process) for every render of the module."""
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0", silence_logs=40,
                      env={"OMP_NUM_THREADS": "1"}) as c:
        yield c.scheduler_address


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A meshes dir (Hare by its alias 'Bunny', an upright box; Cow as an octahedron; a text file that is
    ignored) and four latent rows, one per class in ROW_CLASSES: a red object on a green ground."""
    root = tmp_path_factory.mktemp("inputs")
    meshes = root / "meshes"
    meshes.mkdir()
    write_mesh(meshes / "Bunny.obj", *box(1.0, 3.0, 1.0))
    write_mesh(meshes / "cow.ply", *octahedron())
    (meshes / "notes.txt").write_text("not a mesh\n")
    lat = np.zeros((len(ROW_CLASSES), len(LATENT_NAMES)), dtype=np.float32)
    lat[:, LATENT_NAMES.index("pos_z")] = -0.3
    lat[:, LATENT_NAMES.index("rot_gamma")] = 0.3
    lat[:, LATENT_NAMES.index("bg_hue")] = 1.0
    lat[:, LATENT_NAMES.index("spot_hue")] = 1.0
    np.savez(root / "rows.npz", latents=lat, classes=ROW_CLASSES)
    return {"meshes": meshes, "latents": root / "rows.npz"}


def render(out, inputs, cluster, **kw):
    """Render the four rows into ``out`` (one chunk) on the module's cluster."""
    return render_store(out, latents=inputs["latents"], settings=TINY, chunk_size=4, scheduler=cluster,
                        progress=False, **kw)


@pytest.fixture(scope="module")
def stores(inputs, cluster, tmp_path_factory):
    """The same rows rendered with the stand-ins and with the meshes dir."""
    root = tmp_path_factory.mktemp("stores")
    assert render(root / "standins.zarr", inputs, cluster).ok
    assert render(root / "files.zarr", inputs, cluster, meshes_dir=inputs["meshes"]).ok
    return root / "standins.zarr", root / "files.zarr"


# ----- finding the files (no Blender) ----------------------------------------------------------------------
def test_folder_matches_class_names_and_aliases_any_case(tmp_path, monkeypatch):
    folder = tmp_path / "shapes"
    folder.mkdir()
    for name in ("BUNNY.OBJ", "spot.ply", "ShapeHead.stl", "utah-teapot.glb", "wheel.stl", "readme.md"):
        (folder / name).write_text("x")
    monkeypatch.chdir(tmp_path)
    got = find_class_meshes("shapes", CLASSES)  # a relative folder comes back absolute
    assert got.found == {"Hare": str(folder / "BUNNY.OBJ"), "Cow": str(folder / "spot.ply"),
                         "Head": str(folder / "ShapeHead.stl"), "Teapot": str(folder / "utah-teapot.glb")}
    assert got.standins == ("Dragon", "Armadillo", "Horse") and got.ignored == ("wheel.stl",)
    assert got.folder == str(folder)


@pytest.mark.parametrize("case,expected", [
    ("missing", "meshes dir {d} not found"),
    ("empty", "meshes dir {d} holds no mesh files"),
    ("file", "meshes dir {d} is a file, not a folder"),
    ("unmatched", "meshes dir {d}: no file names a class of the scene (Teapot, Hare"),
    ("two", "meshes dir {d}: both Hare.ply and bunny.obj are meshes for class Hare; keep one"),
])
def test_bad_meshes_dir_is_one_line_exit_2_and_creates_nothing(tmp_path, capsys, case, expected):
    d = tmp_path / "shapes"
    if case == "file":
        d.write_text("x")
    elif case != "missing":
        d.mkdir()
    names = {"unmatched": ["wheel.obj", "notes.txt"], "two": ["bunny.obj", "Hare.ply"]}.get(case, [])
    for name in names:
        write_mesh(d / name, *tetrahedron()) if name.endswith((".obj", ".ply")) else (d / name).write_text("x")
    out = tmp_path / "s.zarr"
    code = main(["render", "--n", "2", "--out", str(out), "--meshes-dir", str(d), "--no-progress"])
    line = one_line(capsys)
    assert code == 2 and expected.format(d=d) in line, line
    assert not out.exists()


# ----- normalising a file mesh (in-process Blender) ---------------------------------------------------------
@pytest.mark.parametrize("suffix", [".obj", ".ply", ".stl"])
def test_file_mesh_is_normalised_like_the_stand_ins_and_upright(tmp_path, suffix):
    """An off-centre 1 x 3 x 2 box, long along the file's +Y (up): its largest side becomes the stand-ins'
    (the scene extent), its bounding box is centred on the pivot, and file Y becomes Blender Z."""
    import bpy

    from ident3d.render.scene import load_scene

    scene = load_scene("causal3dident")
    path = write_mesh(tmp_path / f"hare{suffix}", *box(1.0, 3.0, 2.0, at=(5.0, -2.0, 7.0)))
    stand_in = class_mesh(scene.classes[1].mesh, "Hare", scene.classes[1].mesh_size(scene.extent))
    mine = class_mesh(str(path), "Hare", scene.with_meshes({"Hare": path}).classes[1].mesh_size(scene.extent))
    co = {name: np.array([v.co[:] for v in m.vertices]) for name, m in (("stand_in", stand_in), ("mine", mine))}
    for m in (stand_in, mine):
        bpy.data.meshes.remove(m)
    size = co["mine"].max(0) - co["mine"].min(0)
    assert size.max() == pytest.approx((co["stand_in"].max(0) - co["stand_in"].min(0)).max(), rel=1e-5)
    assert size.max() == pytest.approx(4.442, rel=1e-5)
    # file (x, y, z) sides (1, 3, 2) -> Blender (x, -z, y): (1, 2, 3) scaled by 4.442 / 3
    np.testing.assert_allclose(size, np.array([1.0, 2.0, 3.0]) * 4.442 / 3.0, rtol=1e-5)
    np.testing.assert_allclose((co["mine"].max(0) + co["mine"].min(0)) / 2, 0.0, atol=1e-5)


# ----- rendering --------------------------------------------------------------------------------------------
def test_file_meshes_change_only_their_classes(stores, inputs):
    standins, files = (zarr.open_group(str(p), mode="r") for p in stores)
    a, b = standins["images"][:].astype(int), files["images"][:].astype(int)
    for row, cls in enumerate(ROW_CLASSES):
        changed = (np.abs(a[row] - b[row]).sum(-1) > 60).mean()
        if CLASSES[cls] in ("Hare", "Cow"):
            assert changed > 0.03, (CLASSES[cls], changed)  # another silhouette
        else:
            np.testing.assert_array_equal(a[row], b[row], err_msg=CLASSES[cls])  # bit-identical stand-in
    attrs = dict(files.attrs)
    hare, cow = inputs["meshes"] / "Bunny.obj", inputs["meshes"] / "cow.ply"
    assert attrs["meshes"]["Hare"] == str(hare) and attrs["meshes"]["Cow"] == str(cow)
    assert attrs["meshes"]["Teapot"] == "builtin:teapot" and attrs["meshes_dir"] == str(inputs["meshes"])
    assert attrs["mesh_sha256"] == {"Hare": file_sha256(hare), "Cow": file_sha256(cow)}
    assert standins.attrs["mesh_sha256"] is None and standins.attrs["meshes_dir"] is None


def test_cli_says_which_classes_use_a_file_and_resumes(stores, inputs, capsys):
    code = main(["render", "--latents", str(inputs["latents"]), "--out", str(stores[1]), "--resolution", "32",
                 "--samples", "4", "--chunk-size", "4", "--meshes-dir", str(inputs["meshes"]), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    assert (f"meshes: Hare <- Bunny.obj, Cow <- cow.ply (from {inputs['meshes']}); "
            "stand-ins: Teapot, Dragon, Armadillo, Horse, Head") in out
    assert "is complete (4 images, 1 chunks); nothing to do" in out


def test_resuming_with_other_meshes_is_refused(stores, inputs, cluster, tmp_path):
    files = stores[1]
    before = tree_digest(files)
    other = tmp_path / "other"
    shutil.copytree(inputs["meshes"], other)
    write_mesh(other / "cow.ply", *tetrahedron())
    with pytest.raises(UserError, match=r"different scene_spec, mesh_sha256; use another --out"):
        render(files, inputs, cluster, meshes_dir=other)
    cow = inputs["meshes"] / "cow.ply"
    original = cow.read_bytes()
    try:  # the same path with other bytes: only the hashes tell
        write_mesh(cow, *tetrahedron())
        with pytest.raises(UserError, match=r"rendered with different mesh_sha256; use another --out"):
            render(files, inputs, cluster, meshes_dir=inputs["meshes"])
    finally:
        cow.write_bytes(original)
    report = render(files, inputs, cluster, meshes_dir=inputs["meshes"])  # the same files again: resumes
    assert report.ok and report.rendered == [] and report.skipped == [0]
    assert tree_digest(files) == before


def test_mesh_blender_cannot_use_fails_in_the_worker_as_one_line(inputs, cluster, tmp_path, capsys):
    """Loose vertices pass the up-front format check; the worker's Blender finds no faces: exit 2, one line."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "hare.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\n")
    out = tmp_path / "bad.zarr"
    code = main(["render", "--latents", str(inputs["latents"]), "--out", str(out), "--resolution", "32",
                 "--samples", "4", "--chunk-size", "4", "--meshes-dir", str(bad), "--scheduler", cluster,
                 "--retries", "5", "--no-progress"])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in captured.err, captured.err
    assert f"class Hare: {bad / 'hare.obj'} has no faces" in err[0], err[0]
    assert "meshes: Hare <- hare.obj" in captured.out
    assert not zarr.open_group(str(out), mode="r")["done"][:].any()


# ----- side by side ----------------------------------------------------------------------------------------
def test_side_by_side_figure_differs_where_the_meshes_differ(stores, tmp_path, capsys):
    from ident3d.pipelines.show import save_side_by_side
    from ident3d.store.zarr_io import open_store

    png = tmp_path / "side_by_side.png"
    assert main(["show", str(stores[1]), str(stores[0]), "--out", str(png)]) == 0
    assert f"wrote {png}" in capsys.readouterr().out and png.is_file()
    again = tmp_path / "again.png"
    boxes = save_side_by_side([open_store(str(p)) for p in (stores[1], stores[0])], [str(stores[1]),
                                                                                   str(stores[0])], again)
    assert again.read_bytes() == png.read_bytes()
    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    assert len(boxes) == 2 and len(boxes[0]) == len(ROW_CLASSES)
    top, bottom = boxes
    assert all(t[1] < b[1] for t, b in zip(top, bottom, strict=True))  # the files' store is the upper half
    for col, cls in enumerate(ROW_CLASSES):
        (x0, y0, x1, y1), (u0, v0, _, _) = top[col], bottom[col]
        h, w = min(y1 - y0, bottom[col][3] - v0), min(x1 - x0, bottom[col][2] - u0)
        diff = np.abs(img[y0:y0 + h, x0:x0 + w] - img[v0:v0 + h, u0:u0 + w]).mean()
        if CLASSES[cls] in ("Hare", "Cow"):
            assert diff > 3.0, (CLASSES[cls], diff)
        else:
            assert diff < 1.0, (CLASSES[cls], diff)


def test_side_by_side_refuses_stores_of_other_latents(stores, tmp_path, capsys):
    copy = tmp_path / "moved.zarr"
    shutil.copytree(stores[0], copy)
    zarr.open_group(str(copy), mode="r+")["latents"][2, 0] = 0.5
    code = main(["show", str(stores[1]), str(copy), "--out", str(tmp_path / "x.png")])
    line = one_line(capsys)
    assert code == 2 and f"{copy} holds other latents than {stores[1]} (row 2)" in line, line
    assert not (tmp_path / "x.png").exists()
