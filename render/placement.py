"""Placement rules applied: which rows keep them, the deterministic rejection loop a render chunk runs, the preflight
that refuses impossible rules before anything is written, and a summary of what rejection did to the latents.

Rules (``ident3d.render.placement_rules``): ``min_distance`` and ``support`` are checked on the latents before
rendering (object centres through the scene's pose mapping); ``min_visible`` on the rendered masks. A rejected row i is
drawn again: attempt r of row i is row i of the SCM sampled with :func:`placement_seed` (store seed, r), attempt 0 being
the store's own seed, so a row depends only on its index and its own draws, never on the chunking, the workers or which
other rows were rejected; a view row is redrawn alike from its transform seed. Rows keep their Cycles seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

import numpy as np

from ident3d.causal import SCM, Samples, rng
from ident3d.causal.errors import UserError
from ident3d.render.placement_rules import PlacementRules, Support, parse_support
from ident3d.render.scene import SLOT, Scene, pose, presence
from ident3d.store.zarr_io import ChunkData

PREFLIGHT_ROWS = 2000  # rows the preflight samples to measure how many keep the latent rules
PLACED_BLOCK = 4096  # rows drawn at once by sample_placed (a render draws a chunk at once)
LEFT_OVER = 0.01  # refused when n * (1 - p) ** (retries + 1), the rows expected to break the rules at last, exceeds it

Draw = Callable[[int, np.ndarray], Samples]  # (attempt, positions in the chunk) -> those rows as drawn at that attempt
Render = Callable[[Samples, np.ndarray], ChunkData]  # (rows, their positions in the chunk) -> their rendered data


def placement_seed(seed: int, attempt: int) -> int:
    """The seed of draw ``attempt`` of a rejected row: ``seed`` itself for attempt 0 (so accepted rows are the rows a
    render without rules stores), else a stream of (seed, 'placement', attempt)."""
    return int(seed) if attempt == 0 else rng.stream_key(seed, "placement", int(attempt)) % (2**31)


# ----- which rows keep the rules ---------------------------------------------------------------------------------
def slot_columns(scene: Scene) -> dict[str, int]:
    """Latent name -> the object slot it describes (class latent and ``objects.latents``; not ``present``)."""
    if scene.objects is None:
        return {}
    o = scene.objects
    return {name.replace(SLOT, str(k)): k for k in range(o.slots)
            for name in [o.class_latent, *(b.name for b in o.latents)]}


def centres(scene: Scene, latents: np.ndarray, classes: np.ndarray | None = None) -> np.ndarray:
    """(N, K, 3) world positions of each row's object slots (the scene's pose mapping); NaN for absent slots."""
    latents = np.asarray(latents, dtype=np.float64)
    out = np.full((len(latents), scene.slots, 3), np.nan)
    cls = np.zeros(len(latents), np.int64) if classes is None else np.asarray(classes)
    for i, row in enumerate(latents):
        for k, obj in enumerate(pose(scene, row.tolist(), int(cls[i])).objects):
            if obj.present:
                out[i, k] = obj.location
    return out


def gap_ok(scene: Scene, latents: np.ndarray, classes: np.ndarray | None = None,
           min_distance: float | None = None) -> np.ndarray:
    """(N,) bool: every two present objects' centres lie at least ``min_distance`` apart (default: the scene's rule);
    rows with fewer than two objects keep it."""
    if min_distance is None:
        min_distance = scene.placement.min_distance if scene.placement is not None else 0.0
    if min_distance <= 0 or scene.slots < 2:
        return np.ones(len(latents), bool)
    c = centres(scene, latents, classes)
    gaps = np.linalg.norm(c[:, :, None, :] - c[:, None, :, :], axis=-1)  # NaN where either slot is absent
    upper = np.triu(np.ones((scene.slots, scene.slots), bool), 1)
    return ~np.any(np.where(upper, gaps, np.inf) < min_distance, axis=(1, 2))


def support_ok(support: Support | None, scene: Scene, latents: np.ndarray) -> np.ndarray:
    """(N,) bool: rows the support region keeps. A row is inside when every listed latent lies in its closed interval;
    an absent object's latents lie in none (its position is not a place), so 'exclude' keeps such a row and 'only'
    drops it. ``exclude`` keeps rows outside, ``only`` rows inside."""
    if support is None:
        return np.ones(len(latents), bool)
    names, slot_of = list(scene.latent_names), slot_columns(scene)
    here = presence(scene, latents)
    inside = np.ones(len(latents), bool)
    for name, low, high in support.box:
        v = np.asarray(latents, dtype=np.float64)[:, names.index(name)]
        if name in slot_of:
            v = np.where(here[:, slot_of[name]], v, np.nan)
        inside &= (v >= low) & (v <= high)
    return ~inside if support.mode == "exclude" else inside


def latents_ok(rules: PlacementRules, scene: Scene, latents: np.ndarray,
               classes: np.ndarray | None = None) -> np.ndarray:
    """(N,) bool: rows that keep the rules checked before rendering (min_distance and the support region)."""
    return gap_ok(scene, latents, classes, rules.min_distance) & support_ok(rules.support, scene, latents)


def rules_breach(rules: PlacementRules, scene: Scene, latents: np.ndarray,
                 classes: np.ndarray | None = None) -> str | None:
    """The first row that breaks a latent rule (min_distance, support), as 'row I ...' naming the rule and, for
    min_distance, the two objects and their distance; None when every row keeps them. For rows that cannot be redrawn
    (given latents), which are refused instead."""
    gap = ~gap_ok(scene, latents, classes, rules.min_distance)
    if gap.any():
        i = int(np.flatnonzero(gap)[0])
        c = centres(scene, latents[i:i + 1], None if classes is None else classes[i:i + 1])[0]
        a, b, d = min(((a, b, float(np.linalg.norm(c[a] - c[b]))) for a in range(len(c)) for b in range(a + 1, len(c))
                       if not np.isnan(c[a, 0]) and not np.isnan(c[b, 0])), key=lambda t: t[2])
        return (f"row {i} has objects {a} and {b} {d:.3g} apart (their centres), under scene {scene.name}'s placement "
                f"min_distance {rules.min_distance:g}")
    out = ~support_ok(rules.support, scene, latents)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        side = "inside" if rules.support.mode == "exclude" else "outside"
        return f"row {i} lies {side} scene {scene.name}'s placement {rules.support.describe()}"
    return None


def pixels_needed(min_visible: float, pixels: int) -> int:
    """Visible pixels an object needs in a frame of ``pixels``: its share ``min_visible``, rounded up, and at least 1
    (0 when the rule is off)."""
    return 0 if min_visible <= 0 else max(1, math.ceil(min_visible * pixels - 1e-9))


def visible_ok(visibility: np.ndarray, present: np.ndarray, min_visible: float, pixels: int) -> np.ndarray:
    """(N,) bool: every present object of a row shows at least :func:`pixels_needed` pixels (``visibility`` (N, K)
    visible pixels per slot, ``present`` (N, K))."""
    need = pixels_needed(min_visible, pixels)
    return ~np.any(np.asarray(present, bool) & (np.asarray(visibility) < need), axis=1)


# ----- the rules of a render -------------------------------------------------------------------------------------
def render_rules(scene: Scene, support: Mapping[str, Any] | None, names: Sequence[str]) -> PlacementRules | None:
    """The rules a render applies: the scene's, with ``support`` (a support mapping, e.g. from ``--support-*``)
    added; None when no rule is on. Support latents must be in ``names``; a support given twice (the scene's and
    the argument) is refused; each one line."""
    rules = scene.placement
    if support is not None:
        if rules is not None and rules.support is not None:
            raise UserError(f"scene {scene.name} declares its own placement support; drop --support-* (or the "
                            "scene's placement.support)")
        rules = replace(rules or PlacementRules(), support=parse_support(support))
    if rules is None or not rules.active:
        return None
    for name, _, _ in rules.support.box if rules.support else ():
        if name not in names:
            raise UserError(f"support: unknown latent {name!r}; the latents are {', '.join(names)}")
    return rules


def preflight(rules: PlacementRules, scene: Scene, scm: SCM, n: int, seed: int,
              views: Mapping[str, Sequence[str]] | None = None) -> float:
    """Refuse rules that would leave rows failing, before anything is written: sample ``PREFLIGHT_ROWS`` rows (and
    their views) and measure the share p that keeps the latent rules; p = 0, or ``n * (1 - p) ** (retries + 1)`` above
    ``LEFT_OVER``, is one line with the rate and what to change. Returns the anchors' p (1.0: no latent rule)."""
    if not rules.on_latents:
        return 1.0
    rows = scm.sample(PREFLIGHT_ROWS, seed=rng.stream_key(seed, "placement", "preflight") % (2**31))
    ok = latents_ok(rules, scene, rows.latents, rows.classes)
    _judge(rules, scene, rows, ok, n, scm.name, "")
    kept = take(rows, np.flatnonzero(ok))
    for name, change in (views or {}).items():
        moved = scm.transform(kept, change, seed=rng.stream_key(seed, "placement", "preflight", name) % (2**31))
        _judge(rules, scene, moved, latents_ok(rules, scene, moved.latents, moved.classes), n, scm.name,
               f"view {name} of ")
    return float(ok.mean())


def _judge(rules: PlacementRules, scene: Scene, rows: Samples, ok: np.ndarray, n: int, scm: str, what: str) -> None:
    """One preflight verdict: a one-line UserError naming each rule's rate and what to change, or nothing."""
    p = float(ok.mean()) if len(ok) else 0.0
    left = n * (1.0 - p) ** (rules.retries + 1)
    if p > 0 and left <= LEFT_OVER:
        return
    parts, fixes = [], []
    if rules.min_distance > 0:
        parts.append(f"min_distance {rules.min_distance:g} keeps "
                     f"{gap_ok(scene, rows.latents, rows.classes, rules.min_distance).mean():.1%}")
        fixes.append("lower min_distance")
    if rules.support is not None:
        parts.append(f"{rules.support.describe()} keeps {support_ok(rules.support, scene, rows.latents).mean():.1%}")
        fixes.append("widen the support")
    raise UserError(f"placement: only {p:.1%} of {len(ok):,} {what}rows sampled from {scm} keep the rules "
                    f"({'; '.join(parts)}), so about {left:.3g} of {n:,} rows would still break them after "
                    f"{rules.retries + 1} draws; {', '.join(fixes)} or raise placement retries ({rules.retries})")


# ----- the rejection loop of one chunk ---------------------------------------------------------------------------
def take(rows: Samples, pos: np.ndarray) -> Samples:
    """Rows ``pos`` of ``rows`` (their global row ids kept)."""
    return replace(rows, latents=rows.latents[pos], index=rows.index[pos],
                   classes=None if rows.classes is None else rows.classes[pos],
                   present=None if rows.present is None else rows.present[pos])


def _put(dst: Samples | None, pos: np.ndarray, src: Samples, n: int) -> Samples:
    """``src`` written into rows ``pos`` of ``dst`` (created for ``n`` rows when None)."""
    if dst is None:
        dst = replace(src, latents=np.zeros((n, src.latents.shape[1]), src.latents.dtype),
                      index=np.zeros(n, src.index.dtype),
                      classes=None if src.classes is None else np.zeros(n, src.classes.dtype),
                      present=None if src.present is None else np.zeros((n, src.present.shape[1]), bool))
    dst.latents[pos], dst.index[pos] = src.latents, src.index
    if dst.classes is not None:
        dst.classes[pos] = src.classes
    if dst.present is not None:
        dst.present[pos] = src.present
    return dst


def _put_data(dst: ChunkData | None, pos: np.ndarray, src: ChunkData, n: int) -> ChunkData:
    """Rendered rows ``src`` written into rows ``pos`` of ``dst`` (created for ``n`` rows when None)."""
    if dst is None:
        dst = ChunkData(**{f.name: None if getattr(src, f.name) is None else
                           np.zeros((n, *getattr(src, f.name).shape[1:]), getattr(src, f.name).dtype)
                           for f in fields(ChunkData)})
    for f in fields(ChunkData):
        if getattr(src, f.name) is not None:
            getattr(dst, f.name)[pos] = getattr(src, f.name)
    return dst


def _draw(draw: Draw, attempts: np.ndarray, pos: np.ndarray, n: int) -> Samples:
    """Rows ``pos`` drawn each at its own attempt number (one draw call per distinct attempt), in ``pos`` order."""
    out: Samples | None = None
    for r in np.unique(attempts):
        sel = np.flatnonzero(attempts == r)
        out = _put(out, sel, draw(int(r), pos[sel]), len(pos))
    assert out is not None
    return out


def redraw_rows(need: np.ndarray, attempts: np.ndarray, rows: Samples | None, draw: Draw, rules: PlacementRules,
                scene: Scene, what: Callable[[int], str]) -> Samples:
    """Rows ``need`` of ``rows`` (created for ``len(attempts)`` rows when None) drawn again, each at its next attempt
    (``attempts`` counts them, in place), until every one keeps the latent rules (min_distance, support); a row still
    breaking them after ``retries + 1`` draws is a one-line UserError naming it (``what(position)``)."""
    n = len(attempts)
    while need.size:
        spent = need[attempts[need] > rules.retries]
        if spent.size:
            rule = " / ".join(x for x in (f"min_distance {rules.min_distance:g}" if rules.min_distance > 0 else "",
                                          rules.support.describe() if rules.support else "") if x)
            raise UserError(f"placement: {what(int(spent[0]))} still breaks {rule} after {rules.retries + 1} "
                            "draws; lower min_distance, widen the support or raise placement retries")
        drawn = _draw(draw, attempts[need], need, n)
        attempts[need] += 1
        rows = _put(rows, need, drawn, n)
        need = need[~latents_ok(rules, scene, drawn.latents, drawn.classes)]
    assert rows is not None
    return rows


def sample_placed(scm: SCM, scene: Scene, rules: PlacementRules, n: int, seed: int, start: int = 0) -> Samples:
    """Rows ``start .. start+n-1`` of ``scm`` that keep the latent rules (min_distance, support), drawn as a render
    draws its anchors (draw r of row i: row i sampled with ``placement_seed(seed, r)``), so they are the rows
    ``ident3d render --n`` would store, but for rows it redraws after rendering (``min_visible``). For ``ident3d sample
    --scene``: rows that ``render --latents`` takes on that scene. Drawn in blocks of ``PLACED_BLOCK`` rows (a row
    depends only on its index), so a redraw holds a block, not all n rows, twice."""
    out: Samples | None = None
    for first in range(0, n, PLACED_BLOCK):
        size = min(PLACED_BLOCK, n - first)
        out = _put(out, np.arange(first, first + size), _placed_block(scm, scene, rules, size, seed, start + first), n)
    assert out is not None
    return out


def _placed_block(scm: SCM, scene: Scene, rules: PlacementRules, n: int, seed: int, start: int) -> Samples:
    """:func:`sample_placed` for one block of rows ``start .. start+n-1``."""
    def draw(attempt: int, pos: np.ndarray) -> Samples:
        """Draw ``attempt`` of rows ``pos`` of the block (their global ids kept)."""
        return take(scm.sample(n, seed=placement_seed(seed, attempt), start=start), pos)

    return redraw_rows(np.arange(n), np.zeros(n, np.int64), None, draw, rules, scene, lambda i: f"row {start + i}")


def place_rows(n: int, draw: Draw, render: Render, rules: PlacementRules, scene: Scene, pixels: int,
               what: Callable[[int], str]) -> tuple[Samples, ChunkData, np.ndarray]:
    """Draw, check and render ``n`` rows until every row keeps the rules: rows breaking a latent rule are redrawn
    before rendering, rendered rows with an object under ``min_visible`` (of ``pixels``) are redrawn and rendered again.
    Returns the rows, their rendered data and each row's draws (1: accepted at once). A row still breaking a rule after
    ``retries + 1`` draws is a one-line UserError naming it (``what(position)``), the rule and what to change."""
    attempts = np.zeros(n, np.int64)
    rows: Samples | None = None
    data: ChunkData | None = None
    pending = np.arange(n)
    while pending.size:
        rows = redraw_rows(pending, attempts, rows, draw, rules, scene, what)
        part = render(take(rows, pending), pending)
        data = _put_data(data, pending, part, n)
        if rules.min_visible <= 0 or part.visibility is None:
            break
        pending = pending[~visible_ok(part.visibility, part.present, rules.min_visible, pixels)]
        spent = pending[attempts[pending] > rules.retries]
        if spent.size:
            raise UserError(f"placement: {what(int(spent[0]))} still has an object under min_visible "
                            f"{rules.min_visible:g} ({pixels_needed(rules.min_visible, pixels)} px) after "
                            f"{rules.retries + 1} draws; lower min_visible, render more pixels or raise placement "
                            "retries")
    assert rows is not None and data is not None
    return rows, data, attempts


# ----- what rejection did ----------------------------------------------------------------------------------------
def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r of two columns; NaN with fewer than 2 rows or a constant column."""
    if len(a) < 2 or np.std(a) == 0 or np.std(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def _pattern(names: Sequence[str]) -> str:
    """The name every object shares for one latent ('pos_x' of obj0_pos_x, obj1_pos_x, ...): their common suffix."""
    if len(names) < 2:
        return names[0]
    suffix = names[0]
    for name in names[1:]:
        while not name.endswith(suffix):
            suffix = suffix[1:]
    return suffix.lstrip("0123456789_") or names[0]


def placement_summary(latents: np.ndarray, present: np.ndarray, attempts: np.ndarray, names: Sequence[str],
                      objects: Sequence[Sequence[str]]) -> dict[str, Any]:
    """What rejection did to a store's rows: ``rejection_rate`` (1 - rows / draws), ``mean_attempts`` (draws per row),
    ``object_counts`` (share of rows with each number of present objects: crowded rows are rejected more often) and, per
    latent of the objects (``objects``: each slot's latent names in template order, e.g.
    ``Samples.objects``), the Pearson correlation between object 0's and object 1's values over rows where both are
    present (``obj0_obj1``) and the largest |r| over every pair of objects (``max_abs``, its ``pair`` and the rows
    where both are present, ``pair_rows``: a pair seen in few rows has a noisy r): how far the rules made independent
    objects depend on each other. NaN where fewer than 2 rows or a constant column."""
    attempts = np.asarray(attempts, np.int64)
    rows, draws = len(attempts), int(attempts.sum())
    latents, present = np.asarray(latents, np.float64), np.asarray(present, bool)
    col = {name: j for j, name in enumerate(names)}
    counts = present.sum(axis=1)
    out: dict[str, Any] = {"rows": rows, "draws": draws, "rejection_rate": 1.0 - rows / draws if draws else 0.0,
                           "mean_attempts": draws / rows if rows else float("nan"),
                           "object_counts": {int(c): float((counts == c).mean()) for c in np.unique(counts)},
                           "correlation": {}}
    k = len(objects)
    for j in range(len(objects[0]) if k else 0):
        values = latents[:, [col[obj[j]] for obj in objects]]
        r, both = {}, {}
        for a in range(k):
            for b in range(a + 1, k):
                rows_ab = present[:, a] & present[:, b]
                r[(a, b)], both[(a, b)] = _pearson(values[rows_ab, a], values[rows_ab, b]), int(rows_ab.sum())
        finite = {p: abs(v) for p, v in r.items() if math.isfinite(v)}
        best = max(finite, key=finite.get) if finite else None
        out["correlation"][_pattern([obj[j] for obj in objects])] = {
            "obj0_obj1": r.get((0, 1), float("nan")), "max_abs": finite[best] if best else float("nan"),
            "pair": list(best) if best else None, "pair_rows": both[best] if best else 0}
    return out
