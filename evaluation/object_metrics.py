"""Object-centric identifiability metrics: pure numpy/scipy/sklearn functions on arrays.

- ``fg_ari`` / ``fg_ari_result``: foreground adjusted Rand index of predicted slot masks against ground-truth object
  masks (the segmentation score of MONet, Burgess et al. 2019; IODINE, Greff et al. 2019; Slot Attention,
  Locatello et al. 2020). Per image it is scikit-learn's ``adjusted_rand_score`` on the ground-truth foreground
  pixels; the conventions at the edges are in ``fg_ari_result``.
- ``slot_identifiability_score``: the slot identifiability score (SIS) of Brady et al. 2023 ("Provably learning
  object-centric representations") as their evaluation code computes it (brendel-group/objects-identifiability,
  ``eval/model_evaluation``): a readout whose per-image slot-to-object matching is chosen by its own loss (r_on), the
  same with every matched pair forbidden (r_off), both again with the true latents as the slots (the ceiling r_b),
  and SIS = (r_on - r_b) / (1 - r_b) - clip((r_off - r_b) / (1 - r_b), 0, 1). ``readout="linear"`` is least squares
  with an intercept (ident3d's default); ``readout="mlp"`` a depth-5 MLP as their code uses.
- ``slot_r2``: the r_on readout of the SIS alone: per-latent held-out R^2 of each object from the slot the readout's
  own loss matches to it.
- ``slot_r2_masks``: slots matched to objects per image by mask IoU (``match_by_masks``, Hungarian), then the
  held-out R^2 of a linear readout from each matched slot's code to its object's latents (the property-prediction
  protocol of Dittadi et al. 2022, "Generalization and robustness implications in object-centric learning");
  ``slot_r2_given`` is the same for any given assignment.
- ``block_mcc``: block identifiability of Lachapelle et al. 2023 ("Additive decoders for latent variables
  identification and Cartesian-product extrapolation"): block x block R^2, Hungarian, mean. ``readout="tree"`` is
  their default (a depth-10 decision tree fitted on one half of the rows and scored on the other, R^2 clipped at 0);
  ``readout="linear"`` ident3d's earlier in-sample linear form.

Conventions: latents are (N, K, D) (image, object, dim), continuous latents only; slot codes (N, S, L); an assignment
is (N, K) ints, the slot matched to each object; ``fit`` and ``score`` select images (integer indices or a boolean
mask over N); ``present`` (N, K) bool drops absent objects (default: all present) from every fit, matching and R^2.
Inputs that a user gets wrong (too few objects to fit, S < K) are one ``UserError`` line; ``ident3d.metrics`` checks
the arrays themselves before it calls these."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression
from sklearn.metrics import adjusted_rand_score, r2_score
from sklearn.neural_network import MLPRegressor
from sklearn.tree import DecisionTreeRegressor

from ident3d.causal.errors import UserError
from ident3d.store.masks import slot_pixels

READOUTS = ("linear", "mlp")  # the SIS / slot_r2 readouts
BLOCK_READOUTS = ("linear", "tree")  # the block-MCC readouts
MAX_ROUNDS = 20  # the cap on fit-and-match rounds of a readout-matched fit
UNDEFINED_CEILING = 0.95  # r_b at or above it: 1 - r_b normalises nothing, the SIS is NaN
MLP_HIDDEN = (256, 256, 256, 256)  # depth 5 (four hidden layers and the output layer), Brady et al.'s width
BRUTE_FORCE_MATCHINGS = 720  # up to this many one-to-one matchings per image they are enumerated, else Hungarian


# ----- FG-ARI ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class FgAriResult:
    """``score``: the mean FG-ARI over the images scored; ``per_image`` (N,): each image's, NaN where left out;
    ``n_left_out`` images were left out, ``left_out_reason`` says why (None when none were)."""

    score: float
    per_image: np.ndarray
    n_scored: int
    n_left_out: int
    left_out_reason: str | None


def _hard(masks: np.ndarray) -> np.ndarray:
    """(N, H, W) slot ids as they are, or (N, S, H, W) soft masks -> argmax over S."""
    masks = np.asarray(masks)
    return masks.argmax(axis=1) if masks.ndim == 4 else masks


def fg_ari_result(true_masks: np.ndarray, pred_masks: np.ndarray) -> FgAriResult:
    """FG-ARI per image and its mean: the ARI between the true object ids and the predicted slot ids (argmax over
    slots for soft masks) on the true foreground pixels (true id != 0) only; no slot-to-object matching is needed.

    Conventions (SPEC section 8): an image whose foreground is one object kept in one slot scores 1.0, as in
    scikit-learn's ``adjusted_rand_score`` and Wiedemer et al.; DeepMind's ``adjusted_rand_index``
    (multi_object_datasets ``segmentation_metrics``) gives NaN (0/0) for it, a plain mean of theirs is then NaN and a
    nan-mean drops the image. One object split over two slots scores 0 in both. Images with fewer than 2 foreground
    pixels carry no pair to compare and are left out (counted in ``n_left_out``); if no image has 2 or more, the
    score is refused (``UserError``) rather than NaN."""
    true_masks, pred_masks = np.asarray(true_masks), _hard(pred_masks)
    if true_masks.shape != pred_masks.shape:
        raise UserError(f"true masks {true_masks.shape} and predicted masks {pred_masks.shape} differ in shape")
    per_image = np.full(len(true_masks), np.nan)
    for i, (t, p) in enumerate(zip(true_masks, pred_masks, strict=True)):
        fg = t != 0
        if np.count_nonzero(fg) >= 2:
            per_image[i] = adjusted_rand_score(t[fg], p[fg])
    scored = np.isfinite(per_image)
    if not scored.any():
        raise UserError(f"FG-ARI needs an image with at least 2 foreground pixels (true id != 0); none of the "
                        f"{len(true_masks)} has (all background, or true and predicted masks swapped?)")
    left = int((~scored).sum())
    return FgAriResult(float(per_image[scored].mean()), per_image, int(scored.sum()), left,
                       f"{left} image(s) with fewer than 2 foreground pixels" if left else None)


def fg_ari(true_masks: np.ndarray, pred_masks: np.ndarray) -> float:
    """The mean FG-ARI over images (``fg_ari_result(...).score``; its conventions)."""
    return fg_ari_result(true_masks, pred_masks).score


# ----- matching -------------------------------------------------------------------------------------------------
def match_by_masks(true_masks: np.ndarray, pred_masks: np.ndarray, n_objects: int, n_slots: int) -> np.ndarray:
    """(N, K) slot per object, Hungarian on -IoU per image: which slot segments which object."""
    true_masks, pred_masks = np.asarray(true_masks), _hard(pred_masks)
    if n_slots < n_objects:
        raise UserError(f"need n_slots >= n_objects, got {n_slots} < {n_objects}")
    obj = slot_pixels(true_masks, n_objects)  # (N, K, H, W)
    slot = pred_masks[:, None] == np.arange(n_slots)[None, :, None, None]  # (N, S, H, W)
    inter = np.einsum("nkhw,nshw->nks", obj, slot, dtype=float)
    union = obj.sum((2, 3))[:, :, None] + slot.sum((2, 3))[:, None, :] - inter
    iou = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    return np.stack([linear_sum_assignment(-m)[1] for m in iou])


def match_by_cost(cost: np.ndarray, present: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
    """(N, K) the slot of each present object (-1 for absent ones) minimising the summed ``cost`` (N, K, S) of a
    one-to-one matching per image (rectangular for S > K); ``allowed`` (N, K, S): the slots each object may take
    (default all; the caller makes sure a one-to-one matching of allowed pairs exists). Absent objects take part in
    nothing. Up to ``BRUTE_FORCE_MATCHINGS`` matchings per image every matching is summed at once (the same optimum
    as the Hungarian algorithm), else Hungarian image by image."""
    n, k, s = cost.shape
    allowed = np.ones(cost.shape, bool) if allowed is None else allowed
    if math.perm(s, k) <= BRUTE_FORCE_MATCHINGS:
        perms = np.array(list(itertools.permutations(range(s), k)), int).reshape(-1, k)  # (P, K)
        total = np.zeros((n, len(perms)))
        for j in range(k):
            c = np.where(allowed[:, j][:, perms[:, j]], cost[:, j][:, perms[:, j]], np.inf)  # (N, P)
            total += np.where(present[:, j:j + 1], c, 0.0)
        out = perms[total.argmin(1)].copy()
    else:
        out = np.full((n, k), -1)
        for i in range(n):
            rows = np.flatnonzero(present[i])
            if len(rows):
                r, c = linear_sum_assignment(np.where(allowed[i, rows], cost[i, rows], np.inf))
                out[i, rows[r]] = c
    out[~present] = -1
    return out


# ----- readouts -------------------------------------------------------------------------------------------------
class _LinearReadout:
    """Least squares with an intercept (weighted rows: a row standing for ``w`` pairs with the same input)."""

    def __init__(self, seed: int = 0) -> None:
        self.coef: np.ndarray | None = None

    def fit(self, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        r = np.sqrt(w)[:, None]
        self.coef = np.linalg.lstsq(np.c_[x, np.ones(len(x))] * r, y * r, rcond=None)[0]

    def predict(self, x: np.ndarray) -> np.ndarray:
        return x @ self.coef[:-1] + self.coef[-1]


class _MlpReadout:
    """Brady et al.'s readout, as scikit-learn gives it: an MLP of depth 5 (``MLP_HIDDEN``) on standardised inputs
    and targets, seeded; each later fit starts from the previous weights (warm start), as their matching and
    training alternate within one training run."""

    def __init__(self, seed: int = 0) -> None:
        self.net = MLPRegressor(hidden_layer_sizes=MLP_HIDDEN, random_state=seed, max_iter=200, early_stopping=True,
                                warm_start=True)
        self.x_scale: tuple[np.ndarray, np.ndarray] | None = None
        self.y_scale: tuple[np.ndarray, np.ndarray] | None = None

    @staticmethod
    def _scale(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sd = a.std(0)
        return a.mean(0), np.where(sd > 1e-12, sd, 1.0)

    def fit(self, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        if self.x_scale is None:  # the first fit (every pair) fixes the scales
            self.x_scale, self.y_scale = self._scale(x), self._scale(y)
            self.net.early_stopping = len(x) >= 50  # a 10% validation split of fewer rows says nothing
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.net.fit((x - self.x_scale[0]) / self.x_scale[1], (y - self.y_scale[0]) / self.y_scale[1],
                         sample_weight=w)

    def predict(self, x: np.ndarray) -> np.ndarray:
        shape = x.shape
        flat = (x.reshape(-1, shape[-1]) - self.x_scale[0]) / self.x_scale[1]
        y = self.net.predict(flat).reshape(len(flat), -1) * self.y_scale[1] + self.y_scale[0]
        return y.reshape(*shape[:-1], y.shape[-1])


def _readout(kind: str, seed: int) -> _LinearReadout | _MlpReadout:
    if kind not in READOUTS:
        raise UserError(f"readout must be one of {', '.join(READOUTS)}, got {kind!r}")
    return _LinearReadout(seed) if kind == "linear" else _MlpReadout(seed)


@dataclass(frozen=True, eq=False)
class _Matched:
    """A readout fitted with its own matching: the matching of the fit and score images, held-out R^2 per latent,
    the fit-and-match rounds run and whether the matching stopped changing before the cap."""

    match_fit: np.ndarray
    match_score: np.ndarray
    r2: np.ndarray
    rounds: int
    converged: bool


def _cost(pred: np.ndarray, z: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(N, K, S) the readout's loss of object k from slot s: squared error summed over the object's dims, each dim
    in units of its fit-split standard deviation (Brady et al. standardise the latents before fitting)."""
    return (((z[:, :, None, :] - pred[:, None, :, :]) / scale) ** 2).sum(-1)


def _every_pair(z: np.ndarray, x: np.ndarray, present: np.ndarray,
                allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first fit's rows: every allowed (present object, slot) pair, as one row per slot with the mean of its
    objects' latents, weighted by their count (the same least-squares problem as one row per pair)."""
    s = x.shape[1]
    ok = np.broadcast_to(present[:, :, None], (*present.shape, s)).copy()
    if allowed is not None:
        ok &= allowed
    count = ok.sum(1)  # (N, S)
    total = np.einsum("nks,nkd->nsd", ok.astype(float), z)
    keep = count > 0
    return x[keep], total[keep] / count[keep][:, None], count[keep].astype(float)


def _matched_pairs(z: np.ndarray, x: np.ndarray, match: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(slot code, object latents) rows of the present objects (match >= 0) under a matching."""
    n, k = np.nonzero(match >= 0)
    return x[n, match[n, k]], z[n, k]


def _readout_matched(z: np.ndarray, x: np.ndarray, present: np.ndarray, fit: np.ndarray, score: np.ndarray,
                     scale: np.ndarray, readout: str, seed: int, allowed: np.ndarray | None = None,
                     max_rounds: int = MAX_ROUNDS) -> _Matched:
    """A readout slot -> object latents fitted while the per-image matching is chosen by its own loss: one fit on
    every allowed (present object, slot) pair of the fit images, then matching and refitting on the matched pairs
    until the matching stops changing (at most ``max_rounds`` refits); the score images are matched by the fitted
    readout's loss and scored by held-out R^2 per latent over their present objects. ``allowed`` (N, K, S): the
    slots each object may be matched to (the off-diagonal readout's), for all N images."""
    zf, xf, pf = z[fit], x[fit], present[fit]
    allowed_fit, allowed_score = (None, None) if allowed is None else (allowed[fit], allowed[score])
    model = _readout(readout, seed)
    model.fit(*_every_pair(zf, xf, pf, allowed_fit))
    match, rounds, converged = None, 0, False
    while True:
        new = match_by_cost(_cost(model.predict(xf), zf, scale), pf, allowed_fit)
        if match is not None and np.array_equal(new, match):
            converged = True
            break
        if rounds == max_rounds:
            break
        match, rounds = new, rounds + 1
        xs, ys = _matched_pairs(zf, xf, match)
        model.fit(xs, ys, np.ones(len(xs)))
    zs, xs_all, ps = z[score], x[score], present[score]
    pred = model.predict(xs_all)
    match_score = match_by_cost(_cost(pred, zs, scale), ps, allowed_score)
    n, k = np.nonzero(match_score >= 0)
    r2 = np.atleast_1d(r2_score(zs[n, k], pred[n, match_score[n, k]], multioutput="raw_values"))
    return _Matched(match, match_score, r2, rounds, converged)


def _select(idx: Any, n: int) -> np.ndarray:
    return np.arange(n)[np.asarray(idx)]


def _prepared(true_latents: Any, slot_codes: Any, fit: Any, score: Any, present: Any,
              needs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Float latents and codes, the fit and score indices, presence, and the matching loss's per-dim scale; refuses
    S < K and fewer present objects than a readout of ``needs`` inputs can be fitted on."""
    z, x = np.asarray(true_latents, float), np.asarray(slot_codes, float)
    n, k, d = z.shape
    if x.shape[1] < k:
        raise UserError(f"needs at least as many slots as objects, got {x.shape[1]} slots for {k} objects")
    present = np.ones((n, k), bool) if present is None else np.asarray(present, bool)
    fit, score = _select(fit, n), _select(score, n)
    n_fit, n_score = int(present[fit].sum()), int(present[score].sum())
    if n_fit < needs + 2:
        raise UserError(f"needs at least {needs + 2} present objects in the fit images to fit a readout from "
                        f"{needs} inputs, got {n_fit}")
    if n_score < 2:
        raise UserError(f"needs at least 2 present objects in the score images, got {n_score}")
    sd = z[fit][present[fit]].std(0)
    return z, x, present, fit, score, np.where(sd > 1e-12, sd, 1.0)


# ----- slot R^2 -------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SlotR2Result:
    """``score``: the mean over latents of ``per_latent``, the held-out R^2 of each object's latents from its matched
    slot (present objects of the score images); ``matched_by``: "readout" (the readout's own loss), "masks" (mask
    IoU) or "given"; ``iterations``: the readout's fit-and-match rounds (0 when the matching was given)."""

    score: float
    per_latent: np.ndarray
    matched_by: str
    readout: str
    iterations: int
    converged: bool


def slot_r2(true_latents: np.ndarray, slot_codes: np.ndarray, fit: np.ndarray, score: np.ndarray,
            present: np.ndarray | None = None, readout: str = "linear", seed: int = 0,
            max_rounds: int = MAX_ROUNDS) -> SlotR2Result:
    """Per-latent held-out R^2 of the SIS's on-diagonal readout (r_on, ``slot_identifiability_score``): a readout
    from a slot to an object's latents fitted on the fit images while each image's one-to-one matching of slots to
    objects is chosen by the readout's own loss; the score images are matched the same way by the fitted readout."""
    z, x, present, fit, score, scale = _prepared(true_latents, slot_codes, fit, score, present,
                                                 np.shape(slot_codes)[-1])
    on = _readout_matched(z, x, present, fit, score, scale, readout, seed, max_rounds=max_rounds)
    return SlotR2Result(float(on.r2.mean()), on.r2, "readout", readout, on.rounds, on.converged)


def slot_r2_given(true_latents: np.ndarray, slot_codes: np.ndarray, assignment: np.ndarray, fit: np.ndarray,
                  score: np.ndarray, present: np.ndarray | None = None) -> SlotR2Result:
    """Per-latent held-out R^2 of a linear readout (LinearRegression with intercept) from each object's assigned
    slot (``assignment`` (N, K)) to its latents, fitted on the fit images' present objects, scored on the score
    images' present objects."""
    z, x, present, fit, score, _ = _prepared(true_latents, slot_codes, fit, score, present, np.shape(slot_codes)[-1])
    assignment = np.where(present, np.asarray(assignment, int), -1)
    x_fit, y_fit = _matched_pairs(z[fit], x[fit], assignment[fit])
    x_score, y_score = _matched_pairs(z[score], x[score], assignment[score])
    r2 = np.atleast_1d(r2_score(y_score, LinearRegression().fit(x_fit, y_fit).predict(x_score),
                                multioutput="raw_values"))
    return SlotR2Result(float(r2.mean()), r2, "given", "linear", 0, True)


def slot_r2_masks(true_latents: np.ndarray, slot_codes: np.ndarray, true_masks: np.ndarray, pred_masks: np.ndarray,
                  fit: np.ndarray, score: np.ndarray, present: np.ndarray | None = None) -> SlotR2Result:
    """``slot_r2_given`` with each image's slots matched to objects by mask IoU (``match_by_masks``): the
    property-prediction protocol of Dittadi et al. 2022 (ident3d's ``slot_r2`` before it was readout-matched)."""
    k, s = np.shape(true_latents)[1], np.shape(slot_codes)[1]
    r = slot_r2_given(true_latents, slot_codes, match_by_masks(true_masks, pred_masks, k, s), fit, score, present)
    return SlotR2Result(r.score, r.per_latent, "masks", "linear", 0, True)


# ----- SIS ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SISResult:
    """Brady et al.'s slot identifiability score and its parts. ``score``: NaN when undefined (``reason`` says why,
    else None); ``r_on``, ``r_off``: held-out R^2 (mean over latents) of the on- and off-diagonal readouts;
    ``ceiling``: r_b, the off-diagonal R^2 with the true latents as the slots, clipped to [0, 1]; ``ceiling_r_on``:
    the on-diagonal R^2 of that ceiling (about 1); ``per_latent``: r_on per latent; ``iterations``: the fit-and-match
    rounds of each readout (on, off, ceiling_on, ceiling_off); ``converged``: whether every matching stopped
    changing before the cap (``MAX_ROUNDS``)."""

    score: float
    r_on: float
    r_off: float
    ceiling: float
    ceiling_r_on: float
    readout: str
    reason: str | None
    per_latent: np.ndarray
    iterations: Mapping[str, int]
    converged: bool


def slot_identifiability_score(true_latents: np.ndarray, slot_codes: np.ndarray, fit: np.ndarray,
                               score: np.ndarray, present: np.ndarray | None = None, readout: str = "linear",
                               seed: int = 0, max_rounds: int = MAX_ROUNDS) -> SISResult:
    """The slot identifiability score of Brady et al. 2023 as their evaluation code defines it (SPEC section 8):

    1. on-diagonal: a readout from a slot code to an object's latents (``readout="linear"``: least squares with an
       intercept; ``"mlp"``: a seeded depth-5 MLP as theirs) is fitted on the fit images while each image's
       one-to-one (K x S, Hungarian) matching of slots to objects is chosen by the readout's own loss (squared error
       summed over the object's dims, each dim in units of its fit-split standard deviation): one fit on every
       (present object, slot) pair, then match and refit until the matching stops changing (at most ``max_rounds``
       refits); the score images are matched by the fitted readout's loss; r_on = their R^2, mean over latents;
    2. off-diagonal: the same with every on-diagonal (object, its matched slot) pair forbidden, so each object is
       read from another slot, one to one; r_off = its R^2;
    3. both again with the true latents as the slots (slots = objects, an absent object's slot all zeros, as Brady et
       al.'s zero-padded latents): r_b = clip(that r_off, 0, 1);
    4. SIS = (r_on - r_b) / (1 - r_b) - clip((r_off - r_b) / (1 - r_b), 0, 1).

    r_b is what the objects alone say about each other (dependent objects predict one another); where
    r_b >= ``UNDEFINED_CEILING`` the objects are nearly copies of each other, the normalisation is undefined and the
    score is NaN with a ``reason``. Absent objects (``present`` False) are left out of every fit, matching and R^2.
    Needs at least 2 objects (the ceiling's off-diagonal matching needs another slot) and S >= K slots.

    More slots than objects (Brady et al.'s code has S = K): the on-diagonal matching is K x S; the off-diagonal
    readout reads each object only from a slot the on-diagonal matching gave another present object of the image
    (never a spare or background slot), so it has the same choices as with S = K and as the ceiling's: spare slots
    neither add choices that raise r_off by selection alone nor change the score of a perfect encoding (with the spare
    slots allowed, a perfect encoding with one spare slot of noise scored 0.82). Images with one present object have
    no other slot and are left out of the off-diagonal readouts (and their ceiling). The alternating fit may cycle;
    ``converged`` says whether it stopped."""
    z, x, present, fit, score, scale = _prepared(true_latents, slot_codes, fit, score, present,
                                                 max(np.shape(slot_codes)[-1], np.shape(true_latents)[-1]))
    if z.shape[1] < 2:
        raise UserError(f"the SIS needs at least 2 objects per image (its ceiling reads each object from another), "
                        f"got {z.shape[1]}")
    truth = np.where(present[:, :, None], z, 0.0)  # the ceiling's slots: absent objects zero-padded, as Brady et al.'s
    shared = present & (present.sum(1) >= 2)[:, None]  # objects with another object in their image to be read from
    if shared[fit].sum() < x.shape[-1] + 2 or shared[score].sum() < 2:
        raise UserError("the SIS's off-diagonal readout reads each object from another object's slot: it needs "
                        f"images with 2 or more present objects, {x.shape[-1] + 2} such objects in the fit images "
                        f"and 2 in the score images, got {int(shared[fit].sum())} and {int(shared[score].sum())}")
    fits = {}
    for name, slots in (("on", x), ("ceiling_on", truth)):
        fits[name] = _readout_matched(z, slots, present, fit, score, scale, readout, seed, max_rounds=max_rounds)
        fits[name.replace("on", "off")] = _readout_matched(
            z, slots, shared, fit, score, scale, readout, seed, _other_objects_slots(fits[name], fit, score, shared,
                                                                                     slots.shape[1]), max_rounds)
    r_on, r_off = float(fits["on"].r2.mean()), float(fits["off"].r2.mean())
    r_b = float(np.clip(fits["ceiling_off"].r2.mean(), 0.0, 1.0))
    if r_b >= UNDEFINED_CEILING:
        value = float("nan")
        reason = (f"undefined: the objects predict one another with R^2 {r_b:.3f} >= {UNDEFINED_CEILING} from their "
                  "own latents (nearly copies of each other), so 1 - r_b normalises nothing")
    else:
        value = float((r_on - r_b) / (1 - r_b) - np.clip((r_off - r_b) / (1 - r_b), 0.0, 1.0))
        reason = None
    return SISResult(value, r_on, r_off, r_b, float(fits["ceiling_on"].r2.mean()), readout, reason, fits["on"].r2,
                     {name: m.rounds for name, m in fits.items()}, all(m.converged for m in fits.values()))


def _other_objects_slots(on: _Matched, fit: np.ndarray, score: np.ndarray, present: np.ndarray,
                         n_slots: int) -> np.ndarray:
    """(N, K, S) the off-diagonal readout's allowed pairs: each present object may be read from a slot the
    on-diagonal matching gave another present object of its image, never its own and never a slot no object took
    (a spare or background slot), so with S > K slots the off-diagonal matching has the K - 1 choices it has with
    S = K, as the ceiling's has."""
    match = np.full(present.shape, -1)
    match[fit], match[score] = on.match_fit, on.match_score
    match = np.where(present, match, -1)
    held = np.zeros((*present.shape[:1], n_slots), bool)  # (N, S): slots the on-matching gave a present object
    rows, objs = np.nonzero(match >= 0)
    held[rows, match[rows, objs]] = True
    allowed = np.broadcast_to(held[:, None, :], (*present.shape, n_slots)).copy()
    allowed[rows, objs, match[rows, objs]] = False  # not its own
    return allowed & present[:, :, None]


# ----- block-MCC ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class BlockMccResult:
    """``score``: the mean R^2 of the matched (block, object) pairs, in [0, 1] (Lachapelle et al. report x 100);
    ``r2`` (B, K): every block's R^2 for every object; ``pairs``: the matched (block, object) pairs."""

    score: float
    r2: np.ndarray
    pairs: tuple[tuple[int, int], ...]
    readout: str


def block_mcc(true_blocks: np.ndarray, codes: np.ndarray, block_sizes: list[int], readout: str = "linear",
              seed: int = 0) -> BlockMccResult:
    """Block-MCC: R^2[b, k] of a regressor from code block b's columns to object k's latents (mean over its D
    dims), blocks and objects matched one to one maximising the total (Hungarian, min(B, K) pairs), the mean of
    the matched R^2.

    ``readout="tree"`` is Lachapelle et al.'s default (additive-decoder code, ``reg_case="d-tree"``): a
    DecisionTreeRegressor of max depth 10 fitted on one half of the rows (a seeded shuffle) and scored on the other
    half, R^2 clipped at 0. ``readout="linear"`` is ident3d's earlier form: LinearRegression with an intercept,
    fitted and scored on every row (in sample, so never below 0); their linear ``reg_case`` is the same idea
    fitted on a training split without an intercept, not this exactly. A block with as many columns as samples
    scores 1 trivially in sample, so use N >> block size."""
    true_blocks, codes = np.asarray(true_blocks, float), np.asarray(codes, float)
    if readout not in BLOCK_READOUTS:
        raise UserError(f"readout must be one of {', '.join(BLOCK_READOUTS)}, got {readout!r}")
    if sum(block_sizes) != codes.shape[1]:
        raise UserError(f"block sizes {list(block_sizes)} do not sum to the code width {codes.shape[1]}")
    edges = np.cumsum([0, *block_sizes])
    blocks = [codes[:, a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]
    n_objects = true_blocks.shape[1]
    if readout == "linear":
        r2 = np.array([[r2_score(true_blocks[:, k], LinearRegression().fit(block, true_blocks[:, k]).predict(block))
                        for k in range(n_objects)] for block in blocks])
    else:
        order = np.random.default_rng(seed).permutation(len(codes))
        first, second = order[:len(order) // 2], order[len(order) // 2:]
        r2 = np.array([[max(0.0, r2_score(true_blocks[second, k], DecisionTreeRegressor(max_depth=10, random_state=seed)
                                          .fit(block[first], true_blocks[first, k]).predict(block[second])))
                        for k in range(n_objects)] for block in blocks])
    rows, cols = linear_sum_assignment(-r2)
    return BlockMccResult(float(r2[rows, cols].mean()), r2, tuple(zip(rows.tolist(), cols.tolist(), strict=True)),
                          readout)
