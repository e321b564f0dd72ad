"""Captions from latents (``ident3d.render.captions``): wording, colour naming against an independent per-row
implementation, split invariance, binning, selection, perturbation, validation and a negative control."""

from __future__ import annotations

import colorsys
import json
import math
import re

import matplotlib.colors as mcolors
import numpy as np
import pytest

from ident3d.render.captions import (
    BUILTIN_CAPTIONS,
    CaptionSpecError,
    LatentInfo,
    load_caption_spec,
    write_captions,
)

SHAPES = ["teapot", "hare", "dragon", "cow", "armadillo", "horse", "head"]
XS, YS = ["left", "center", "right"], ["top", "mid", "bottom"]
PALETTES = {"tableau": mcolors.TABLEAU_COLORS, "css4": mcolors.CSS4_COLORS, "xkcd": mcolors.XKCD_COLORS}
LATENTS = [
    LatentInfo("class", 0, 6, tuple(f"class{i}" for i in range(7))),
    LatentInfo("pos_x", 0, 2, ("a", "b", "c")),
    LatentInfo("pos_y", 0, 2, ("a", "b", "c")),
    LatentInfo("obj_hue", 0.0, 1.0, hue=(1.0, 0.0)),
    LatentInfo("z", -1.0, 1.0),
    LatentInfo("u", None, None),
    LatentInfo("plain", 0.0, 1.0),
]
QUOTED = re.compile(r'"([^"]*)"')


def sample(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Latent columns from a plain numpy generator (class 0..6, positions 0..2, hue U[0, 1])."""
    g = np.random.default_rng(seed)
    return {"class": g.integers(0, 7, n).astype(float), "pos_x": g.integers(0, 3, n).astype(float),
            "pos_y": g.integers(0, 3, n).astype(float), "obj_hue": g.random(n)}


def rgb_to_name(palette: dict[str, str]) -> dict[tuple[float, ...], str]:
    """A dict keyed by RGB, as the published generator builds it (same RGB: the last name listed wins)."""
    return {tuple(int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)): name for name, h in palette.items()}


def loop_name(hue: float, table: dict[tuple[float, ...], str]) -> str:
    """Independent per-row nearest colour name: Python min over the palette (the first on ties)."""
    rgb = colorsys.hsv_to_rgb(hue % 1.0, 1.0, 1.0)
    return table[min(table, key=lambda c: sum((a - b) ** 2 for a, b in zip(c, rgb, strict=True)))]


def colour_only(palettes: list, **extra: object) -> dict:
    """A spec stating only the colour of obj_hue."""
    return {"states": {"colour": {"latent": "obj_hue", "colour": palettes}},
            "templates": ['"{colour}"'], **extra}


def chance(palette: dict[str, str], grid: int = 1 << 14) -> float:
    """P(two independent uniform hues get the same name) = sum of squared name frequencies (fine hue grid)."""
    table = rgb_to_name(palette)
    rgb = np.array([colorsys.hsv_to_rgb((i + 0.5) / grid, 1.0, 1.0) for i in range(grid)])
    keys = np.array(list(table))
    nearest = np.argmin(((rgb[:, None, :] - keys[None]) ** 2).sum(-1), axis=1)
    freq = np.bincount(nearest, minlength=len(keys)) / grid
    return float((freq ** 2).sum())


@pytest.fixture(scope="module")
def builtin():
    """The built-in Multimodal3DIdent spec."""
    return load_caption_spec("multimodal3dident", LATENTS)


def test_builtin_captions_state_shape_position_and_nearest_colour(builtin):
    assert "multimodal3dident" in BUILTIN_CAPTIONS
    assert builtin.text_latent_names == ("shape", "x", "y", "colour", "colour_palette", "template")
    n = 300
    v = sample(n)
    caps = write_captions(builtin, v, np.arange(n), seed=7)
    assert caps.text.shape == (n,) and caps.text.dtype == object and caps.latents.shape == (n, 6)
    assert caps.latents.dtype == np.float64
    names = ["tableau", "css4", "xkcd"]
    tables = [rgb_to_name(PALETTES[k]) for k in names]
    union = sorted(set().union(*PALETTES.values()))
    for i, text in enumerate(caps.text):
        assert isinstance(text, str)
        shape, x, y = SHAPES[int(v["class"][i])], XS[int(v["pos_x"][i])], YS[int(v["pos_y"][i])]
        assert re.search(rf"\b{shape}\b", text) and f"{y}-{x}" in text, text
        (said,) = QUOTED.findall(text)
        pal = int(caps.latents[i, 4])
        assert said == loop_name(v["obj_hue"][i], tables[pal]), (i, names[pal], text)
        assert caps.latents[i, 3] == union.index(said)  # colour index: rank in the sorted union
        assert caps.latents[i, :3].tolist() == [v["class"][i], v["pos_x"][i], v["pos_y"][i]]
    assert set(caps.latents[:, 4]) == {0.0, 1.0, 2.0}  # all palettes drawn
    assert set(caps.latents[:, 5]) == {0.0, 1.0, 2.0, 3.0, 4.0}  # all five sentence forms


def test_cyan_is_named_cyan_not_aqua():
    # CSS4's aqua and cyan share #00ffff: a dict keyed by RGB keeps the last name listed, cyan
    assert list(mcolors.CSS4_COLORS).index("aqua") < list(mcolors.CSS4_COLORS).index("cyan")
    spec = load_caption_spec(colour_only(["css4"]), LATENTS)
    caps = write_captions(spec, {"obj_hue": np.array([0.5, 0.0, 1.0 / 3])}, np.arange(3), seed=0)
    assert caps.text.tolist() == ['"cyan"', '"red"', '"lime"']  # lime and red keep their only names


def test_inline_palette_ties_and_hue_override():
    # equidistant distinct colours: the first listed wins; same RGB: the last name listed; hue override wins
    pal = {"first": "#ff0000", "twin_a": "#00ff00", "twin_b": "#00FF00", "blue": "#0000ff"}
    spec = load_caption_spec({"states": {"c": {"latent": "plain", "colour": [pal], "hue": {"scale": 0.5}}},
                              "templates": ["{c}"]}, LATENTS)
    # plain=0 -> hue 0 red; plain=2/3 -> hue 1/3 green; hsv(1/6) = yellow (1, 1, 0): red and green tie -> first
    caps = write_captions(spec, {"plain": np.array([0.0, 2 / 3, 1 / 3])}, np.arange(3), seed=0)
    assert caps.text.tolist() == ["first", "twin_b", "first"]
    assert caps.latents[:, 0].tolist() == [1.0, 3.0, 1.0]  # rank among sorted (blue, first, twin_a, twin_b)


def test_split_invariance_and_seed():
    spec = load_caption_spec("multimodal3dident", LATENTS)
    v = sample(100, seed=3)
    whole = write_captions(spec, v, np.arange(100), seed=11)
    parts = [write_captions(spec, {k: c[a:b] for k, c in v.items()}, np.arange(a, b), seed=11)
             for a, b in [(0, 50), (50, 100)]]
    assert whole.text.tolist() == parts[0].text.tolist() + parts[1].text.tolist()
    np.testing.assert_array_equal(whole.latents, np.concatenate([p.latents for p in parts]))
    other = write_captions(spec, v, np.arange(100), seed=12)
    assert (other.latents[:, 5] != whole.latents[:, 5]).mean() > 0.5  # templates redrawn
    assert (other.latents[:, 4] != whole.latents[:, 4]).mean() > 0.4  # palettes redrawn
    np.testing.assert_array_equal(other.latents[:, :3], whole.latents[:, :3])  # the image's latents stay


def test_spec_round_trips_and_is_json():
    spec = load_caption_spec({
        "states": {"z": {"latent": "z", "bins": 4, "words": list("abcd")},
                   "u": {"latent": "u", "bins": ["-inf", 0, ".inf"], "words": ["neg", "pos"]},
                   "c": {"latent": "obj_hue", "colour": ["tableau", {"mine": "#123456"}]}},
        "templates": ["{z} {u} {c}"], "perturb": {"c": 0.25}}, LATENTS)
    d = spec.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert d["states"]["z"]["bins"] == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert d["states"]["u"]["bins"] == ["-inf", 0.0, "inf"]
    assert d["states"]["c"]["hue"] == {"scale": 1.0, "offset": 0.0}
    assert load_caption_spec(d, LATENTS) == spec
    assert spec.text_latent_names == ("z", "u", "c", "c_palette", "template", "c_perturbed")


def test_binning_edges_counts_and_unbounded():
    spec = load_caption_spec({
        "states": {"e": {"latent": "z", "bins": [-1, -0.33, 0.33, 1], "words": ["L", "C", "R"]},
                   "n": {"latent": "z", "bins": 4, "words": ["q0", "q1", "q2", "q3"]},
                   "u": {"latent": "u", "bins": [-math.inf, 0, math.inf], "words": ["neg", "pos"]}},
        "templates": ["{e}|{n}|{u}"]}, LATENTS)
    z = np.array([-1.0, -0.5, -0.33, 0.0, 0.33, 0.5, 1.0])
    u = np.array([-1e9, -1e-12, 0.0, 1e-12, 5.0, 1e300, -3.0])
    caps = write_captions(spec, {"z": z, "u": u}, np.arange(7), seed=0)
    # a value on an edge goes to the upper bin, as numpy.digitize; the top edge of the range to the last bin
    assert caps.latents[:, 0].tolist() == [0, 0, 1, 1, 2, 2, 2]
    assert caps.latents[:, 0].tolist() == np.digitize(z, [-0.33, 0.33]).tolist()
    assert caps.latents[:, 1].tolist() == [0, 1, 1, 2, 2, 3, 3]  # edges -1, -.5, 0, .5, 1
    assert caps.latents[:, 2].tolist() == [0, 0, 1, 1, 1, 1, 0]
    assert caps.text.tolist()[:3] == ["L|q0|neg", "L|q1|neg", "C|q1|pos"]


def test_select_states_only_the_selected():
    spec = load_caption_spec({
        "states": {"shape": {"latent": "class", "words": SHAPES}, "x": {"latent": "pos_x", "words": XS},
                   "y": {"latent": "pos_y", "words": YS}, "colour": {"latent": "obj_hue", "colour": "css4"}},
        "templates": ['{shape} "{colour}" {y}', "{shape} at {x}", "{x}: {shape}", "{shape} {x} {y}"],
        "select": ["x", "shape"]}, LATENTS)
    assert spec.text_latent_names == ("shape", "x", "template")
    caps = write_captions(spec, sample(200), np.arange(200), seed=5)
    assert set(caps.latents[:, 2]) == {1.0, 2.0}  # only the templates stating exactly {shape, x}
    for text in caps.text:
        assert '"' not in text and not any(re.search(rf"\b{y}\b", text) for y in YS), text


def matched_fraction(spec, v: dict[str, np.ndarray], true_hue: np.ndarray, seed: int = 1):
    """Fraction of captions whose colour name is the drawn palette's name for the true hue, and the captions."""
    caps = write_captions(spec, v, np.arange(len(true_hue)), seed=seed)
    tables = [rgb_to_name(PALETTES[k]) for k in ("tableau", "css4")]
    said = [QUOTED.findall(t)[0] for t in caps.text]
    truth = [loop_name(h, tables[int(p)]) for h, p in zip(true_hue, caps.latents[:, 1], strict=True)]
    return float(np.mean([a == b for a, b in zip(said, truth, strict=True)])), caps


N_PERTURB = 1500


@pytest.fixture(scope="module")
def chance_level() -> float:
    """Agreement of the names of two independent hues when a palette (tableau or css4) is drawn uniformly."""
    return 0.5 * chance(PALETTES["tableau"]) + 0.5 * chance(PALETTES["css4"])


def bound(p: float, n: int) -> float:
    """Four binomial standard deviations of a fraction."""
    return 4 * math.sqrt(p * (1 - p) / n)


def test_perturbation(chance_level):
    hue = np.random.default_rng(9).random(N_PERTURB)
    v = {"obj_hue": hue}
    base = load_caption_spec(colour_only(["tableau", "css4"]), LATENTS)
    full, caps1 = matched_fraction(load_caption_spec(colour_only(["tableau", "css4"], perturb={"colour": 1}),
                                                     LATENTS), v, hue)
    assert 0.02 < chance_level < 0.2
    assert abs(full - chance_level) < bound(chance_level, N_PERTURB), (full, chance_level)
    assert (caps1.latents[:, 3] == 1.0).all()
    plain, caps0 = matched_fraction(base, v, hue)
    assert plain == 1.0
    none, caps_p0 = matched_fraction(load_caption_spec(colour_only(["tableau", "css4"], perturb={"colour": 0.0}),
                                                       LATENTS), v, hue)
    assert none == 1.0 and (caps_p0.latents[:, 3] == 0.0).all()
    assert caps_p0.text.tolist() == caps0.text.tolist()
    np.testing.assert_array_equal(caps_p0.latents[:, :3], caps0.latents)
    half, caps_h = matched_fraction(load_caption_spec(colour_only(["tableau", "css4"], perturb={"colour": 0.5}),
                                                      LATENTS), v, hue)
    flagged = caps_h.latents[:, 3]
    assert abs(flagged.mean() - 0.5) < bound(0.5, N_PERTURB)
    kept = flagged == 0.0
    np.testing.assert_array_equal(caps_h.text[kept], caps0.text[kept])  # unflagged rows say the truth
    expected = 0.5 + 0.5 * chance_level
    assert abs(half - expected) < bound(expected, N_PERTURB) + bound(0.5, N_PERTURB)


def test_perturbed_discrete_is_uniform_and_independent():
    spec = load_caption_spec({"states": {"shape": {"latent": "class", "words": SHAPES}}, "templates": ["{shape}"],
                              "perturb": {"shape": 1.0}}, LATENTS)
    n = 2100
    cls = np.zeros(n)
    caps = write_captions(spec, {"class": cls}, np.arange(n), seed=2)
    counts = np.bincount(caps.latents[:, 0].astype(int), minlength=7)
    assert (np.abs(counts / n - 1 / 7) < bound(1 / 7, n)).all(), counts
    assert [SHAPES.index(t) for t in caps.text] == caps.latents[:, 0].astype(int).tolist()


def test_negative_control_shuffled_hues(chance_level):
    hue = np.random.default_rng(4).random(N_PERTURB)
    shuffled = np.random.default_rng(5).permutation(hue)
    spec = load_caption_spec(colour_only(["tableau", "css4"]), LATENTS)
    frac, _ = matched_fraction(spec, {"obj_hue": shuffled}, hue)
    assert abs(frac - chance_level) < bound(chance_level, N_PERTURB), (frac, chance_level)


def base_spec() -> dict:
    """A valid spec for the validation cases to break."""
    return {"name": "t",
            "states": {"shape": {"latent": "class", "words": list(SHAPES)},
                       "zz": {"latent": "z", "bins": [-1, 0, 1], "words": ["low", "high"]},
                       "colour": {"latent": "obj_hue", "colour": ["tableau"]}},
            "templates": ["{shape} {zz} {colour}", "{shape}"]}


def _set(d: dict, path: tuple, value: object) -> dict:
    """Set a nested key (a tuple path) of a copy of the base spec."""
    node = d
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return d


CASES = [
    (("states", "colour", "latent"), "obj_hu", "states.colour.latent: 'obj_hu' is not a latent of the SCM; known: class, pos_x"),
    (("states", "zz", "edges"), [0, 1], "states.zz: unknown key(s) edges; allowed: bins, colour, hue, latent, words"),
    (("wording",), 1, "unknown key(s) wording; allowed: name, perturb, select, states, templates"),
    (("states", "shape", "words"), [], "states.shape.words: is empty"),
    (("states", "shape", "words"), SHAPES[:6], "states.shape.words: has 6 words but there are 7 categories"),
    (("states", "zz", "words"), ["a", "b", "c"], "states.zz.words: has 3 words but there are 2 bins"),
    (("states", "zz", "bins"), [-1, 1, 0.5], "states.zz.bins: edges [-1, 1, 0.5] must increase strictly"),
    (("states", "zz", "bins"), [-0.5, 0, 1], "states.zz.bins: edges [-0.5, 0, 1] do not cover the declared range [-1, 1] of 'z'"),
    (("states", "zz"), {"latent": "u", "bins": 2, "words": ["a", "b"]}, "states.zz.bins: a count of bins needs a bounded latent, but 'u' has range [-inf, inf]; give edges with .inf ends"),
    (("states", "zz"), {"latent": "u", "bins": [-1, 0, 1], "words": ["a", "b"]}, "states.zz.bins: edges [-1, 0, 1] do not cover the declared range [-inf, inf] of 'u'"),
    (("templates",), ["{shape} {colr}"], "templates[0]: placeholder {colr} is not declared under states; declared: shape, zz, colour"),
    (("templates",), ["{shape}", "no placeholder"], "templates[1]: states nothing"),
    (("templates",), ["{shape"], "templates[0]: is not a valid template"),
    (("templates",), [], "templates: must be a non-empty list"),
    (("select",), ["shape", "size"], "select[1]: 'size' is not declared under states"),
    (("select",), ["zz"], "select: no template states exactly {zz}"),
    (("perturb",), {"sz": 0.5}, "perturb.sz: 'sz' is not declared under states"),
    (("perturb",), {"colour": 1.5}, "perturb.colour: probability 1.5 is outside [0, 1]"),
    (("perturb",), {"colour": True}, "perturb.colour: True is not a probability"),
    (("states", "colour", "colour"), ["tableau", "x11"], "states.colour.colour[1]: unknown palette 'x11'; built-ins: tableau, css4, xkcd"),
    (("states", "colour", "colour"), [{"mine": "#12345"}], "states.colour.colour[0].mine: '#12345' is not a hex colour"),
    (("states", "colour", "colour"), [{"mine": None}], "quoted"),
    (("states", "colour", "latent"), "plain", "states.colour: a colour entry needs a hue mapping, but latent 'plain'"),
    (("states", "shape", "bins"), 7, "states.shape.bins: 'class' is discrete (7 categories)"),
    (("states", "zz", "words"), ["on", True], "states.zz.words[1]: True is not a word; quote it"),
    (("states", "zz", "hue"), {"scale": 1}, "states.zz.hue: applies only to a colour entry"),
]


@pytest.mark.parametrize(("path", "value", "expected"), CASES, ids=[c[2][:40] for c in CASES])
def test_validation_errors_are_one_line_with_the_key_path(path, value, expected):
    with pytest.raises(CaptionSpecError) as err:
        load_caption_spec(_set(base_spec(), path, value), LATENTS, where="my.yaml")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("my.yaml: ")
    assert expected in message, message


def test_perturbing_an_unselected_placeholder_is_refused():
    spec = _set(base_spec(), ("select",), ["shape"])
    spec["perturb"] = {"colour": 0.5}
    with pytest.raises(CaptionSpecError, match=r"^my\.yaml: perturb\.colour: 'colour' is never stated"):
        load_caption_spec(spec, LATENTS, where="my.yaml")


def test_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "spec.yaml"
    bad.write_text("states:\n  colour: {latent: obj_hu, colour: css4}\ntemplates: ['{colour}']\n")
    with pytest.raises(CaptionSpecError) as err:
        load_caption_spec(bad, LATENTS)
    assert str(err.value) == (f"{bad}: states.colour.latent: 'obj_hu' is not a latent of the SCM; known: class, "
                              "pos_x, pos_y, obj_hue, z, u, plain")
    bad.write_text("states: [\n")
    with pytest.raises(CaptionSpecError, match=r"not valid YAML at line \d"):
        load_caption_spec(bad, LATENTS)
    with pytest.raises(CaptionSpecError, match="not a built-in \\(multimodal3dident\\) nor a YAML file"):
        load_caption_spec("nope", LATENTS)
    good = tmp_path / "ok.yaml"
    good.write_text("states:\n  u: {latent: u, bins: [-.inf, 0, .inf], words: [neg, pos]}\ntemplates: ['{u}']\n")
    spec = load_caption_spec(good, LATENTS)
    assert spec.name == "ok" and spec.states[0].edges == (-math.inf, 0.0, math.inf)


def test_without_select_unstated_rows_are_nan():
    # without select every template is drawn; a row whose template does not state p has NaN in column p
    spec = load_caption_spec({"states": {"shape": {"latent": "class", "words": SHAPES},
                                         "x": {"latent": "pos_x", "words": XS}},
                              "templates": ["{shape}", "{shape} {x}"]}, LATENTS)
    assert spec.text_latent_names == ("shape", "x", "template")
    v = sample(60)
    caps = write_captions(spec, v, np.arange(60), seed=1)
    one = caps.latents[:, 2] == 0.0
    assert 0 < one.sum() < 60
    assert np.isnan(caps.latents[one, 1]).all()
    np.testing.assert_array_equal(caps.latents[~one, 1], v["pos_x"][~one])
    np.testing.assert_array_equal(caps.latents[:, 0], v["class"])
    empty = write_captions(spec, {k: c[:0] for k, c in v.items()}, np.arange(0), seed=1)
    assert empty.text.shape == (0,) and empty.latents.shape == (0, 3)


@pytest.mark.parametrize("bad", [1.4, np.nan, 7.0, -1.0])
def test_discrete_column_must_hold_category_indices(bad):
    spec = load_caption_spec({"states": {"shape": {"latent": "class"}}, "templates": ["{shape}"]}, LATENTS)
    assert write_captions(spec, {"class": np.array([6.0])}, np.array([0]), seed=0).text.tolist() == ["class6"]
    with pytest.raises(ValueError, match="not a category index 0..6"):
        write_captions(spec, {"class": np.array([0.0, bad])}, np.arange(2), seed=0)
