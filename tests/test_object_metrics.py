"""Object-centric metrics against constructed cases with known answers, and against plain formulas
written here (pair-counting ARI, least-squares R^2 by numpy, brute-force matching)."""

import itertools

import numpy as np
import pytest

from ident3d.evaluation.object_metrics import (
    block_mcc,
    fg_ari,
    match_by_masks,
    slot_identifiability_score,
    slot_r2,
)

N_OBJ, N_SLOT, DIM = 3, 4, 2


def pair_counting_ari(a, b):
    """ARI by counting pixel pairs: together in a, together in b, together in both."""
    both = same_a = same_b = total = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        total += 1
        same_a += a[i] == a[j]
        same_b += b[i] == b[j]
        both += (a[i] == a[j]) and (b[i] == b[j])
    expected = same_a * same_b / total
    return (both - expected) / ((same_a + same_b) / 2 - expected)


def lstsq_r2(x_fit, y_fit, x_score, y_score):
    """Per-dim R^2 of an affine least-squares fit, by numpy."""
    w = np.linalg.lstsq(np.c_[x_fit, np.ones(len(x_fit))], y_fit, rcond=None)[0]
    err = y_score - np.c_[x_score, np.ones(len(x_score))] @ w
    return 1 - (err ** 2).sum(0) / ((y_score - y_score.mean(0)) ** 2).sum(0)


def scenes(n, seed=0, noise=0.0):
    """Object latents (n, K, D), slot codes (n, S, D) = A z of the object in a random slot per image
    (the spare slot holds noise), and the true assignment (n, K)."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(-1, 1, (n, N_OBJ, DIM))
    a = rng.normal(size=(DIM, DIM)) + 2 * np.eye(DIM)
    perm = np.stack([rng.permutation(N_SLOT) for _ in range(n)])
    codes = rng.normal(size=(n, N_SLOT, DIM))
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
    assert np.isnan(fg_ari(np.concatenate([one_pixel, empty]), np.concatenate([pred, pred])))


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


def test_slot_r2_is_one_for_an_invertible_linear_code_and_zero_when_shuffled_across_images():
    z, codes, assign = scenes(1500)
    fit, score = np.arange(1000), np.arange(1000, 1500)
    r = slot_r2(z, codes, assign, fit, score)
    assert r["r2"].shape == (DIM,) and np.allclose(r["r2"], 1.0, atol=1e-9) and r["mean"] == pytest.approx(1.0)
    shuffled = codes[np.random.default_rng(4).permutation(len(codes))]
    r = slot_r2(z, shuffled, assign, fit, score)
    assert abs(r["mean"]) < 0.05 and np.all(np.abs(r["r2"]) < 0.1)


def test_slot_r2_equals_least_squares_on_present_pairs():
    z, codes, assign = scenes(300, seed=5, noise=0.5)
    present = np.random.default_rng(5).random((300, N_OBJ)) > 0.3
    z[~present] = 1e3  # absent objects would wreck the fit if they were used
    fit = np.arange(300) < 200  # boolean masks select images too
    n, k = np.nonzero(present)
    x, y = codes[n, assign[n, k]], z[n, k]
    expected = lstsq_r2(x[n < 200], y[n < 200], x[n >= 200], y[n >= 200])
    r = slot_r2(z, codes, assign, fit, ~fit, present)
    np.testing.assert_allclose(r["r2"], expected, rtol=1e-8)
    assert 0.3 < r["mean"] < 0.95


def test_sis_equals_matched_minus_best_unmatched_r2_by_hand():
    z, codes, assign = scenes(200, seed=6, noise=0.3)
    fit, score = np.arange(120), np.arange(120, 200)
    x_fit, y_fit = [], []
    for n, k, s in itertools.product(fit, range(N_OBJ), range(N_SLOT)):
        if s != assign[n, k]:
            x_fit.append(codes[n, s]), y_fit.append(z[n, k])
    w = np.linalg.lstsq(np.c_[np.array(x_fit), np.ones(len(x_fit))], np.array(y_fit), rcond=None)[0]
    best, truth = [], []
    for n, k in itertools.product(score, range(N_OBJ)):
        preds = [np.r_[codes[n, s], 1] @ w for s in range(N_SLOT) if s != assign[n, k]]
        best.append(min(preds, key=lambda p: ((p - z[n, k]) ** 2).sum())), truth.append(z[n, k])
    best, truth = np.array(best), np.array(truth)
    unmatched = np.mean(1 - ((truth - best) ** 2).sum(0) / ((truth - truth.mean(0)) ** 2).sum(0))
    matched = slot_r2(z, codes, assign, fit, score)["mean"]
    assert slot_identifiability_score(z, codes, assign, fit, score) == pytest.approx(matched - unmatched)


def test_sis_is_high_for_a_perfect_encoding_and_near_zero_when_every_slot_holds_every_object():
    z, codes, assign = scenes(1500, seed=7)
    fit, score = np.arange(1000), np.arange(1000, 1500)
    assert slot_identifiability_score(z, codes, assign, fit, score) > 0.9
    everything = np.repeat(z.reshape(len(z), 1, -1), N_SLOT, axis=1)  # each slot: all objects concatenated
    assert abs(slot_identifiability_score(z, everything, assign, fit, score)) < 0.1


def test_block_mcc_is_one_for_permuted_invertible_blocks_and_matches_brute_force_when_mixed():
    rng = np.random.default_rng(8)
    z = rng.uniform(-1, 1, (500, N_OBJ, DIM))
    maps = [rng.normal(size=(DIM, DIM)) + 2 * np.eye(DIM) for _ in range(N_OBJ)]
    order = [2, 0, 1]
    blocks = np.concatenate([z[:, k] @ maps[k] for k in order] + [rng.normal(size=(500, 3))], axis=1)
    assert block_mcc(z, blocks, [DIM] * N_OBJ + [3]) == pytest.approx(1.0)  # the spare noise block goes unmatched

    mixed = z.reshape(500, -1) @ rng.normal(size=(N_OBJ * DIM, N_OBJ * DIM))
    sizes = [DIM] * N_OBJ
    cols = [mixed[:, b * DIM:(b + 1) * DIM] for b in range(N_OBJ)]
    r2 = np.array([[lstsq_r2(c, z[:, k], c, z[:, k]).mean() for k in range(N_OBJ)] for c in cols])
    expected = max(np.mean([r2[b, k] for b, k in enumerate(p)]) for p in itertools.permutations(range(N_OBJ)))
    assert block_mcc(z, mixed, sizes) == pytest.approx(expected) and expected < 0.9
