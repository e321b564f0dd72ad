"""Captions for rendered images: sentences that state some of a causal model's latents in words.

Why: multimodal identifiability (Daunhawer et al., ICLR 2023, Multimodal3DIdent) pairs each image with a caption;
which latents the caption states (selection, Cai et al. 2025) and how often it states them wrongly (perturbation)
decide what a contrastive image/text model can recover. This module words latent rows as captions for *any* SCM,
with pure numpy (no Blender): a caption spec (YAML or a mapping) says how each latent becomes a word, in which
sentence forms, and which placeholders are stated or perturbed; ``write_captions`` words a batch of rows.

The spec (``render/texts/<name>.yaml`` for built-ins, see ``BUILTIN_CAPTIONS``)::

    name: my_captions
    states:                                   # ordered; the key is the placeholder used in the templates
      shape: {latent: class, words: [teapot, hare, ...]}       # discrete latent: one word per category
      x: {latent: pos_x, bins: [-.inf, -0.33, 0.33, .inf], words: [left, center, right]}
      y: {latent: pos_y, bins: 3, words: [bottom, middle, top]}
      colour: {latent: obj_hue, colour: [tableau, css4, xkcd]}
    templates: ['A "{colour}" {shape} at the {y}-{x}.']     # str.format forms; {{ and }} for literal braces
    select: [shape, x]                        # optional: only templates stating exactly these placeholders
    perturb: {colour: 0.5}                    # optional: probability that the stated value is resampled

How a latent becomes a word:

- A discrete latent (``LatentInfo.categories``; its column holds the category index) takes ``words``, one per
  category (omitted: the category names).
- A continuous latent takes ``bins`` and ``words``: either n+1 increasing edges for n words, which must cover the
  latent's declared range, or a count n of equal-width bins over the declared range. An unbounded latent (a ``None``
  bound) cannot take a count: give edges with infinite ends, ``[-.inf, 0, .inf]`` (YAML ``.inf``; ``"inf"`` strings
  are read too). A value on an edge goes to the upper bin (as ``numpy.digitize``); the top edge itself, and any
  value outside the edges, goes to the nearest end bin.
- A hue latent is marked by a ``colour:`` entry: one palette or a list of palettes (built-in ``tableau``, ``css4``,
  ``xkcd`` from ``matplotlib.colors``, named as matplotlib spells them, e.g. ``tab:blue``; or an inline mapping
  ``{name: "#rrggbb"}``, quoted, since YAML reads an unquoted ``#`` as a comment). The hue in turns is
  ``scale * value + offset`` (mod 1), from the scene's binding of the latent to a ``.hue`` target
  (``LatentInfo.hue``) or from the entry's own ``hue: {scale: .., offset: ..}``, which wins; a colour entry on a
  latent with neither is an error. Per caption one palette of the list is drawn uniformly, and the colour is named
  by the palette entry nearest (Euclidean, RGB in [0, 1]^3) to hsv(hue, 1, 1). Ties: entries of one palette with
  the same RGB keep the *last* name listed (as the published generator's dict keyed by RGB: CSS4's "aqua" and
  "cyan" share #00ffff and "cyan" is named); among equidistant distinct colours the first in the palette's order
  wins. The colour's number is its rank among the sorted, de-duplicated names of all the entry's palettes (the
  published ``object_color_index``).

Text latents (``Captions.latents``, columns ``CaptionSpec.text_latent_names``), in this order: for each stated
placeholder p (in the order of ``states``) ``p``, the stated value as a number (category, bin or colour index; NaN in
rows whose template does not state p, which only happens without ``select`` when templates state different sets),
and for a colour entry ``p_palette`` (the drawn palette's index in the entry's list); then ``template`` (the row's
template index among all templates in the spec's order); then for each perturbed placeholder ``p_perturbed`` (1.0
where the value was resampled: a category or bin index drawn uniformly, or for a colour a hue drawn uniformly in
[0, 1) turns and named as above, independent of the row's latents). The stated placeholders are those of
``select``, else those of any template.

Randomness is counter-based: every draw is ``uniforms(stream_key(seed, "caption", purpose...), rows)`` for the
rows' global indices (purposes: "template"; "palette", p; "perturb", p; "perturb_value", p), so any split of the
rows into calls gives the same captions.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ident3d.causal.errors import UserError
from ident3d.causal.rng import stream_key, uniforms
from ident3d.causal.yamlnum import load_yaml

TEXTS_DIR = Path(__file__).with_name("texts")
BUILTIN_CAPTIONS: tuple[str, ...] = tuple(sorted(p.stem for p in TEXTS_DIR.glob("*.yaml")))
BUILTIN_PALETTES = {"tableau": "TABLEAU_COLORS", "css4": "CSS4_COLORS", "xkcd": "XKCD_COLORS"}
SPEC_KEYS = ("name", "perturb", "select", "states", "templates")
STATE_KEYS = ("bins", "colour", "hue", "latent", "words")
HUE_KEYS = ("offset", "scale")
_HEX = re.compile(r"^#[0-9a-fA-F]{6}$")
_INF_TEXT = {"inf": math.inf, "+inf": math.inf, ".inf": math.inf, "+.inf": math.inf, "-inf": -math.inf,
             "-.inf": -math.inf}
_BLOCK = 1 << 18  # rows x palette entries per block of the nearest-colour search (memory bound)
# colorsys.hsv_to_rgb's six sectors as (r, g, b) picks from the columns (v, q, p, t)
_SECTORS = np.array([[0, 3, 2], [1, 0, 2], [2, 0, 3], [2, 1, 0], [3, 2, 0], [0, 2, 1]])


class CaptionSpecError(UserError):
    """A caption spec is invalid: one line naming the spec, the key path, what is wrong and what to do."""


@dataclass(frozen=True)
class LatentInfo:
    """What the caller knows about one latent of the SCM: its declared range, categories and hue mapping."""

    name: str
    low: float | None
    high: float | None
    categories: tuple[str, ...] | None = None
    hue: tuple[float, float] | None = None  # (scale, offset): hue in turns = scale * value + offset (mod 1)


@dataclass(frozen=True)
class Palette:
    """One colour palette: a built-in's name (colours read from matplotlib) or inline (name, '#rrggbb') pairs."""

    builtin: str | None = None
    inline: tuple[tuple[str, str], ...] = ()

    def colours(self) -> tuple[tuple[str, str], ...]:
        """The (name, hex) entries in the palette's order."""
        return _builtin_colours(self.builtin) if self.builtin else self.inline

    def to_json(self) -> str | dict[str, str]:
        """The palette as written in a spec: the built-in's name or the inline mapping."""
        return self.builtin if self.builtin else dict(self.inline)


@dataclass(frozen=True)
class State:
    """One placeholder: how its latent becomes a word ('words': discrete, 'bins': binned, 'colour': hue name)."""

    placeholder: str
    latent: str
    kind: str
    words: tuple[str, ...] = ()
    edges: tuple[float, ...] | None = None
    palettes: tuple[Palette, ...] = ()
    hue: tuple[float, float] | None = None

    def colour_names(self) -> tuple[str, ...]:
        """Sorted, de-duplicated names of all palettes of a colour entry (a name's rank is its colour index)."""
        return tuple(sorted({name for p in self.palettes for name, _ in p.colours()}))

    def to_dict(self) -> dict[str, Any]:
        """The resolved entry as a spec mapping (edges with infinite ends as the strings '-inf'/'inf')."""
        out: dict[str, Any] = {"latent": self.latent}
        if self.kind == "colour":
            assert self.hue is not None
            out["colour"] = [p.to_json() for p in self.palettes]
            out["hue"] = {"scale": self.hue[0], "offset": self.hue[1]}
            return out
        if self.edges is not None:
            out["bins"] = [e if math.isfinite(e) else ("inf" if e > 0 else "-inf") for e in self.edges]
        out["words"] = list(self.words)
        return out


@dataclass(frozen=True)
class CaptionSpec:
    """A validated caption spec (see the module docstring); equal specs give equal ``to_dict()``."""

    name: str
    states: tuple[State, ...]
    templates: tuple[str, ...]
    select: tuple[str, ...] | None = None
    perturb: tuple[tuple[str, float], ...] = ()  # (placeholder, probability), in the order of states

    @property
    def template_placeholders(self) -> tuple[frozenset[str], ...]:
        """The placeholders each template states, in the templates' order."""
        return tuple(frozenset(_placeholders(t)) for t in self.templates)

    @property
    def used_templates(self) -> tuple[int, ...]:
        """Indices of the templates drawn from: those stating exactly ``select``, or all."""
        sets = self.template_placeholders
        return tuple(i for i, s in enumerate(sets) if self.select is None or s == frozenset(self.select))

    @property
    def stated(self) -> tuple[State, ...]:
        """The stated placeholders' states, in the order of ``states``."""
        names = set(self.select) if self.select is not None else set().union(*self.template_placeholders)
        return tuple(s for s in self.states if s.placeholder in names)

    @property
    def text_latent_names(self) -> tuple[str, ...]:
        """Names of the columns of ``Captions.latents``."""
        return _text_latent_names(self.stated, self.perturb)

    def to_dict(self) -> dict[str, Any]:
        """The resolved spec as a JSON-able mapping (``load_caption_spec`` reads it back to an equal spec)."""
        return {"name": self.name, "states": {s.placeholder: s.to_dict() for s in self.states},
                "templates": list(self.templates), "select": None if self.select is None else list(self.select),
                "perturb": dict(self.perturb)}


@dataclass(frozen=True)
class Captions:
    """A batch of captions and their text latents."""

    text: np.ndarray  # (N,) object, Python str
    latents: np.ndarray  # (N, T) float64, columns = CaptionSpec.text_latent_names


# ---------------------------------------------------------------------------------------------------- palettes


@cache
def _builtin_colours(name: str) -> tuple[tuple[str, str], ...]:
    """A built-in palette's (name, hex) entries from ``matplotlib.colors``, in matplotlib's order."""
    import matplotlib.colors as mcolors

    return tuple(getattr(mcolors, BUILTIN_PALETTES[name]).items())


def hex_rgb(hex_colour: str) -> tuple[float, float, float]:
    """'#rrggbb' -> (r, g, b) in [0, 1] (as ``matplotlib.colors.to_rgb``)."""
    return tuple(int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))  # type: ignore[return-value]


@lru_cache(maxsize=64)
def _palette_table(palette: Palette) -> tuple[np.ndarray, tuple[str, ...]]:
    """The palette's distinct RGB values (P, 3), in first-listed order, each with the last name listed for it."""
    by_rgb: dict[tuple[float, float, float], str] = {}
    for name, hex_colour in palette.colours():
        by_rgb[hex_rgb(hex_colour)] = name
    return np.array(list(by_rgb), dtype=np.float64).reshape(-1, 3), tuple(by_rgb.values())


def hue_rgb(hue: np.ndarray) -> np.ndarray:
    """hsv(hue, 1, 1) -> RGB (N, 3), vectorised ``colorsys.hsv_to_rgb`` (hue in turns, taken mod 1)."""
    h6 = np.mod(np.asarray(hue, dtype=np.float64), 1.0) * 6.0
    sector = np.floor(h6)
    f = h6 - sector
    one = np.ones_like(f)
    columns = np.stack([one, one - f, np.zeros_like(f), one - (one - f)], axis=1)  # v, q, p, t as colorsys
    return np.take_along_axis(columns, _SECTORS[sector.astype(np.int64) % 6], axis=1)


def nearest_colour(rgb: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Index of the nearest row of ``table`` (P, 3) for each row of ``rgb`` (N, 3); the first on ties."""
    out = np.empty(len(rgb), dtype=np.int64)
    step = max(1, _BLOCK // max(1, len(table)))
    for start in range(0, len(rgb), step):
        d = rgb[start:start + step, None, :] - table[None, :, :]
        dist = d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] + d[..., 2] * d[..., 2]
        out[start:start + step] = np.argmin(dist, axis=1)
    return out


# ---------------------------------------------------------------------------------------------------- loading


def _fail(where: str, path: str, message: str) -> CaptionSpecError:
    """The one-line error for a problem at a key path."""
    return CaptionSpecError(f"{where}: {path}: {message}" if path else f"{where}: {message}")


def _show(x: float) -> str:
    """A number for a message ('-inf', '0.33', '1')."""
    return f"{x:g}"


def _check_keys(raw: Mapping[str, Any], allowed: Sequence[str], where: str, path: str) -> None:
    """Only ``allowed`` keys in a mapping, else an error listing the unknown and the allowed ones."""
    extra = [str(k) for k in raw if k not in allowed]
    if extra:
        raise _fail(where, path, f"unknown key(s) {', '.join(extra)}; allowed: {', '.join(allowed)}")


def _number(raw: Any, where: str, path: str, what: str = "a number") -> float:
    """A real number (not a bool); '-inf'/'inf' strings are read as infinities."""
    if isinstance(raw, str) and raw.strip().lower() in _INF_TEXT:
        return _INF_TEXT[raw.strip().lower()]
    if isinstance(raw, bool) or not isinstance(raw, int | float) or math.isnan(raw):
        raise _fail(where, path, f"{raw!r} is not {what}; write a number")
    return float(raw)


def _placeholders(template: str) -> list[str]:
    """The field names of a format string, in order (raises ValueError on a malformed one)."""
    return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]


def _words(raw: Any, where: str, path: str, count: int | None, per: str) -> tuple[str, ...]:
    """A non-empty list of words (strings; numbers are written as text), ``count`` of them unless None."""
    if not isinstance(raw, list):
        raise _fail(where, path, f"must be a list of words, one per {per}, got {raw!r}")
    if not raw:
        raise _fail(where, path, f"is empty; give one word per {per}")
    for i, w in enumerate(raw):
        if isinstance(w, bool) or not isinstance(w, str | int | float):
            raise _fail(where, f"{path}[{i}]", f"{w!r} is not a word; quote it (YAML reads yes/no/on/off/null "
                        "as non-text)")
    if count is not None and len(raw) != count:
        plural = "categories" if per == "category" else f"{per}s"
        raise _fail(where, path, f"has {len(raw)} words but there are {count} {plural}; give one word per {per}")
    return tuple(str(w) for w in raw)


def _edges(raw: Any, info: LatentInfo, n_words: int, where: str, path: str) -> tuple[float, ...]:
    """Bin edges from a count (equal width over the declared range) or a list of increasing, covering edges."""
    low = -math.inf if info.low is None else float(info.low)
    high = math.inf if info.high is None else float(info.high)
    span = f"[{_show(low)}, {_show(high)}]"
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise _fail(where, path, f"a count of bins must be at least 1, got {raw}")
        if not (math.isfinite(low) and math.isfinite(high)):
            raise _fail(where, path, f"a count of bins needs a bounded latent, but {info.name!r} has range {span}; "
                        "give edges with .inf ends, e.g. [-.inf, 0, .inf]")
        edges = tuple(float(e) for e in np.linspace(low, high, raw + 1))
    elif isinstance(raw, list):
        edges = tuple(_number(e, where, f"{path}[{i}]", "a bin edge") for i, e in enumerate(raw))
        if len(edges) < 2:
            raise _fail(where, path, f"needs at least 2 edges (n+1 edges for n words), got {len(edges)}")
        if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
            raise _fail(where, path, f"edges {_show_list(edges)} must increase strictly")
        if edges[0] > low or edges[-1] < high:
            raise _fail(where, path, f"edges {_show_list(edges)} do not cover the declared range {span} of "
                        f"{info.name!r}; make the first edge <= the low end and the last >= the high end (.inf for "
                        "an open side)")
    else:
        raise _fail(where, path, f"must be a count of bins or a list of edges, got {raw!r}")
    if len(edges) - 1 != n_words:
        raise _fail(where, path.rsplit(".", 1)[0] + ".words", f"has {n_words} words but there are "
                    f"{len(edges) - 1} bins; give one word per bin")
    return edges


def _show_list(xs: Sequence[float]) -> str:
    """Numbers as a short list for a message."""
    return "[" + ", ".join(_show(x) for x in xs) + "]"


def _palette(raw: Any, where: str, path: str) -> Palette:
    """A built-in palette's name or an inline {name: '#rrggbb'} mapping."""
    if isinstance(raw, str):
        if raw not in BUILTIN_PALETTES:
            raise _fail(where, path, f"unknown palette {raw!r}; built-ins: {', '.join(BUILTIN_PALETTES)}, or an "
                        "inline mapping {name: '#rrggbb'}")
        return Palette(builtin=raw)
    if isinstance(raw, Mapping):
        if not raw:
            raise _fail(where, path, "an inline palette is empty; give {name: '#rrggbb', ...}")
        for name, hex_colour in raw.items():
            if not isinstance(hex_colour, str) or not _HEX.match(hex_colour):
                raise _fail(where, f"{path}.{name}", f"{hex_colour!r} is not a hex colour '#rrggbb'; write it "
                            "quoted, e.g. '#ff8800' (YAML reads an unquoted # as a comment)")
        return Palette(inline=tuple((str(k), v.lower()) for k, v in raw.items()))
    raise _fail(where, path, f"must be a palette name ({', '.join(BUILTIN_PALETTES)}) or a mapping "
                f"{{name: '#rrggbb'}}, got {raw!r}")


def _hue(raw: Any, info: LatentInfo, where: str, path: str) -> tuple[float, float]:
    """The hue mapping (scale, offset): the entry's ``hue`` (defaults scale 1, offset 0) or the latent's."""
    if raw is None:
        if info.hue is None:
            raise _fail(where, path, f"a colour entry needs a hue mapping, but latent {info.name!r} drives no "
                        "'.hue' target in the scene; bind it to one or give hue: {scale: 1, offset: 0}")
        return (float(info.hue[0]), float(info.hue[1]))
    if not isinstance(raw, Mapping):
        raise _fail(where, f"{path}.hue", f"must be a mapping {{scale: .., offset: ..}}, got {raw!r}")
    _check_keys(raw, HUE_KEYS, where, f"{path}.hue")
    scale, offset = (_number(raw.get(k, d), where, f"{path}.hue.{k}") for k, d in (("scale", 1.0), ("offset", 0.0)))
    if not (math.isfinite(scale) and math.isfinite(offset)):
        raise _fail(where, f"{path}.hue", "scale and offset must be finite")
    return (scale, offset)


def _state(placeholder: str, raw: Any, latents: Mapping[str, LatentInfo], where: str) -> State:
    """One validated ``states`` entry."""
    path = f"states.{placeholder}"
    if not placeholder.isidentifier():
        raise _fail(where, path, "a placeholder name must be an identifier (letters, digits, _), e.g. 'colour'")
    if not isinstance(raw, Mapping):
        raise _fail(where, path, f"must be a mapping with 'latent' and words/bins/colour, got {raw!r}")
    _check_keys(raw, STATE_KEYS, where, path)
    name = raw.get("latent")
    if not isinstance(name, str) or name not in latents:
        raise _fail(where, f"{path}.latent", f"{name!r} is not a latent of the SCM; known: {', '.join(latents)}")
    info = latents[name]
    if "colour" in raw:
        extra = [k for k in ("words", "bins") if k in raw]
        if extra:
            raise _fail(where, path, f"a colour entry names colours itself; drop {', '.join(extra)}")
        listed = raw["colour"] if isinstance(raw["colour"], list) else [raw["colour"]]
        if not listed:
            raise _fail(where, f"{path}.colour", "is empty; give palettes, e.g. [tableau, css4, xkcd]")
        palettes = tuple(_palette(p, where, f"{path}.colour[{i}]") for i, p in enumerate(listed))
        return State(placeholder, name, "colour", palettes=palettes, hue=_hue(raw.get("hue"), info, where, path))
    if "hue" in raw:
        raise _fail(where, f"{path}.hue", "applies only to a colour entry; add colour: [...] or drop hue")
    if info.categories is not None:
        k = len(info.categories)
        if "bins" in raw:
            raise _fail(where, f"{path}.bins", f"{name!r} is discrete ({k} categories); drop bins and give words, "
                        "one per category")
        words = _words(raw["words"], where, f"{path}.words", k, "category") if "words" in raw else info.categories
        return State(placeholder, name, "words", words=tuple(words))
    if "bins" not in raw or "words" not in raw:
        raise _fail(where, path, f"{name!r} is continuous: give bins (edges or a count) and words, or colour")
    words = _words(raw["words"], where, f"{path}.words", None, "bin")
    return State(placeholder, name, "bins", words=words, edges=_edges(raw["bins"], info, len(words), where,
                                                                        f"{path}.bins"))


def _templates(raw: Any, states: Sequence[str], where: str) -> tuple[str, ...]:
    """The validated sentence forms: non-empty strings whose placeholders are all declared under states."""
    if not isinstance(raw, list) or not raw:
        raise _fail(where, "templates", "must be a non-empty list of sentence forms with {placeholder}s, e.g. "
                    f"'A {{{states[0] if states else 'shape'}}}.'")
    declared = ", ".join(states)
    for i, t in enumerate(raw):
        path = f"templates[{i}]"
        if not isinstance(t, str):
            raise _fail(where, path, f"must be a string, got {t!r}")
        try:
            fields = _placeholders(t)
        except ValueError as exc:
            raise _fail(where, path, f"is not a valid template ({exc}); write {{{{ and }}}} for literal braces") \
                from None
        if not fields:
            raise _fail(where, path, f"states nothing; add a {{placeholder}} from states ({declared})")
        for f in fields:
            if f not in states:
                shown = f"{{{f}}}" if f else "'{}'"
                raise _fail(where, path, f"placeholder {shown} is not declared under states; declared: {declared}")
        try:
            t.format(**{s: "w" for s in states})
        except (KeyError, ValueError, IndexError, AttributeError, TypeError) as exc:
            raise _fail(where, path, f"cannot be filled in ({type(exc).__name__}: {exc}); use plain "
                        "{placeholder}s") from None
    return tuple(raw)


def _select(raw: Any, states: Sequence[str], templates: Sequence[str], where: str) -> tuple[str, ...] | None:
    """The selected placeholders (declared, with at least one template stating exactly them), or None."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise _fail(where, "select", f"must be a non-empty list of placeholders from states ({', '.join(states)})")
    for i, p in enumerate(raw):
        if p not in states:
            raise _fail(where, f"select[{i}]", f"{p!r} is not declared under states; declared: {', '.join(states)}")
    chosen = frozenset(raw)
    if not any(frozenset(_placeholders(t)) == chosen for t in templates):
        raise _fail(where, "select", f"no template states exactly {{{', '.join(sorted(chosen))}}}; add such a "
                    "template or change select")
    return tuple(s for s in states if s in chosen)


def _perturb(raw: Any, states: Sequence[str], stated: set[str], where: str) -> tuple[tuple[str, float], ...]:
    """The perturbation probabilities of stated placeholders, in the order of states."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise _fail(where, "perturb", f"must be a mapping {{placeholder: probability}}, got {raw!r}")
    probs: dict[str, float] = {}
    for p, prob in raw.items():
        path = f"perturb.{p}"
        if p not in states:
            raise _fail(where, path, f"{p!r} is not declared under states; declared: {', '.join(states)}")
        if p not in stated:
            raise _fail(where, path, f"{p!r} is never stated (not selected / in no template); drop it from perturb "
                        "or state it")
        value = _number(prob, where, path, "a probability")
        if not 0.0 <= value <= 1.0:
            raise _fail(where, path, f"probability {_show(value)} is outside [0, 1]")
        probs[p] = value
    return tuple((s, probs[s]) for s in states if s in probs)


def _text_latent_names(stated: Sequence[State], perturb: Sequence[tuple[str, float]]) -> tuple[str, ...]:
    """The text latents' column names (see the module docstring)."""
    names: list[str] = []
    for s in stated:
        names += [s.placeholder] + ([f"{s.placeholder}_palette"] if s.kind == "colour" else [])
    return (*names, "template", *(f"{p}_perturbed" for p, _ in perturb))


def spec_from_dict(raw: Any, latents: Sequence[LatentInfo], where: str, default_name: str) -> CaptionSpec:
    """Validate a caption spec mapping against the SCM's latents."""
    if not isinstance(raw, Mapping):
        raise _fail(where, "", f"a caption spec must be a mapping with states and templates, got "
                    f"{type(raw).__name__}")
    _check_keys(raw, SPEC_KEYS, where, "")
    by_name = {info.name: info for info in latents}
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise _fail(where, "name", f"must be a non-empty string, got {name!r}")
    raw_states = raw.get("states")
    if not isinstance(raw_states, Mapping) or not raw_states:
        raise _fail(where, "states", "must be a non-empty mapping {placeholder: {latent: .., words/bins/colour}}")
    states = tuple(_state(str(p), entry, by_name, where) for p, entry in raw_states.items())
    declared = [s.placeholder for s in states]
    templates = _templates(raw.get("templates"), declared, where)
    select = _select(raw.get("select"), declared, templates, where)
    spec = CaptionSpec(name, states, templates, select)
    perturb = _perturb(raw.get("perturb"), declared, {s.placeholder for s in spec.stated}, where)
    spec = CaptionSpec(name, states, templates, select, perturb)
    columns = spec.text_latent_names
    clash = sorted({c for c in columns if columns.count(c) > 1})
    if clash:
        raise _fail(where, f"states.{clash[0]}", f"the text latent name {clash[0]!r} is taken twice (placeholders "
                    "name columns, as do <p>_palette, template and <p>_perturbed); rename the placeholder")
    return spec


def load_caption_spec(source: str | Path | Mapping[str, Any], latents: Sequence[LatentInfo],
                      where: str = "caption spec") -> CaptionSpec:
    """A caption spec from a YAML file, a built-in name (``BUILTIN_CAPTIONS``) or a mapping, validated."""
    if isinstance(source, Mapping):
        return spec_from_dict(source, latents, where, "captions")
    path = TEXTS_DIR / f"{source}.yaml" if str(source) in BUILTIN_CAPTIONS else Path(source)
    if not path.is_file():
        raise CaptionSpecError(f"{where}: no caption spec {str(source)!r}: not a built-in "
                               f"({', '.join(BUILTIN_CAPTIONS) or 'none'}) nor a YAML file")
    try:
        raw = load_yaml(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise CaptionSpecError(f"{path}: cannot read the caption spec ({exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise CaptionSpecError(f"{path}: not valid YAML{at} ({getattr(exc, 'problem', None) or exc}); fix the "
                               "file") from None
    return spec_from_dict(raw, latents, str(path), path.stem)


# ---------------------------------------------------------------------------------------------------- writing


def _draw(seed: int, rows: np.ndarray, *purpose: str) -> np.ndarray:
    """Uniforms in (0, 1) for the rows, from the caption stream of ``purpose``."""
    return uniforms(stream_key(seed, "caption", *purpose), rows)


def _choice(u: np.ndarray, n: int) -> np.ndarray:
    """Uniforms in (0, 1) -> indices 0..n-1, uniformly."""
    return np.minimum((u * n).astype(np.int64), n - 1)


def _bin_index(values: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Bin of each value: a value on an edge goes to the upper bin; the ends (and beyond) to the end bins."""
    inner = np.asarray(edges[1:-1], dtype=np.float64)
    return np.searchsorted(inner, values, side="right").astype(np.int64)


def _category_index(values: np.ndarray, state: State) -> np.ndarray:
    """A discrete latent's column as category indices (checked against the number of words)."""
    finite = np.isfinite(values)
    idx = np.where(finite, np.rint(np.where(finite, values, 0.0)), -1).astype(np.int64)
    bad = (idx < 0) | (idx >= len(state.words)) | (np.abs(values - idx) > 1e-6)
    if bad.any():
        raise ValueError(f"caption state {state.placeholder!r}: latent {state.latent!r} holds "
                         f"{values[bad][0]!r}, not a category index 0..{len(state.words) - 1}")
    return idx


def _colour_words(state: State, hue: np.ndarray, palette: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Colour names (object array) and colour indices for hues (turns), each row named from its drawn palette."""
    rank = {name: i for i, name in enumerate(state.colour_names())}
    rgb = hue_rgb(hue)
    words = np.empty(len(hue), dtype=object)
    index = np.empty(len(hue), dtype=np.float64)
    for k, p in enumerate(state.palettes):
        mine = palette == k
        if not mine.any():
            continue
        table, names = _palette_table(p)
        nearest = nearest_colour(rgb[mine], table)
        words[mine] = np.asarray(names, dtype=object)[nearest]
        index[mine] = np.array([rank[n] for n in names], dtype=np.float64)[nearest]
    return words, index


def _state_columns(state: State, column: np.ndarray, rows: np.ndarray, seed: int,
                   perturbed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One stated placeholder's words, value numbers and (colour) palette indices, perturbed where flagged."""
    resample = None if perturbed is None else _draw(seed, rows, "perturb_value", state.placeholder)
    if state.kind == "colour":
        assert state.hue is not None
        hue = state.hue[0] * column + state.hue[1]
        if resample is not None:
            hue = np.where(perturbed, resample, hue)
        palette = _choice(_draw(seed, rows, "palette", state.placeholder), len(state.palettes))
        words, index = _colour_words(state, hue, palette)
        return words, index, palette.astype(np.float64)
    idx = _bin_index(column, state.edges) if state.kind == "bins" else _category_index(column, state)
    if resample is not None:
        idx = np.where(perturbed, _choice(resample, len(state.words)), idx)
    return np.asarray(state.words, dtype=object)[idx], idx.astype(np.float64), None


def write_captions(spec: CaptionSpec, values: Mapping[str, np.ndarray], rows: np.ndarray, seed: int) -> Captions:
    """Word N latent rows: ``values`` maps latent names to (N,) columns, ``rows`` are the rows' global indices."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    n = len(rows)
    stated = spec.stated
    columns: dict[str, np.ndarray] = {}
    for s in stated:
        if s.latent not in values:
            raise ValueError(f"caption spec {spec.name!r} states latent {s.latent!r}, which values lacks")
        col = np.asarray(values[s.latent], dtype=np.float64).reshape(-1)
        if len(col) != n:
            raise ValueError(f"latent {s.latent!r} has {len(col)} values for {n} rows")
        columns[s.latent] = col
    used = np.asarray(spec.used_templates, dtype=np.int64)
    template = used[_choice(_draw(seed, rows, "template"), len(used))]
    flags = {p: _draw(seed, rows, "perturb", p) < q for p, q in spec.perturb}
    states_of = spec.template_placeholders
    words: dict[str, np.ndarray] = {}
    out: list[np.ndarray] = []
    for s in stated:
        w, value, palette = _state_columns(s, columns[s.latent], rows, seed, flags.get(s.placeholder))
        words[s.placeholder] = w
        says = np.array([s.placeholder in states_of[t] for t in range(len(spec.templates))])[template]
        out.append(np.where(says, value, np.nan))
        if palette is not None:
            out.append(palette)
    out.append(template.astype(np.float64))
    out += [flags[p].astype(np.float64) for p, _ in spec.perturb]
    text = np.empty(n, dtype=object)
    for i in range(n):
        text[i] = spec.templates[template[i]].format(**{p: w[i] for p, w in words.items()})
    latents = np.stack(out, axis=1) if out else np.zeros((n, 0))
    return Captions(text=text, latents=latents)
