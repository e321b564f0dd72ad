"""Object-centric metrics against constructed cases with known answers, and against plain formulas
written here or in tests/test_object_metric_parity.py (pair-counting ARI, least-squares R^2 by numpy, brute-force
matching); the public wrappers in
``ident3d.metrics`` equal them and refuse misuse in one line. Brady's SIS against a plain implementation of its
definition: tests/test_object_metric_parity.py."""

import itertools

import numpy as np
import pytest
from test_object_metric_parity import pair_counting_ari

import ident3d.metrics as M
from ident3d.causal.errors import UserError
from ident3d.evaluation.object_metrics import (
    block_mcc,
    fg_ari,
    fg_ari_result,
    match_by_masks,
    slot_identifiability_score,
    slot_r2,
    slot_r2_given,
    slot_r2_masks,
)

N_OBJ, N_SLOT, DIM = 3, 4, 2


def lstsq_r2(x_fit, y_fit, x_score, y_score):
    """Per-dim R^2 of an affine least-squares fit, by numpy."""
    w = np.linalg.lstsq(np.c_[x_fit, np.ones(len(x_fit))], y_fit, rcond=None)[0]
    err = y_score - np.c_[x_score, np.ones(len(x_score))] @ w
    return 1 - (err ** 2).sum(0) / ((y_score - y_score.mean(0)) ** 2).sum(0)


def scenes(n, seed=0, noise=0.0, n_slots=N_SLOT):
    """Object latents (n, K, D), slot codes (n, S, D) = A z of the object in a random slot per image
    (a spare slot holds noise), and the true assignment (n, K)."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(-1, 1, (n, N_OBJ, DIM))
    a = rng.normal(size=(DIM, DIM)) + 2 * np.eye(DIM)
    perm = np.stack([rng.permutation(n_slots) for _ in range(n)])
    codes = rng.normal(size=(n, n_slots, DIM))
    rows = np.arange(n)[:, None]
    codes[rows, perm[:, :N_OBJ]] = z @ a + noise * rng.normal(size=z.shape)
    return z, codes, perm[:, :N_OBJ]


def test_fg_ari_is_one_for_identical_and_relabelled_masks_whatever_the_background():
    rng = np.random.default_rng(1)
    true = rng.integers(0, N_OBJ + 1, (5, 8, 8))
    assert fg_ari(true, true) == 1.0
    perm = rng.permutation(N_SLOT)
    pred = perm[np.maximum(true - 1, 0)]
    pred[true == 0] = rng.integers(0, N_SLOT, (true == 0).sum())  # background slots do not count
    assert fg_ari(true, pred) == pytest.approx(1.0)
    soft = np.moveaxis(np.eye(N_SLOT)[pred], -1, 1) + 0.4 * rng.random((5, N_SLOT, 8, 8))
    assert fg_ari(true, soft) == pytest.approx(1.0)


def test_fg_ari_of_a_slot_merging_two_objects_equals_pair_counting_on_foreground():
    true = np.array([[[0, 1, 1, 2], [2, 2, 3, 3], [3, 0, 0, 1]]])
    pred = np.array([[[2, 0, 0, 0], [0, 0, 1, 1], [1, 3, 1, 0]]])  # objects 1 and 2 share slot 0
    fg = true[0] != 0
    expected = pair_counting_ari(true[0][fg], pred[0][fg])
    assert fg_ari(true, pred) == pytest.approx(expected) and expected < 0.9
    assert abs(pair_counting_ari(true[0].ravel(), pred[0].ravel()) - expected) > 0.05  # background would change it


def test_fg_ari_of_spatially_shuffled_masks_is_near_zero():
    rng = np.random.default_rng(2)
    true = np.zeros((40, 32, 32), int)
    true[:, :16, :16], true[:, :16, 16:], true[:, 16:, :16], true[:, 20:, 20:] = 1, 2, 3, 4
    pred = np.stack([rng.permutation(t.ravel()).reshape(32, 32) for t in true])
    assert abs(fg_ari(true, pred)) < 0.05


def test_fg_ari_skips_images_with_under_two_foreground_pixels():
    good = np.array([[[1, 1, 2, 0]]])
    pred = np.array([[[0, 1, 1, 0]]])
    one_pixel, empty = np.array([[[0, 3, 0, 0]]]), np.zeros((1, 1, 4), int)
    with_skipped = fg_ari(np.concatenate([good, one_pixel, empty]), np.concatenate([pred, pred, pred]))
    assert with_skipped == pytest.approx(fg_ari(good, pred))
    with pytest.raises(UserError, match="at least 2 foreground pixels"):  # nothing left to score: refused, not NaN
        fg_ari(np.concatenate([one_pixel, empty]), np.concatenate([pred, pred]))


def test_match_by_masks_recovers_the_slot_permutation():
    rng = np.random.default_rng(3)
    true = rng.integers(0, N_OBJ + 1, (20, 8, 8))
    perm = np.stack([rng.permutation(N_SLOT) for _ in range(20)])
    # object k (id k + 1) -> slot perm[n, k]; background (id 0 -> index K) -> the spare slot perm[n, K]
    pred = np.take_along_axis(perm, (true - 1).reshape(20, -1) % (N_OBJ + 1), 1).reshape(true.shape)
    np.testing.assert_array_equal(match_by_masks(true, pred, N_OBJ, N_SLOT), perm[:, :N_OBJ])
    soft = np.moveaxis(np.eye(N_SLOT)[pred], -1, 1)
    np.testing.assert_array_equal(match_by_masks(true, soft, N_OBJ, N_SLOT), perm[:, :N_OBJ])
    assert fg_ari(true, pred) == pytest.approx(1.0)


def test_match_by_masks_is_one_to_one_where_both_objects_overlap_one_slot_most():
    true = np.array([[[1, 1, 1, 1, 2, 2, 2, 2, 0]]])
    pred = np.array([[[0, 0, 0, 0, 0, 0, 0, 1, 2]]])  # IoU: obj1-slot0 4/7, obj2-slot0 3/8, obj2-slot1 1/4
    np.testing.assert_array_equal(match_by_masks(true, pred, 2, 3), [[0, 1]])


def masks_of(assign, n_slots=N_SLOT, size=6):
    """Masks for ``scenes``: object k (id k + 1) a horizontal band of each image, painted by its slot."""
    n = len(assign)
    true = np.zeros((n, size, size), int)
    for k in range(assign.shape[1]):
        true[:, :, 1 + 2 * k:3 + 2 * k] = k + 1  # column 0 is background
    pred = np.full(true.shape, n_slots - 1)
    rows = np.arange(n)[:, None, None]
    fg = true > 0
    pred[fg] = np.broadcast_to(assign[rows, np.maximum(true - 1, 0)], true.shape)[fg]
    return true, pred


def test_slot_r2_is_one_for_an_invertible_linear_code_and_zero_when_shuffled_across_images():
    z, codes, assign = scenes(1500)
    fit, score = np.arange(1000), np.arange(1000, 1500)
    for r in (slot_r2(z, codes, fit, score), slot_r2_given(z, codes, assign, fit, score)):
        assert r.per_latent.shape == (DIM,) and np.allclose(r.per_latent, 1.0, atol=1e-9)
        assert r.score == pytest.approx(1.0)
    assert slot_r2(z, codes, fit, score).matched_by == "readout"
    shuffled = codes[np.random.default_rng(4).permutation(len(codes))]
    r = slot_r2_given(z, shuffled, assign, fit, score)
    assert abs(r.score) < 0.05 and np.all(np.abs(r.per_latent) < 0.1)
    # the readout's own matching picks, per image, the slots that fit best: optimistic, yet far from identified
    assert slot_r2(z, shuffled, fit, score).score < 0.5


def test_slot_r2_given_and_by_masks_equal_least_squares_on_present_pairs():
    z, codes, assign = scenes(300, seed=5, noise=0.5)
    present = np.random.default_rng(5).random((300, N_OBJ)) > 0.3
    z[~present] = 1e3  # absent objects would wreck the fit if they were used
    fit = np.arange(300) < 200  # boolean masks select images too
    n, k = np.nonzero(present)
    x, y = codes[n, assign[n, k]], z[n, k]
    expected = lstsq_r2(x[n < 200], y[n < 200], x[n >= 200], y[n >= 200])
    r = slot_r2_given(z, codes, assign, fit, ~fit, present)
    np.testing.assert_allclose(r.per_latent, expected, rtol=1e-8)
    assert 0.3 < r.score < 0.95
    true, pred = masks_of(assign)
    by_masks = slot_r2_masks(z, codes, true, pred, fit, ~fit, present)
    np.testing.assert_allclose(by_masks.per_latent, expected, rtol=1e-8)
    assert by_masks.matched_by == "masks"


def test_readout_matched_r2_leaves_absent_objects_out():
    z, codes, _ = scenes(900, seed=9, noise=0.05)
    present = np.random.default_rng(9).random((900, N_OBJ)) > 0.3
    fit, score = np.arange(600), np.arange(600, 900)
    clean, clean_sis = slot_r2(z, codes, fit, score, present), slot_identifiability_score(z, codes, fit, score, present)
    z[~present] = 1e3  # whatever an absent object's row holds, it takes part in no fit, matching or R^2
    assert slot_r2(z, codes, fit, score, present).score == pytest.approx(clean.score, abs=1e-12)
    assert clean.score > 0.98
    # nor in the SIS (its ceiling reads the true latents with an absent object's slot all zeros, as Brady et al.'s)
    assert slot_identifiability_score(z, codes, fit, score, present).score == pytest.approx(clean_sis.score, abs=1e-12)


def test_sis_is_high_for_a_perfect_encoding_and_near_zero_when_every_slot_holds_every_object():
    z, codes, _ = scenes(1500, seed=7, n_slots=N_OBJ)
    fit, score = np.arange(1000), np.arange(1000, 1500)
    assert slot_identifiability_score(z, codes, fit, score).score > 0.95
    # a spare slot of noise (S = K + 1): the off-diagonal readout reads objects only from other objects' slots, as
    # with S = K and as its ceiling, so the spare slot changes nothing (allowed to pick it, r_off rose by selection
    # alone above the ceiling's and the score fell to 0.82)
    z, codes, _ = scenes(1500, seed=7)
    spare = slot_identifiability_score(z, codes, fit, score)
    assert spare.r_on == pytest.approx(1.0) and spare.r_off < spare.ceiling + 0.02 and spare.score > 0.95
    everything = np.repeat(z.reshape(len(z), 1, -1), N_SLOT, axis=1)  # each slot: all objects concatenated
    r = slot_identifiability_score(z, everything, fit, score)
    assert abs(r.score) < 0.1 and r.reason is None


def test_block_mcc_is_one_for_permuted_invertible_blocks_and_matches_brute_force_when_mixed():
    rng = np.random.default_rng(8)
    z = rng.uniform(-1, 1, (500, N_OBJ, DIM))
    maps = [rng.normal(size=(DIM, DIM)) + 2 * np.eye(DIM) for _ in range(N_OBJ)]
    order = [2, 0, 1]
    blocks = np.concatenate([z[:, k] @ maps[k] for k in order] + [rng.normal(size=(500, 3))], axis=1)
    assert block_mcc(z, blocks, [DIM] * N_OBJ + [3]).score == pytest.approx(1.0)  # the spare noise block goes unmatched

    mixed = z.reshape(500, -1) @ rng.normal(size=(N_OBJ * DIM, N_OBJ * DIM))
    sizes = [DIM] * N_OBJ
    cols = [mixed[:, b * DIM:(b + 1) * DIM] for b in range(N_OBJ)]
    r2 = np.array([[lstsq_r2(c, z[:, k], c, z[:, k]).mean() for k in range(N_OBJ)] for c in cols])
    expected = max(np.mean([r2[b, k] for b, k in enumerate(p)]) for p in itertools.permutations(range(N_OBJ)))
    assert block_mcc(z, mixed, sizes).score == pytest.approx(expected) and expected < 0.9


# ----- ident3d.metrics ----------------------------------------------------------------------------------------------
def split(n=600, seed=11, noise=0.1):
    z, codes, assign = scenes(n, seed=seed, noise=noise)
    present = np.random.default_rng(seed).random((n, N_OBJ)) > 0.2
    z[~present] = 0.0  # absent objects: all-zero rows
    true, pred = masks_of(assign)
    k = 2 * n // 3
    return {"objects": z[:k], "slots": codes[:k], "objects_test": z[k:], "slots_test": codes[k:],
            "present": present[:k], "present_test": present[k:]}, (true[:k], pred[:k], true[k:], pred[k:])


def test_the_public_object_metrics_equal_the_functions_they_wrap():
    s, (t, p, tt, pt) = split()
    z, x, pr = (np.concatenate([s[a], s[f"{a}_test"]]) for a in ("objects", "slots", "present"))
    fit, score = np.arange(400), np.arange(400, 600)
    got, want = M.sis(**s), slot_identifiability_score(z, x, fit, score, pr)
    assert (got.score, got.r_on, got.r_off, got.ceiling) == (want.score, want.r_on, want.r_off, want.ceiling)
    assert got.r_on > 0.95 and got.iterations == want.iterations and got.reason is None
    assert M.slot_r2(**s).score == slot_r2(z, x, fit, score, pr).score
    by_masks = M.slot_r2_masks(**s, true_masks=t, pred_masks=p, true_masks_test=tt, pred_masks_test=pt)
    assert by_masks.score == slot_r2_masks(z, x, np.concatenate([t, tt]), np.concatenate([p, pt]), fit, score,
                                           pr).score
    assert M.fg_ari(true_masks=tt, pred_masks=pt).score == fg_ari_result(tt, pt).score == pytest.approx(1.0)
    soft = np.moveaxis(np.eye(N_SLOT)[pt], -1, 1)
    assert M.fg_ari(true_masks=tt, pred_masks=soft).score == pytest.approx(1.0)
    codes = x.reshape(len(x), -1)
    assert M.block_mcc(objects=z, codes=codes, block_sizes=[DIM] * N_SLOT, readout="tree").score == \
        block_mcc(z, codes, [DIM] * N_SLOT, readout="tree").score


def test_object_metric_misuse_is_one_line():
    s, (t, p, tt, pt) = split(n=300)
    flat = {**s, "objects": s["objects"].reshape(200, -1)}
    swapped = {**s, "objects": np.repeat(s["objects"], 2, axis=1), "objects_test": np.repeat(s["objects_test"], 2, 1)}
    nan = s["slots"].copy()
    nan[0, 0, 0] = np.nan
    few = {**s, "present": np.zeros((200, N_OBJ), bool)}
    masks = {"true_masks": t, "pred_masks": p, "true_masks_test": tt, "pred_masks_test": pt}
    cases = [
        (lambda: M.sis(**flat), "sis: objects must be a 3-D array (N, K, D)", "every column an object"),
        (lambda: M.slot_r2(**{**s, "slots": s["slots"].reshape(200, -1)}), "slot_r2: slots must be a 3-D", "(N, S, L)"),
        (lambda: M.sis(**swapped), "slots has 4 slots per image for 6 objects", "swapped"),
        (lambda: M.sis(**{**s, "slots": s["slots"][:150]}), "objects has 200 images but slots has 150", ""),
        (lambda: M.sis(**{**s, "present": s["present"][:150]}), "present must be (N, K) = (200, 3)", ""),
        (lambda: M.sis(**{**s, "present": s["present"] * 0.5}), "present must be booleans", ""),
        (lambda: M.sis(**{**s, "objects_test": s["objects_test"][:, :, :1]}), "objects_test has 3 objects x 1", ""),
        (lambda: M.sis(**{**s, "slots_test": s["slots_test"][:, :3]}), "slots_test has 3 slots x 2", ""),
        (lambda: M.sis(**{**s, "slots": nan}), "sis: slots contains NaN", ""),
        (lambda: M.sis(**few), "needs at least 4 present objects in the fit images", "got 0"),
        (lambda: M.sis(**s, readout="tree"), "sis: readout must be one of linear, mlp", ""),
        (lambda: M.sis(**{**s, "objects": s["objects"][:, :1], "objects_test": s["objects_test"][:, :1],
                          "present": None, "present_test": None}), "at least 2 objects", ""),
        (lambda: M.fg_ari(true_masks=np.zeros_like(tt), pred_masks=pt), "fg_ari: FG-ARI needs an image with at "
                                                                         "least 2 foreground pixels", ""),
        (lambda: M.fg_ari(true_masks=np.moveaxis(np.eye(N_SLOT)[pt], -1, 1), pred_masks=tt),
         "true_masks must be (N, H, W) object ids", "pass them as pred_masks"),
        (lambda: M.fg_ari(true_masks=tt + 0.3, pred_masks=pt), "true_masks must hold whole-number", ""),
        (lambda: M.fg_ari(true_masks=-tt, pred_masks=pt), "true_masks must hold non-negative", ""),
        (lambda: M.fg_ari(true_masks=tt, pred_masks=pt[:, 0]), "pred_masks must be (N, H, W) slot ids or", ""),
        (lambda: M.fg_ari(true_masks=tt, pred_masks=pt[:50]), "pred_masks (50, 6, 6) and true_masks", ""),
        (lambda: M.slot_r2_masks(**s, **{**masks, "true_masks": t + 1}), "true_masks has object id 4 for 3", ""),
        (lambda: M.slot_r2_masks(**s, **{**masks, "pred_masks_test": pt + 1}), "pred_masks_test has 5 slots", ""),
        (lambda: M.block_mcc(objects=s["objects"].reshape(200, -1), codes=s["slots"].reshape(200, -1),
                             block_sizes=[2, 2, 2, 2]), "block_mcc: objects must be a 3-D array", "every column"),
        (lambda: M.block_mcc(objects=s["objects"], codes=s["slots"].reshape(200, -1), block_sizes=[2, 2, 2]),
         "block_sizes [2, 2, 2] sum to 6, codes has 8 columns", ""),
        (lambda: M.block_mcc(objects=s["objects"], codes=s["slots"].reshape(200, -1), block_sizes=[4, 4],
                             readout="mlp"), "readout must be one of linear, tree", ""),
    ]
    for call, needle, also in cases:
        with pytest.raises(UserError) as err:
            call()
        text = str(err.value)
        assert text.startswith("ident3d.metrics.") and needle in text and also in text and "\n" not in text, text
