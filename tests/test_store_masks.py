"""``ident3d.store.masks``, the one definition of what a multi-object store's masks and presence come to, against plain
numpy written here another way (bincount, one-hot by ``np.eye``, Python loops), with negative controls: masks moved
to other rows count other pixels, a present latent of exactly 0.5 is no object, and a planted absent object with
pixels is found. Integer pixel counts make the float means exact, so they are compared for equality."""

import numpy as np
import pytest

from ident3d.store.masks import (
    all_present,
    objects_per_image,
    presence,
    slot_pixels,
    visibility,
    visible_but_absent,
    visible_per_object,
    visible_per_slot,
)

N, H, W, K = 12, 9, 7, 3


@pytest.fixture
def masks():
    """(N, H, W) uint8 masks with values 0..K, as Cycles' object index pass gives them (0: background)."""
    return np.random.default_rng(0).integers(0, K + 1, size=(N, H, W)).astype(np.uint8)


def counts_by_bincount(masks: np.ndarray, slots: int) -> np.ndarray:
    """Each slot's pixels per image, counted by bincount over the image's values."""
    return np.array([np.bincount(m.ravel(), minlength=slots + 1)[1:slots + 1] for m in masks], dtype=np.int64)


def test_visibility_is_each_slots_pixel_count(masks):
    got = visibility(masks, K)
    assert got.dtype == np.int64 and got.shape == (N, K)
    np.testing.assert_array_equal(got, counts_by_bincount(masks, K))
    assert visibility(masks, 1).tolist() == counts_by_bincount(masks, 1).tolist()  # fewer slots: the first ones


def test_visibility_of_masks_moved_to_other_rows_differs(masks):
    shuffled = masks[np.roll(np.arange(N), 1)]  # every mask on another row: its counts move with it
    assert not np.array_equal(visibility(shuffled, K), counts_by_bincount(masks, K))
    np.testing.assert_array_equal(visibility(shuffled, K), counts_by_bincount(shuffled, K))


def test_slot_pixels_is_the_one_hot_of_each_slot(masks):
    one_hot = np.eye(K + 1, dtype=bool)[masks][..., 1:].transpose(0, 3, 1, 2)  # (N, K, H, W), background dropped
    got = slot_pixels(masks, K)
    assert got.dtype == bool
    np.testing.assert_array_equal(got, one_hot)
    np.testing.assert_array_equal(got.sum((2, 3)), visibility(masks, K))


def test_presence_is_the_present_latents_above_one_half():
    latents = np.array([[0.9, 0.0, 0.5, 7.0], [0.1, 1.0, 0.51, -3.0], [0.5, 0.49, 1.0, 0.0]])
    columns = [2, 0, 1]
    want = [[latents[i, c] > 0.5 for c in columns] for i in range(len(latents))]
    got = presence(latents, columns)
    assert got.dtype == bool and got.tolist() == want
    assert got[0].tolist() == [False, True, False]  # exactly 0.5 is no object


def test_visible_but_absent_finds_a_planted_absent_object_with_pixels(masks):
    vis = counts_by_bincount(masks, K)
    present = vis > 0  # as a render writes them: only objects show
    assert not visible_but_absent(vis, present).any()
    present[4, 1] = False
    want = [[vis[i, k] > 0 and not present[i, k] for k in range(K)] for i in range(N)]
    got = visible_but_absent(vis, present)
    assert got.tolist() == want and np.argwhere(got).tolist() == [[4, 1]]


def test_row_summaries_of_presence():
    present = np.array([[1, 1, 1], [1, 0, 1], [0, 0, 0], [1, 1, 1]], dtype=bool)
    assert all_present(present).tolist() == [all(row) for row in present.tolist()] == [True, False, False, True]
    assert objects_per_image(present).tolist() == [sum(row) for row in present.tolist()] == [3, 2, 0, 3]


def test_visible_pixel_means_over_present_objects(masks):
    vis = counts_by_bincount(masks, K)
    present = vis > 0
    present[:, 2] = False  # slot 2 never holds an object (its pixels left in vis: the means skip it)
    present[3, 0] = False
    pairs = [(i, k) for i in range(N) for k in range(K) if present[i, k]]
    assert visible_per_object(vis, present) == sum(int(vis[i, k]) for i, k in pairs) / len(pairs)
    per_slot = visible_per_slot(vis, present)
    assert per_slot.dtype == np.float64 and per_slot.shape == (K,)
    for k in range(2):
        rows = [i for i in range(N) if present[i, k]]
        assert per_slot[k] == sum(int(vis[i, k]) for i in rows) / len(rows)
    assert np.isnan(per_slot[2])
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"), np.errstate(invalid="ignore"):
        assert np.isnan(visible_per_object(vis, np.zeros_like(present)))  # no object at all: NaN, as numpy's mean
