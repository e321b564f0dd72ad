"""What a view maker means (issue 22): each view maker answers for the latents its views differ in (its style),
DA recipes are registered once with their stage, parameters and targets, and the views of every recipe stay
exactly what they were for the same generator."""

from __future__ import annotations

import pytest
import torch

from ident3d.causal import load_scm
from ident3d.causal.errors import UserError
from ident3d.evaluation.report import check_da_style, resolve_style
from ident3d.training.registry import VIEWS
from ident3d.training.views import Normalize, ViewMaker, choices, make_view_maker, to_float
from ident3d.training.views.augment import DA_RECIPES, Stage, register_recipe, unregister_recipe

IDENTITY = Normalize((0.0,) * 3, (1.0,) * 3)

# (spec, J) -> per view (sum, ramp-weighted sum) in float64 of the views for images seed 3 and generator seed 11,
# recorded before the recipes moved into one registry: the views must stay bit-identical
GOLDEN = {
    ("none", 2): [(12374.34142140299, -17.879569220635744), (12374.34142140299, -17.879569220635744)],
    ("crop_large", 2): [(12360.245437685528, -23.211170805114577), (12367.183111776889, -25.916504225290865)],
    ("crop_small", 2): [(12584.105440215186, -88.8938892474244), (12357.960215579951, -21.636559631811494)],
    ("colour", 2): [(11845.154805547034, 1673.865054698025), (13851.66314093526, -374.32214016355897)],
    ("rotation", 2): [(12374.34142140299, -17.283527216612654), (12374.34142140299, -16.7775603481207)],
    ("colour+crop_large", 2): [(10674.95320246489, 995.0651734434801), (13170.804202300315, -797.9641523092689)],
    ("crop_small+rotation+colour", 2): [(14082.836430111201, -793.8969746568076), (12051.805150230706, 611.6389474675341)],
    ("crop_large+colour", 3): [(10674.95320246489, 995.0651734434801), (13170.804202300315, -797.9641523092689), (10984.482944917865, 472.40938208517025)],
    ("paper004_grey", 2): [(12442.612602189718, -36.474443494415084), (12372.552382434555, 15.465707695724575)],
    ("paper004_colour", 3): [(10691.003872018848, 1007.4598055024601), (13219.088412235142, -802.3171666346158), (11051.205489769578, 517.7423601849082)],
}


def golden_images() -> torch.Tensor:
    """The fixed uint8 batch the golden sums were recorded on."""
    return torch.randint(0, 256, (8, 32, 32, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("spec,j", list(GOLDEN))
def test_recipes_make_the_recorded_views(spec, j):
    views = make_view_maker(spec, IDENTITY, n_views=j)({"images": golden_images()}, torch.Generator().manual_seed(11))
    ramp = torch.linspace(-1, 1, views[0].numel(), dtype=torch.float64).view(views[0].shape)
    got = [x for v in views for x in (float(v.double().sum()), float((v.double() * ramp).sum()))]
    assert got == pytest.approx([x for pair in GOLDEN[(spec, j)] for x in pair], rel=1e-6, abs=1e-6)


# ----- what each view maker changes ------------------------------------------------------------------

POSITIONS = {"pos_x", "pos_y", "pos_z", "spot_angle"}
HUES = {"obj_hue", "spot_hue", "bg_hue"}
ROTATIONS = {"rot_alpha", "rot_beta", "rot_gamma"}


@pytest.fixture(scope="module")
def c3d() -> dict:
    """The built-in Causal3DIdent SCM spec (change sets positions, hues, rotations)."""
    return load_scm("causal3dident").spec


@pytest.mark.parametrize("views,expected", [
    ("paper004_colour", POSITIONS | HUES),  # crops move the scene in the frame, colour jitter shifts its colours
    ("paper004_grey", POSITIONS),
    ("learned_crop", POSITIONS),
    ("crop_small+rotation+colour", POSITIONS | ROTATIONS | HUES),
    ("none", set()),
    ("labels", set()),
    ("lt_exact:hues", HUES),
    ("lt_nn:positions+rotations", POSITIONS | ROTATIONS),
])
def test_each_view_maker_reports_what_it_changes(c3d, views, expected):
    assert resolve_style(views, c3d, {"hues": sorted(HUES)}).latents == expected


def test_paper004_colour_maps_each_stage_and_takes_the_colour_override(c3d):
    st = resolve_style("paper004_colour", c3d, {})
    assert st.da_map == {"crop_0.6": ["pos_x", "pos_y", "pos_z", "spot_angle"],
                         "colour": ["obj_hue", "spot_hue", "bg_hue"]} and st.unmapped == []
    assert resolve_style("paper004_colour", c3d, {}, da_style={"colour": "bg_hue"}).latents == POSITIONS | {"bg_hue"}


def test_every_registered_view_maker_answers(c3d):
    scm = load_scm(c3d)
    for name in VIEWS.names():
        cls = VIEWS.get(name)
        maker = make_view_maker(name if cls.arg is None else f"{name}:hues", IDENTITY)
        assert maker.style(scm, {"hues": sorted(HUES)}).latents <= set(scm.names), name


@pytest.mark.parametrize("views", ["wheels", "crop_large+wheels", "wheels:hues"])
def test_an_unknown_view_maker_is_a_one_line_user_error_not_content(c3d, views):
    with pytest.raises(UserError) as err:
        resolve_style(views, c3d, {})
    assert "\n" not in str(err.value) and "choose one of" in str(err.value) and "crop_large" in str(err.value)


# ----- one registration ------------------------------------------------------------------------------

class InvertStage(Stage):
    """A photographic negative of every view (no random draws)."""

    kind, rank = "invert", 3
    targets = ("hues",)

    def __call__(self, views: list[torch.Tensor], seed: int) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        return [1.0 - v for v in views], {}


@pytest.fixture
def invert():
    """The DA recipe 'invert', registered once (its stage, targets and view maker), unregistered afterwards."""
    register_recipe("invert", InvertStage, "Negative images.", targets=("bg_hue",))
    yield
    unregister_recipe("invert")
    assert "invert" not in DA_RECIPES and "invert" not in VIEWS.names()


def test_a_recipe_registered_once_is_a_view_maker_and_has_a_style(invert, c3d):
    images = golden_images()
    views = make_view_maker("invert", IDENTITY)({"images": images}, torch.Generator().manual_seed(0))
    assert all(torch.equal(v, 1.0 - to_float(images)) for v in views)
    combo = make_view_maker("invert+crop_large", IDENTITY)
    assert [s.name for s in combo.stages] == ["crop_large", "invert"] and combo.spec == "crop_large+invert"
    assert dict(VIEWS.describe())["invert"] == "Negative images. (style: bg_hue)"
    st = resolve_style("crop_large+invert", c3d, {})
    assert st.latents == POSITIONS | {"bg_hue"} and st.da_map["invert"] == ["bg_hue"]
    assert resolve_style("invert", c3d, {}, da_style={"invert": "hues"}).latents == HUES  # an override wins
    assert "invert" in check_da_style({"invert": "hues"}, "test")


def test_a_view_maker_declares_its_argument():
    class Tinted(ViewMaker):
        """Test maker: takes 'tinted:LEVEL'."""

        arg = "level"
        changes = ("hues",)

        def __init__(self, normalize: Normalize, level: str | None = None, **options):
            super().__init__(normalize, **options)
            self.level = level

    VIEWS.register("tinted")(Tinted)
    try:
        assert make_view_maker("tinted:3", IDENTITY).level == "3"
        assert "tinted:LEVEL" in choices()
        with pytest.raises(UserError, match="view maker 'labels' takes no ':' argument"):
            make_view_maker("labels:3", IDENTITY)
    finally:
        VIEWS.unregister("tinted")
