"""Image/text learning on captioned stores: ``ident3d train`` with the image/text objectives reads the captions as
tokens of a vocabulary built from the training split (saved with the run), refuses a store without captions in one
line, and ``modality_probes`` scores each latent from each modality by block, with chance levels; its block means
are checked on constructed codes (shared latents in both codes, image-specific ones in the image codes only) and a
shuffled control."""

import json

import numpy as np
import pytest
from helpers import assert_refused, run_cli

from ident3d.evaluation.modality_metrics import circular_latents, latent_blocks, score_latents
from ident3d.render import render_store
from ident3d.render.scene import load_scene
from ident3d.store.attrs import read_attrs
from ident3d.store.zarr_io import open_store
from ident3d.training.text import Vocabulary


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """48 captioned 16 px multimodal3dident images to train on, 64 to score, and 16 without captions."""
    root = tmp_path_factory.mktemp("mmtrain")
    small = {"resolution": 16, "samples": 1}
    for name, n, seed, text in (("train", 48, 0, None), ("test", 64, 1, None), ("plain", 16, 0, False)):
        assert render_store(root / f"{name}.zarr", scene="multimodal3dident", n=n, settings=small, seed=seed,
                            chunk_size=16, text=text, workers=1, progress=False).ok
    return root


@pytest.mark.parametrize("objective", ["multimodal_infonce", "clip"])
def test_train_reads_captions_as_tokens_and_saves_the_vocabulary(stores, tmp_path, objective):
    run = tmp_path / "run"
    r = run_cli("train", "--data", stores / "train.zarr", "--objective", objective, "--encoder", "cnn", "--steps", "3",
                "--batch-size", "8", "--out", run, "--no-progress")
    assert r.returncode == 0, r.stderr
    args = json.loads((run / "config.json").read_text())["objective_args"]
    captions = read_attrs(open_store(str(stores / "train.zarr")))
    assert captions.text is not None
    from ident3d.store.info import store_info, store_text

    texts = store_text(store_info(str(stores / "train.zarr")))
    assert Vocabulary.from_dict(args["vocabulary"]) == Vocabulary.build(texts)  # the training split's words
    assert args["max_len"] >= 8
    r = run_cli("evaluate", "--run", run, "--data", stores / "test.zarr", "--metrics", "modality_probes", "--fit",
                "32", "--score", "32")
    assert r.returncode == 0, r.stderr
    assert "image/shared" in r.stdout and "text/specific" in r.stdout


def test_a_store_without_captions_is_refused(stores, tmp_path):
    r = run_cli("train", "--data", stores / "plain.zarr", "--objective", "clip", "--encoder", "cnn", "--steps", "2",
                "--batch-size", "8", "--out", tmp_path / "run", "--no-progress")
    assert_refused(r, "needs a store with captions", "--text")
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_blocks_come_from_the_caption_spec():
    names = ["class", "pos_x", "pos_y", "obj_hue", "rot_alpha"]
    spec = {"states": {"shape": {"latent": "class"}, "x": {"latent": "pos_x"}, "y": {"latent": "pos_y"},
                       "colour": {"latent": "obj_hue"}}, "select": None, "perturb": {"colour": 0.5}}
    assert latent_blocks({"spec": spec}, names) == {"class": "shared", "pos_x": "shared", "pos_y": "shared",
                                                    "obj_hue": "perturbed", "rot_alpha": "specific"}
    spec = {**spec, "select": ["shape", "x"], "perturb": {"x": 0.0}}
    assert latent_blocks({"spec": spec}, names) == {"class": "shared", "pos_x": "shared", "pos_y": "specific",
                                                    "obj_hue": "specific", "rot_alpha": "specific"}
    scene = load_scene("multimodal3dident").to_dict()
    from ident3d.causal import load_scm

    assert circular_latents(scene, load_scm("multimodal3dident").spec) == {"obj_hue"}  # spot and ground: half turns
    assert circular_latents(load_scene("3dident").to_dict(), load_scm("3dident").spec) == set()  # raw / 4: a half


def test_block_means_on_constructed_codes_and_a_shuffled_control():
    """Image codes hold every latent, text codes only the shared ones (x, a circular hue near the wrap, a class):
    the text's specific block is at chance, everything else near 1; shuffled text codes lose the shared block."""
    rng = np.random.default_rng(0)
    n = 600
    cls = rng.integers(0, 3, n)
    x = rng.uniform(-1, 1, n)
    hue = rng.uniform(-0.1, 0.1, n) % 1.0  # around the wrap: linear R^2 of the raw value would fail
    rot = rng.uniform(-1, 1, n)
    shared = np.concatenate([np.eye(3)[cls] @ rng.normal(size=(3, 3)) * 3, x[:, None],
                             np.cos(2 * np.pi * hue)[:, None], np.sin(2 * np.pi * hue)[:, None]], 1)
    image = np.concatenate([shared, rot[:, None]], 1) + 0.01 * rng.normal(size=(n, shared.shape[1] + 1))
    text = shared + 0.01 * rng.normal(size=shared.shape)
    factors = {"class": cls.astype(float), "x": x, "hue": hue, "rot": rot}
    blocks = {"class": "shared", "x": "shared", "hue": "shared", "rot": "specific"}
    half = n // 2

    def scores(text_codes):
        codes = {"image": (image[:half], image[half:]), "text": (text_codes[:half], text_codes[half:])}
        return score_latents(codes, {k: (v[:half], v[half:]) for k, v in factors.items()}, blocks, {"class"},
                             {"hue"}, kernel_max=300)

    out = scores(text)
    assert out["image/shared"] > 0.95 and out["text/shared"] > 0.95 and out["image/specific"] > 0.95
    assert out["text/specific"] < 0.1
    per = out["per_latent"]
    assert per["class"]["chance"]["mcc"] == 0.0 and 0.3 < per["class"]["chance"]["accuracy"] < 0.45
    assert per["hue"]["kind"] == "circular" and per["hue"]["text"]["r2_linear"] > 0.95
    control = scores(text[rng.permutation(n)])
    assert control["text/shared"] < 0.2
    linear_hue = score_latents({"text": (text[:half], text[half:])}, {"hue": (hue[:half], hue[half:])},
                               {"hue": "shared"}, set(), set(), kernel_max=300)
    assert linear_hue["per_latent"]["hue"]["text"]["r2_linear"] < 0.8  # 0.70: why the hue is scored as circular
