"""Object-centric identifiability metrics: pure numpy/scipy/sklearn functions on arrays.

- ``fg_ari``: foreground adjusted Rand index of predicted slot masks against ground-truth object
  masks (the segmentation score of MONet, Burgess et al. 2019; IODINE, Greff et al. 2019; Slot
  Attention, Locatello et al. 2020).
- ``match_by_masks`` + ``slot_r2``: slots matched to objects per image by mask IoU (Hungarian), then
  the out-of-sample R^2 of a linear read-out from each matched slot's code to its object's latents
  (the property-prediction protocol of Dittadi et al. 2022, "Generalization and robustness
  implications in object-centric learning").
- ``slot_identifiability_score``: SIS of Brady et al. 2023 ("Provably learning object-centric
  representations"): matched R^2 minus the R^2 from the best non-matched slot, here with linear
  read-outs.
- ``block_mcc``: block identifiability in the style of Lachapelle et al. 2023 ("Additive decoders
  for latent variables identification and Cartesian-product extrapolation"): the block-wise
  analogue of MCC with R^2 as the score.

Conventions: latents are (N, K, D) (image, object, dim); slot codes (N, S, L); an assignment is
(N, K) ints, the slot matched to each object; ``fit`` and ``score`` select images (integer indices
or a boolean mask over N); ``present`` (N, K) bool drops absent objects (default: all present)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.linear_model import LinearRegression
from sklearn.metrics import adjusted_rand_score, r2_score


def _hard(masks: np.ndarray) -> np.ndarray:
    """(N, H, W) slot ids as they are, or (N, S, H, W) soft masks -> argmax over S."""
    masks = np.asarray(masks)
    return masks.argmax(axis=1) if masks.ndim == 4 else masks


def fg_ari(true_masks: np.ndarray, pred_masks: np.ndarray) -> float:
    """Mean over images of the ARI on foreground pixels (true id != 0): segmentation quality of slots."""
    true_masks, pred_masks = np.asarray(true_masks), _hard(pred_masks)
    if true_masks.shape != pred_masks.shape:
        raise ValueError(f"true masks {true_masks.shape} and predicted masks {pred_masks.shape} differ")
    scores = [adjusted_rand_score(t[t != 0], p[t != 0])
              for t, p in zip(true_masks, pred_masks, strict=True) if np.count_nonzero(t) >= 2]
    return float(np.mean(scores)) if scores else float("nan")


def match_by_masks(true_masks: np.ndarray, pred_masks: np.ndarray, n_objects: int, n_slots: int) -> np.ndarray:
    """(N, K) slot per object, Hungarian on -IoU per image: which slot segments which object."""
    true_masks, pred_masks = np.asarray(true_masks), _hard(pred_masks)
    if n_slots < n_objects:
        raise ValueError(f"need n_slots >= n_objects, got {n_slots} < {n_objects}")
    obj = true_masks[:, None] == np.arange(1, n_objects + 1)[None, :, None, None]  # (N, K, H, W)
    slot = pred_masks[:, None] == np.arange(n_slots)[None, :, None, None]  # (N, S, H, W)
    inter = np.einsum("nkhw,nshw->nks", obj, slot, dtype=float)
    union = obj.sum((2, 3))[:, :, None] + slot.sum((2, 3))[:, None, :] - inter
    iou = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    return np.stack([linear_sum_assignment(-m)[1] for m in iou])


def _pairs(true_latents: np.ndarray, slot_codes: np.ndarray, assignment: np.ndarray, images: np.ndarray,
           present: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(slot code, object latents) rows for the present objects of the chosen images."""
    n_images, n_objects = assignment.shape
    keep = np.zeros((n_images, n_objects), bool)
    keep[np.asarray(images)] = True
    if present is not None:
        keep &= np.asarray(present, bool)
    n, k = np.nonzero(keep)
    return slot_codes[n, assignment[n, k]], true_latents[n, k]


def slot_r2(true_latents: np.ndarray, slot_codes: np.ndarray, assignment: np.ndarray, fit: np.ndarray,
            score: np.ndarray, present: np.ndarray | None = None) -> dict:
    """Per-dim out-of-sample R^2 of a linear read-out matched slot -> object latents: how explicit objects are."""
    true_latents, slot_codes = np.asarray(true_latents, float), np.asarray(slot_codes, float)
    assignment = np.asarray(assignment, int)
    x_fit, y_fit = _pairs(true_latents, slot_codes, assignment, fit, present)
    x_score, y_score = _pairs(true_latents, slot_codes, assignment, score, present)
    r2 = r2_score(y_score, LinearRegression().fit(x_fit, y_fit).predict(x_score), multioutput="raw_values")
    return {"r2": r2, "mean": float(r2.mean())}


def _unmatched_r2(true_latents: np.ndarray, slot_codes: np.ndarray, assignment: np.ndarray, fit: np.ndarray,
                  score: np.ndarray, present: np.ndarray | None) -> float:
    """Mean-over-dims R^2 of each object from its best non-matched slot under one linear map fit on those pairs."""
    n_images, n_objects = assignment.shape
    n_slots = slot_codes.shape[1]
    others = np.array([[s for s in range(n_slots) if s != a] for a in assignment.ravel()])
    others = others.reshape(n_images, n_objects, n_slots - 1)  # the S-1 non-matched slots of each object
    fit_pairs = [_pairs(true_latents, slot_codes, others[..., j], fit, present) for j in range(n_slots - 1)]
    model = LinearRegression().fit(np.concatenate([x for x, _ in fit_pairs]),
                                   np.concatenate([y for _, y in fit_pairs]))
    score_pairs = [_pairs(true_latents, slot_codes, others[..., j], score, present) for j in range(n_slots - 1)]
    y = score_pairs[0][1]  # the same objects, in the same order, for every j
    preds = np.stack([model.predict(x) for x, _ in score_pairs])  # (S-1, pairs, D)
    best = ((preds - y[None]) ** 2).sum(-1).argmin(0)
    return float(r2_score(y, preds[best, np.arange(len(best))]))


def slot_identifiability_score(true_latents: np.ndarray, slot_codes: np.ndarray, assignment: np.ndarray,
                               fit: np.ndarray, score: np.ndarray, present: np.ndarray | None = None) -> float:
    """SIS = R^2(matched slot) - R^2(best non-matched slot): each object is in one slot and only there.

    R^2(matched) is ``slot_r2(...)["mean"]``. R^2(best non-matched): one LinearRegression is fit on
    every (present object, non-matched slot of the same image) pair of the fit images; on the score
    images each present object is predicted from each of its S-1 non-matched slots, the prediction with
    the smallest squared error (summed over dims) is kept, and the R^2 of these predictions (mean over
    dims) is taken. Choosing the slot by its error against the truth makes the subtracted term an
    optimistic (upper) estimate, i.e. SIS a conservative one. Needs S >= 2 slots. Range: at most 1;
    negative when a non-matched slot predicts the object better than the matched one."""
    true_latents, slot_codes = np.asarray(true_latents, float), np.asarray(slot_codes, float)
    assignment = np.asarray(assignment, int)
    if slot_codes.shape[1] < 2:
        raise ValueError("SIS needs at least 2 slots per image")
    matched = slot_r2(true_latents, slot_codes, assignment, fit, score, present)["mean"]
    return matched - _unmatched_r2(true_latents, slot_codes, assignment, fit, score, present)


def block_mcc(true_blocks: np.ndarray, codes: np.ndarray, block_sizes: list[int]) -> float:
    """Mean R^2 over blocks Hungarian-matched to objects: block-wise MCC with in-sample linear R^2 as the score.

    For every (code block b, object k) pair, R^2[b, k] is the in-sample R^2 (mean over the object's D
    dims) of a LinearRegression from the block's columns to object k's latents; blocks and objects are
    matched one to one maximising the total R^2 (min(B, K) pairs) and the matched R^2 are averaged.
    In sample: a block with as many columns as samples scores 1 trivially, so use N >> block size."""
    true_blocks, codes = np.asarray(true_blocks, float), np.asarray(codes, float)
    if sum(block_sizes) != codes.shape[1]:
        raise ValueError(f"block sizes {list(block_sizes)} do not sum to the code width {codes.shape[1]}")
    edges = np.cumsum([0, *block_sizes])
    r2 = np.array([[r2_score(true_blocks[:, k], LinearRegression().fit(block, true_blocks[:, k]).predict(block))
                    for k in range(true_blocks.shape[1])]
                   for block in (codes[:, a:b] for a, b in zip(edges[:-1], edges[1:], strict=True))])
    rows, cols = linear_sum_assignment(-r2)
    return float(r2[rows, cols].mean())
