"""The public API for users' own models, on a real render (bpy, Zarr): ``ident3d.open_store`` reads what the store
holds (numpy, dask, xarray; paths and fsspec URLs; damaged chunks in one line), ``ident3d.loader`` feeds exactly the
trainer's batches and views, and ``ident3d.metrics`` equals the functions it wraps with one keyword-only convention
that refuses swapped or malformed arrays in one line."""

from __future__ import annotations

import importlib.util
import inspect
import shutil
import sys

import numpy as np
import pytest
import torch
import zarr

import ident3d
import ident3d.metrics as M
from ident3d import evaluation
from ident3d.causal.errors import UserError
from ident3d.store.zarr_io import CorruptChunkError

HUES = ["obj_hue", "spot_hue", "bg_hue"]
# 48 rows of 16 px in chunks of 16 (3 chunks), with the exact LT view "hues"
RENDER = {"scene": "causal3dident", "n": 48, "settings": {"resolution": 16, "samples": 1}, "seed": 2,
          "chunk_size": 16, "views": "hues:hues", "workers": 1, "progress": False}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("public_api") / "c3d16.zarr"
    assert ident3d.render_store(out, **RENDER).ok
    return out


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    """A sequence store of 4 sequences x 5 frames, imported from a file in CITRIS's layout (no render needed)."""
    from test_temporal_npz import citris_file

    from ident3d.ingest.temporal_npz import import_temporal

    root = tmp_path_factory.mktemp("public_api_seq")
    citris_file(root / "train.npz", n=20)
    import_temporal(root / "train.npz", root / "seq.zarr", length=5, sequences_per_chunk=2, progress=False)
    return root / "seq.zarr"


# ----- ident3d.open_store ------------------------------------------------------------------------------------------
def test_open_store_reads_what_the_store_holds(store):
    g = zarr.open_group(str(store), mode="r")
    view = ident3d.open_store(store)
    assert isinstance(view, ident3d.StoreView) and view.complete and view.n == 48 and view.image_size == 16
    assert (view.latent_names, view.class_names, view.views) == (
        g.attrs["latent_names"], g.attrs["class_names"], {"hues": HUES})
    assert view.latent_groups == g.attrs["latent_groups"] and view.attrs.scene == "causal3dident"
    assert np.array_equal(view.rows, np.arange(48)) and view.sequences is None
    assert view.arrays == ["images", "latents", "classes", "views/hues/images", "views/hues/latents",
                           "views/hues/classes"]
    for name in view.arrays:
        assert np.array_equal(view.read(name), g[name][:]), name
    assert np.array_equal(view.images(), g["images"][:]) and np.array_equal(view.classes(), g["classes"][:])
    assert np.array_equal(view.images(view="hues"), g["views/hues/images"][:])
    ids = np.array([40, 3, 17, 3])  # rows of several chunks, out of order and repeated
    assert np.array_equal(view.latents(ids), g["latents"][:][ids])
    assert np.array_equal(view.latents(slice(5, 9)), g["latents"][5:9]) and view.classes(7) == g["classes"][7]
    assert np.array_equal(view.dask("images")[ids].compute(), g["images"][:][ids])
    assert "48/48 rows finished, 16 px" in repr(view)


def test_to_xarray_is_lazy_with_the_stores_dimensions(store):
    pytest.importorskip("xarray")
    g = zarr.open_group(str(store), mode="r")
    ds = ident3d.open_store(store).to_xarray()
    assert ds["images"].dims == ("sample", "y", "x", "channel") and ds["views/hues/latents"].dims == ("sample", "latent")
    assert ds["images"].chunks[0] == (16, 16, 16)  # one dask block per store chunk, nothing read yet
    assert list(ds["latent"].values) == g.attrs["latent_names"] and bool(ds["finished"].all())
    assert np.array_equal(ds["latents"].sel(latent="obj_hue").values, g["latents"][:, 7])
    assert np.array_equal(ds["images"].isel(sample=[1, 33]).values, g["images"][:][[1, 33]])


def test_an_fsspec_url_reads_as_the_path(store):
    a, b = ident3d.open_store(store), ident3d.open_store(f"file://{store}")
    for name in a.arrays:
        assert np.array_equal(a.read(name), b.read(name)), name
    p, q = (next(iter(ident3d.loader(s, views="lt_exact:hues", batch_size=8))) for s in (store, f"file://{store}"))
    assert all(torch.equal(u, v) for u, v in zip(p["views"], q["views"], strict=True))


def test_an_unfinished_store_shows_its_finished_rows_and_a_split_limits_them(store, tmp_path):
    copy = tmp_path / "partial.zarr"
    shutil.copytree(store, copy)
    zarr.open_group(str(copy), mode="r+")["done"][1] = False
    view = ident3d.open_store(copy)
    assert not view.complete and np.array_equal(view.rows, np.r_[0:16, 32:48])
    assert np.array_equal(view.latents(), zarr.open_group(str(copy))["latents"][:][view.rows])
    assert np.array_equal(ident3d.open_store(store, split="test:0.75").rows, np.arange(36, 48))


def test_a_damaged_chunk_is_one_line_from_numpy_dask_and_xarray(store, tmp_path):
    copy = tmp_path / "damaged.zarr"
    shutil.copytree(store, copy)
    f = copy / "images" / "c" / "1" / "0" / "0" / "0"
    f.write_bytes(f.read_bytes()[:20])
    view = ident3d.open_store(copy)
    reads = [view.images, lambda: view.images(np.array([2, 20])), lambda: view.dask("images").sum().compute()]
    if importlib.util.find_spec("xarray") is not None:
        reads.append(lambda: view.to_xarray()["images"].values)
    for read in reads:
        with pytest.raises(CorruptChunkError) as err:
            read()
        assert str(err.value).startswith(f"{copy}: chunk 1 of images is corrupt") and "\n" not in str(err.value)
    assert np.array_equal(view.images(slice(0, 16)), ident3d.open_store(store).images(slice(0, 16)))  # chunk 0 reads


def test_a_sequence_store_gives_sequence_time_and_interventions(sequences):
    g = zarr.open_group(str(sequences), mode="r")
    view = ident3d.open_store(sequences)
    assert np.array_equal(view.sequence(), np.repeat(np.arange(4), 5)) and np.array_equal(view.time(), np.tile(
        np.arange(5), 4))
    assert np.array_equal(view.interventions(), g["interventions"][:]) and not view.interventions()[view.time() == 0].any()
    assert view.sequences["length"] == 5 and "sequence" in view.arrays
    pytest.importorskip("xarray")
    ds = view.to_xarray()
    assert ds["interventions"].dims == ("sample", "node")
    assert list(ds["node"].values) == view.sequences["intervention_names"]


def test_bad_reads_are_one_line(store, tmp_path, monkeypatch):
    view = ident3d.open_store(store)
    cases = [(lambda: ident3d.open_store(tmp_path), "is not a Zarr store"),
             (lambda: view.read("masks"), "has no per-row array 'masks'; it has images, latents"),
             (lambda: view.images(view="positions"), "has no stored view 'positions'; it has hues"),
             (lambda: view.time(), "holds i.i.d. images, not sequences"),
             (lambda: view.latents(48), "row 48 is out of range"),
             (lambda: view.latents(np.array([0.5])), "rows must be a row id, a slice or a 1-D array of row ids"),
             (lambda: view.latents(np.array([-1, 2])), "row ids must be in [0, 48)")]
    monkeypatch.setitem(sys.modules, "xarray", None)  # as if xarray were not installed
    cases.append((view.to_xarray, "StoreView.to_xarray needs xarray: pip install xarray"))
    for call, needle in cases:
        with pytest.raises(UserError) as err:
            call()
        assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


# ----- ident3d.loader ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("views", ["crop_large+colour", "lt_exact:hues", "lt_nn:hues"])
def test_the_loader_feeds_what_ident3d_train_feeds_its_objective(store, views):
    """Batch b of the loader is the trainer's step b: its loader's batch, through its view maker with its generator."""
    from ident3d.training.components import build_run
    from ident3d.training.trainer import TrainConfig, view_generator

    cfg = TrainConfig(data=str(store), views=views, batch_size=16, seed=5, encoder="cnn", device="cpu")
    run = build_run(cfg)
    trainer_batches = iter(run.loader)
    ours = list(ident3d.loader(store, views=views, batch_size=16, seed=5, steps=3))
    assert [b["step"] for b in ours] == [0, 1, 2]
    for step, mine in enumerate(ours):
        batch = next(trainer_batches)
        fed = run.views(batch, view_generator(cfg.seed, step))
        assert len(fed) == len(mine["views"]) == 2
        assert all(torch.equal(a, b) for a, b in zip(fed, mine["views"], strict=True)), step
        assert set(batch) <= set(mine) and all(torch.equal(batch[k], mine[k]) for k in batch), step
    resumed = next(iter(ident3d.loader(store, views=views, batch_size=16, seed=5, start=2, steps=1)))
    assert all(torch.equal(a, b) for a, b in zip(resumed["views"], ours[2]["views"], strict=True))


def test_pairs_differ_where_the_view_maker_changes_them(store):
    names = ident3d.open_store(store).latent_names
    hue = np.isin(names, HUES)
    exact = next(iter(ident3d.loader(store, views="lt_exact:hues", batch_size=16)))
    a, b = exact["latents"].numpy(), exact["views/hues/latents"].numpy()
    assert (a[:, hue] != b[:, hue]).all() and np.array_equal(a[:, ~hue], b[:, ~hue])
    assert not torch.equal(*exact["views"])
    nn_pair = next(iter(ident3d.loader(store, views="lt_nn:hues", batch_size=16)))
    assert (nn_pair["pair/index"] != nn_pair["index"]).all() and (nn_pair["pair/snap"] > 0).all()
    da = next(iter(ident3d.loader(store, views="crop_large+colour", batch_size=16, n_views=3)))
    x = da["views"]
    assert len(x) == 3 and not torch.equal(x[0], x[1]) and not torch.equal(x[1], x[2])  # same anchors, new draws
    single = next(iter(ident3d.loader(store, views=None, batch_size=16)))
    loader = ident3d.loader(store, views=None, batch_size=16)
    assert len(single["views"]) == 1 and torch.equal(single["views"][0], loader.inputs(single["images"]))
    assert single["views"][0].shape == (16, 3, 16, 16) and abs(float(loader.inputs(
        ident3d.open_store(store).images()).mean())) < 0.05  # normalised with the store's statistics


def test_the_same_seed_gives_the_same_batches_and_another_seed_others(store):
    def batches(seed):
        return list(ident3d.loader(store, views="crop_large+colour", batch_size=16, seed=seed, steps=3))

    first, again, other = batches(0), batches(0), batches(1)
    for p, q in zip(first, again, strict=True):
        assert set(p) == set(q) and all(torch.equal(u, v) for u, v in zip(p["views"], q["views"], strict=True))
        assert all(torch.equal(p[k], q[k]) for k in p if isinstance(p[k], torch.Tensor))
    assert not all(torch.equal(p["index"], q["index"]) for p, q in zip(first, other, strict=True))
    assert not torch.equal(first[0]["views"][0], other[0]["views"][0])


def test_the_dataset_gives_normalised_rows_in_order(store):
    from torch.utils.data import DataLoader

    view = ident3d.open_store(store)
    data = ident3d.StoreDataset(view)
    loader = ident3d.loader(view, views=None, batch_size=16)
    assert len(data) == 48 and int(data[5]["index"]) == 5 and int(data[5]["classes"]) == view.classes(5)
    batch = next(iter(DataLoader(data, batch_size=20)))
    assert torch.equal(batch["image"], loader.inputs(view.images(slice(0, 20))))
    assert torch.equal(batch["latents"], torch.from_numpy(view.latents(slice(0, 20))))


def test_bad_loader_settings_are_one_line(store):
    cases = [({"batch_size": 64}, "batch_size 64 is larger than the 48 finished rows"),
             ({"batch_size": 1}, "batch_size must be a whole number >= 2"),
             ({"views": "sideways"}, "unknown view maker 'sideways'"),
             ({"views": "learned_crop"}, "view maker learned_crop feeds only the objective crl_tac"),
             ({"views": "lt_exact:positions"}, "needs the stored view 'positions'"),
             ({"steps": 0}, "steps must be a whole number >= 1"),
             ({"device": "tpu"}, "--device must be auto, cpu or cuda")]
    for kwargs, needle in cases:
        with pytest.raises(UserError) as err:
            ident3d.loader(store, **{"batch_size": 16, **kwargs})
        assert needle in str(err.value) and "\n" not in str(err.value), (kwargs, str(err.value))
    with pytest.raises(UserError, match="store must be a path, a URL or an ident3d.open_store view"):
        ident3d.loader(42)


# ----- ident3d.metrics ---------------------------------------------------------------------------------------------
def data(n=240, seed=0):
    """Factors (n, 3), codes (n, 4) that mix them, and class labels, split 2:1 into fit and test."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(-1, 1, (n, 3))
    c = np.c_[z[:, 0] + 0.1 * rng.normal(size=n), z[:, 1] + z[:, 2], np.sin(3 * z[:, 2]), rng.normal(size=n)]
    y = (z[:, 0] > 0).astype(int) + (z[:, 1] > 0.5)
    k = 2 * n // 3
    return {"factors": z[:k], "codes": c[:k], "factors_test": z[k:], "codes_test": c[k:]}, y[:k], y[k:]


def test_each_metric_equals_the_function_it_wraps():
    s, y, yt = data()
    z, c, zt, ct = s["factors"], s["codes"], s["factors_test"], s["codes_test"]
    for kind in ("linear", "kernel"):
        assert np.array_equal(M.r2(**s, kind=kind).scores, evaluation.r2_per_latent(c, z, ct, zt, kind=kind).scores)
    c3, ct3 = c[:, :3], ct[:, :3]  # MCC needs as many code dimensions as factors (cl-ica's)
    assert M.mcc(factors=z, codes=c3) == evaluation.mcc(z, c3)
    assert M.mcc(factors=z, codes=c3, factors_test=zt, codes_test=ct3, method="spearman") == evaluation.mcc(
        z, c3, "spearman", zt, ct3)
    assert M.dci(**s).disentanglement == evaluation.dci(z, c, zt, ct).disentanglement
    assert np.array_equal(M.dci(**s, importance="forest").importance,
                          evaluation.dci(z, c, zt, ct, importance="forest").importance)
    assert M.mig(factors=z, codes=c).score == evaluation.mig(z, c).score
    assert M.sap(factors=z, codes=c).score == evaluation.sap(z, c).score
    assert np.array_equal(M.sap(**s).scores, evaluation.sap(z, c, zt, ct).scores)
    probes = {"factors": y, "codes": c, "factors_test": yt, "codes_test": ct}
    assert M.probe(**probes) == evaluation.linear_probe_accuracy(c, y, ct, yt)
    assert M.probe(**probes, kind="knn") == evaluation.knn_accuracy(c, y, ct, yt)[0]
    assert M.probe(**probes, kind="mlp") == evaluation.mlp_probe_accuracy(c, y, ct, yt)


def test_factors_and_codes_can_only_be_passed_by_name():
    """The old ``mig(z, c)`` took the factors first, ``r2_per_latent`` the codes first: a swap by position gave
    another number without a word. Every metric now takes its arrays by name only."""
    s, _, _ = data()
    z, c = s["factors"], s["codes"]
    assert evaluation.mig(c, z).score != evaluation.mig(z, c).score  # the hazard: a swap is silently another number
    with pytest.raises(TypeError, match="positional"):
        M.mig(z, c)
    assert M.mig(codes=c, factors=z).score == evaluation.mig(z, c).score  # named, the order does not matter
    for name in M.__all__:
        fn = getattr(M, name)
        if inspect.isfunction(fn) and name != "style_of":
            kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
            assert kinds == {inspect.Parameter.KEYWORD_ONLY}, name


def test_malformed_or_swapped_arrays_are_refused_in_one_line():
    s, y, yt = data()
    z, c = s["factors"], s["codes"]
    nan = z.copy()
    nan[3, 1] = np.nan
    cases = [(lambda: M.mig(factors=z.T, codes=c), "factors has 3 samples and 160 columns"),
             (lambda: M.sap(factors=nan, codes=c), "ident3d.metrics.sap: factors contains NaN or infinite values"),
             (lambda: M.mcc(factors=z, codes=c[:100]), "factors has 160 samples but codes has 100"),
             (lambda: M.r2(factors=z, codes=c, factors_test=None, codes_test=None), "pass factors_test and codes_test"),
             (lambda: M.sap(factors=z, codes=c, factors_test=s["factors_test"]), "give both factors_test and codes_test"),
             (lambda: M.dci(**{**s, "codes_test": s["codes_test"][:, :2]}), "the test split has 3 factors and 2 code"),
             (lambda: M.probe(factors=c, codes=y, factors_test=s["codes_test"], codes_test=yt),
              "factors must be class labels"),
             (lambda: M.probe(factors=z[:, 0], codes=c, factors_test=yt, codes_test=s["codes_test"]),
              "with non-integer values"),
             (lambda: M.r2(**s, kind="cubic"), "kind must be linear or kernel"),
             (lambda: M.content_style(**s, names=["a", "b"], style=[]), "2 names for 3 factor columns"),
             (lambda: M.content_style(**s, names=["a", "b", "c"], style=["d"]), "style latent(s) d are not among")]
    for call, needle in cases:
        with pytest.raises(UserError) as err:
            call()
        assert needle in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_content_and_style_blocks_match_a_plain_least_squares(store):
    """The block R^2 is the mean test R^2 of the block's factors; checked against numpy least squares on data
    standardised on the fit split (an implementation independent of scikit-learn)."""
    s, _, _ = data()
    got = M.content_style(**s, names=["a", "b", "c"], style=["c"], groups={"ab": ["a", "b"]})

    def plain_r2(z, c, zt, ct):
        def std(fit, test):
            return (fit - fit.mean(0)) / fit.std(0), (test - fit.mean(0)) / fit.std(0)

        (c, ct), (z, zt) = std(c, ct), std(z, zt)
        w, *_ = np.linalg.lstsq(np.c_[c, np.ones(len(c))], z, rcond=None)
        pred = np.c_[ct, np.ones(len(ct))] @ w
        return 1 - ((zt - pred) ** 2).sum(0) / ((zt - zt.mean(0)) ** 2).sum(0)

    want = plain_r2(s["factors"], s["codes"], s["factors_test"], s["codes_test"])
    assert np.allclose(list(got.per_factor.values()), want, atol=1e-9)
    assert np.isclose(got.content, want[:2].mean()) and np.isclose(got.style, want[2])
    assert got.columns == pytest.approx({"ab: a": want[0], "ab: b": want[1], "c": want[2]})
    assert got.marks == {"ab: a": "C", "ab: b": "C", "c": "S"}
    assert M.style_of("lt_exact:hues", store) == set(HUES)
    assert {"pos_x", "obj_hue"} <= M.style_of("crop_large+colour", ident3d.open_store(store)) and "rot_alpha" not in \
        M.style_of("crop_large+colour", store)


def test_the_public_names_resolve_lazily():
    from ident3d.store import view
    from ident3d.training import loaders

    assert (ident3d.open_store, ident3d.StoreView) == (view.open_store, view.StoreView)
    assert (ident3d.loader, ident3d.StoreDataset, ident3d.metrics) == (loaders.loader, loaders.StoreDataset, M)
    assert {"open_store", "StoreView", "loader", "StoreDataset", "metrics"} <= set(ident3d.__all__) & set(dir(ident3d))
