"""The Python render API and given latents, with real bpy, real Zarr and one real Dask LocalCluster shared by
the module: plan validation, --latents round trips (CSV, npy, npz), resume and refusal, bad files, and
view render noise that is independent of the anchor's by default."""


import numpy as np
import pytest
import zarr
from helpers import tree_digest

from ident3d.causal import UserError, load_scm
from ident3d.pipelines.cli import main
from ident3d.render import plan_render, render_store
from ident3d.render.worker import view_seed

TINY = {"resolution": 32, "samples": 4}


@pytest.fixture(scope="module")
def cluster():
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0", silence_logs=40,
                      env={"OMP_NUM_THREADS": "2"}) as c:
        yield c.scheduler_address


def cli(out, *extra, scheduler=None):
    sched = ["--scheduler", scheduler] if scheduler else []
    return main(["render", "--out", str(out), "--resolution", "32", "--samples", "4", "--chunk-size", "3",
                 "--no-progress", *sched, *extra])


# ----- plan validation (no rendering) ------------------------------------------------------------
@pytest.mark.parametrize("kwargs,expected", [
    ({"n": 0}, "n must be a positive number of images, got 0"),
    ({"n": 4, "chunk_size": 0}, "chunk size must be a positive number"),
    ({"n": 4, "seed": -1}, "seed must be a non-negative"),
    ({"n": 4, "views": "a:wheels"}, "unknown node, group or change set 'wheels'"),
    ({"n": 4, "views": "a:hues,a:positions"}, "view 'a' given twice"),
    ({"n": 4, "views": {"bad name": "hues"}}, "bad view name 'bad name'"),
    ({"n": 4, "scm": "content_style"}, "but SCM content_style samples"),
    ({"n": 4, "meshes": {"Teapot": "/nonexistent/t.obj"}}, "not found: /nonexistent/t.obj"),
    ({"n": 4, "meshes": ["Teapot"]}, "expected CLASS=PATH"),
    ({"n": 4, "view_seeds": "same"}, "view seeds must be one of independent, shared"),
    ({"n": 4, "settings": {"resolution": 4}}, "resolution must be at least 8 px"),
    ({"n": 4, "settings": {"hue_mode": "rainbow"}}, "hue mode 'rainbow'"),
    ({}, "give n (images to sample) or latents"),
    ({"n": 3, "latents": np.zeros((2, 10)), "classes": np.zeros(2, int)}, "n=3 but the latents (array) have 2 rows"),
    ({"latents": np.zeros((2, 9)), "classes": np.zeros(2, int)}, "must have shape (N, 10)"),
    ({"latents": np.zeros((2, 10))}, "needs a class per row"),
    ({"latents": np.zeros((2, 10)), "classes": np.array([0, 7])}, "row 1 has class 7, outside 0..6"),
    ({"latents": np.array([[0.0] * 10, [0.0] * 9 + [np.inf]]), "classes": np.zeros(2, int)},
     "row 1 has a non-finite value (inf) in bg_hue"),
])
def test_plan_rejects_bad_arguments_with_one_line(tmp_path, kwargs, expected):
    with pytest.raises(UserError) as info:
        plan_render(tmp_path / "s.zarr", **kwargs)
    assert expected in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "s.zarr").exists()


def test_plan_records_settings_views_and_given_latents(tmp_path):
    scm = load_scm("causal3dident")
    s = scm.sample(5, seed=3)
    p = plan_render(tmp_path / "s.zarr", latents=s, settings={"resolution": 32, "hue_mode": "original"},
                    views={"h": "hues", "p": ["pos_x"]}, view_seeds="shared", chunk_size=2)
    assert p.attrs.render["hue_mode"] == "original" and p.attrs.render["resolution"] == 32
    assert p.attrs.views == {"h": ["obj_hue", "spot_hue", "bg_hue"], "p": ["pos_x"]}
    assert p.attrs.view_seeds == "shared" and p.job.view_seeds == "shared" and p.job.given
    assert p.attrs.n == 5 and p.job.n_chunks == 3 and p.attrs.latents_source == "Samples"
    assert np.array_equal(p.latents, s.latents) and np.array_equal(p.classes, s.classes)
    moved = s.latents.copy()
    moved[0, 0] += 1e-3  # one changed value changes the fingerprint
    q = plan_render(tmp_path / "s.zarr", latents=moved, classes=s.classes)
    assert len(p.attrs.latents_sha256) == 64 and q.attrs.latents_sha256 != p.attrs.latents_sha256
    sampled = plan_render(tmp_path / "s.zarr", n=5)
    assert sampled.attrs.latents_source == "scm" and sampled.attrs.latents_sha256 is None
    assert sampled.latents is None and not sampled.job.given and sampled.attrs.view_seeds == "independent"


# ----- given latents: round trips, resume, refusal, bad files ------------------------------------
def write_csv(path, s, order, class_names=True):
    """Columns in ``order`` (latent names and 'class'); classes as names or indices."""
    scm_names = list(s.names)
    lines = [",".join(order)]
    for i in range(len(s)):
        cells = []
        for c in order:
            if c == "class":
                cells.append(s.class_names[s.classes[i]] if class_names else str(int(s.classes[i])))
            else:
                cells.append(repr(float(s.latents[i, scm_names.index(c)])))
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def csv_store(tmp_path_factory, cluster):
    d = tmp_path_factory.mktemp("given")
    s = load_scm("causal3dident").sample(5, seed=11)
    order = list(np.random.default_rng(0).permutation(["class", *s.names]))
    assert order != ["class", *s.names]
    path = write_csv(d / "mine.csv", s, order)
    out = d / "csv.zarr"
    assert cli(out, "--latents", str(path), "--views", "hues:hues", scheduler=cluster) == 0
    return s, path, out


def test_csv_latents_round_trip_with_views(csv_store):
    s, path, out = csv_store
    g = zarr.open_group(str(out), mode="r")
    assert np.array_equal(g["latents"][:], s.latents) and np.array_equal(g["classes"][:], s.classes)
    assert g["done"][:].all() and g.attrs["n"] == 5 and g.attrs["latents_source"] == "mine.csv"
    imgs = g["images"][:]
    assert imgs.shape == (5, 32, 32, 3) and len({im.tobytes() for im in imgs}) == 5 and imgs.std() > 10
    # views are LT transforms of the given rows: only the hues change
    scm = load_scm(g.attrs["scm"])
    moved = scm.transform(s, "hues", seed=view_seed(0, "hues"))
    assert np.array_equal(g["views/hues/latents"][:], moved.latents)
    changed = np.any(g["views/hues/latents"][:] != s.latents, axis=0)
    assert [n for n, c in zip(s.names, changed, strict=True) if c] == ["obj_hue", "spot_hue", "bg_hue"]


def test_npz_and_npy_latents_round_trip(tmp_path, cluster):
    s = load_scm("causal3dident").sample(4, seed=2)
    np.savez(tmp_path / "z.npz", latents=s.latents, classes=s.classes)
    report = render_store(tmp_path / "npz.zarr", latents=tmp_path / "z.npz", settings=TINY, chunk_size=3,
                          scheduler=cluster, progress=False)
    g = zarr.open_group(str(tmp_path / "npz.zarr"), mode="r")
    assert report.ok and report.rendered == [0, 1] and g["done"][:].all()
    assert np.array_equal(g["latents"][:], s.latents) and np.array_equal(g["classes"][:], s.classes)
    t = load_scm("3dident").sample(3, seed=4)
    np.save(tmp_path / "t.npy", t.latents.astype(np.float64))
    assert cli(tmp_path / "npy.zarr", "--scene", "3dident", "--latents", str(tmp_path / "t.npy"), "--n", "3",
               scheduler=cluster) == 0
    g = zarr.open_group(str(tmp_path / "npy.zarr"), mode="r")
    assert np.array_equal(g["latents"][:], t.latents) and "classes" not in g and g["images"][:].std() > 10


def test_given_latents_resume_after_a_partial_render_and_refuse_another_file(csv_store, tmp_path, cluster, capsys):
    s, path, out = csv_store
    g = zarr.open_group(str(out), mode="r+")
    ref = {k: g[k][:] for k in ("images", "latents", "classes", "views/hues/images")}
    # as if the run had stopped after chunk 0, before the driver wrote chunk 1's rows: nothing there
    g["done"][1] = False
    g["latents"][3:5] = 0.0
    g["classes"][3:5] = 0
    g["images"][3:5] = 0
    g["views/hues/images"][3:5] = 0
    capsys.readouterr()
    assert cli(out, "--latents", str(path), "--views", "hues:hues", scheduler=cluster) == 0
    assert "rendered 1 chunks" in capsys.readouterr().out  # chunk 0 was kept
    g = zarr.open_group(str(out), mode="r")
    assert g["done"][:].all()
    for k, v in ref.items():
        assert np.array_equal(g[k][:], v), k
    # the same command with other latents is refused, and the store is untouched
    other = s.with_latents(s.latents.copy(), s.classes)
    other.latents[4, 2] = 0.5
    digest = tree_digest(out)
    assert cli(out, "--latents", str(write_csv(tmp_path / "other.csv", other, ["class", *s.names])),
               "--views", "hues:hues") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rendered with different latents_sha256" in err[0], err
    assert tree_digest(out) == digest


def _csv(text):
    def make(d):
        (d / "x.csv").write_text(text)
        return d / "x.csv"
    return make


NAMES = load_scm("causal3dident").names
GOOD_ROW = ",".join(["0.1"] * 10)


@pytest.mark.parametrize("make,extra,expected", [
    (_csv(",".join(NAMES) + "\n" + GOOD_ROW + "\n"), [], "missing column 'class'"),
    (_csv(",".join(["class", *NAMES[:-1]]) + "\nCow," + ",".join(["0.1"] * 9) + "\n"), [], "missing column 'bg_hue'"),
    (_csv(",".join(["class", *NAMES, "colour"]) + "\nCow," + GOOD_ROW + ",1\n"), [], "unknown column 'colour'"),
    (_csv(",".join(["class", *NAMES]) + "\nCow," + GOOD_ROW + "\nCow,nan" + ",0.1" * 9 + "\n"), [],
     "row 1 has a non-finite value (nan) in pos_x"),
    (_csv(",".join(["class", *NAMES]) + "\nUnicorn," + GOOD_ROW + "\n"), [], "row 0 has unknown class 'Unicorn'"),
    (_csv(",".join(["class", *NAMES]) + "\nCow," + GOOD_ROW.replace("0.1", "x", 1) + "\n"), [],
     "row 0 (line 2) has 'x' in pos_x, not a number"),
    (_csv(",".join(["class", *NAMES]) + "\n"), [], "no rows"),
    (_csv(",".join(["class", *NAMES]) + "\nCow," + GOOD_ROW + "\n"), ["--n", "2"], "n=2 but the latents (x.csv) have 1 rows"),
    (lambda d: np.save(d / "x.npy", np.zeros((3, 9))) or d / "x.npy", ["--scene", "3dident"], "must have shape (N, 10)"),
    (lambda d: np.save(d / "x.npy", np.zeros((3, 10))) or d / "x.npy", [], "holds no classes"),
    (lambda d: np.savez(d / "x.npz", latents=np.zeros((3, 10))) or d / "x.npz", [], "needs a class per row"),
    (lambda d: np.savez(d / "x.npz", z=np.zeros((3, 10))) or d / "x.npz", [], "unknown key 'z'"),
    (lambda d: (d / "x.npy").write_bytes(b"not numpy at all") and d / "x.npy", [], "cannot read latents file"),
    (lambda d: (d / "x.txt").write_text("1,2") and d / "x.txt", [], "use a .csv, .npy or .npz file"),
    (lambda d: d / "missing.csv", [], "not found"),
])
def test_bad_latents_file_exit_2_one_line_nothing_written(tmp_path, capsys, make, extra, expected):
    path = make(tmp_path)
    out = tmp_path / "never.zarr"
    assert cli(out, "--latents", str(path), *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert not out.exists()


# ----- render noise of exact LT views -------------------------------------------------------------
def test_views_have_their_own_render_noise_unless_shared(tmp_path, cluster):
    """A view whose latents are the anchor's up to 1e-6 (tiny transform sigma) differs from its anchor only by
    Cycles noise. Residuals against a 128-sample reference: uncorrelated by default, identical when shared."""
    spec = load_scm("causal3dident").spec
    spec["transform"] = {"sigma": 1e-6}
    s = load_scm(spec).sample(3, seed=7)
    noisy = {"resolution": 32, "samples": 4, "denoise": False}
    common = {"scm": spec, "latents": s.latents, "classes": s.classes, "views": "same:hues", "chunk_size": 3,
              "scheduler": cluster, "progress": False}
    for mode in ("independent", "shared"):
        assert render_store(tmp_path / f"{mode}.zarr", settings=noisy, view_seeds=mode, **common).ok
    common.pop("views")
    assert render_store(tmp_path / "ref.zarr", settings={**noisy, "samples": 128}, seed=1, **common).ok
    ref = zarr.open_group(str(tmp_path / "ref.zarr"), mode="r")["images"][:].astype(float)

    def residual_corr(mode):
        g = zarr.open_group(str(tmp_path / f"{mode}.zarr"), mode="r")
        anchor, view = g["images"][:].astype(float), g["views/same/images"][:].astype(float)
        assert np.abs(g["views/same/latents"][:] - s.latents).max() < 1e-4  # the view did not move
        return np.corrcoef((anchor - ref).ravel(), (view - ref).ravel())[0, 1], anchor, view

    c_ind, a_ind, v_ind = residual_corr("independent")
    c_sh, a_sh, v_sh = residual_corr("shared")
    assert np.array_equal(a_ind, a_sh)  # anchors keep their seeds in both modes
    assert np.abs(a_ind - ref).mean() > 2  # 4 samples without a denoiser: visible noise
    assert abs(c_ind) < 0.2, c_ind
    assert c_sh > 0.9 and not abs(c_sh) < 0.2, c_sh  # the threshold does catch shared noise
    assert np.abs(v_sh - a_sh).mean() < 0.05 * np.abs(v_ind - a_ind).mean()
