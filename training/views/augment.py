"""Data-augmentation (DA) view makers: kornia crop / rotation / colour recipes applied to the same anchor (z~ = z).

Each recipe is a ``Recipe`` class registered once in ``DA_RECIPES`` (``@DA_RECIPES.register("NAME")``, or
:func:`register_recipe` in one call: its stage class, parameters and style targets), which also registers the
one-recipe view maker ``--views NAME``; a view maker runs its stages in the canonical order crop -> rotation ->
colour (the papers' pipelines, ``Stage.rank``) and normalises at the end. What a view
maker changes (its style) is the union of its stages' targets: a crop moves the scene in the frame (positions),
a rotation turns it (rotations), colour jitter shifts its colours (hues). All image work happens on the batch's
device, one kornia call per augmentation per view.

Determinism: kornia draws its parameters from the global CPU RNG (its samplers stay on CPU because the modules are
never moved). Before every kornia call we take a seed from the caller's ``torch.Generator`` and run the call inside
``torch.random.fork_rng(devices=[])`` after seeding only the CPU generator, so the same generator state gives the
same parameters (and, on CPU, bit-identical views) without disturbing the global RNG. Rotation draws its angles
directly from a generator seeded the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import kornia.augmentation as KA
import torch

from ident3d.causal.errors import UserError
from ident3d.causal.registry import Registry, summary
from ident3d.training.hparams import NonNegative, Positive, Range, Unit, coerce, declared, show
from ident3d.training.registry import VIEWS
from ident3d.training.views.base import Normalize, Style, ViewMaker, resolve_targets, to_float

if TYPE_CHECKING:
    from ident3d.causal.scm import SCM

_SEED_HIGH = 2**62
Fraction = Annotated[float, Range(gt=0, le=1)]  # a share of the image's area
HalfTurn = Annotated[float, Range(ge=0, le=0.5)]  # a hue shift, as a fraction of the colour circle


def draw_seeds(generator: torch.Generator | None, n: int) -> list[int]:
    """``n`` integer seeds from ``generator`` (the global CPU RNG if None), so every random step is reproducible."""
    return [int(s) for s in torch.randint(0, _SEED_HIGH, (n,), generator=generator)]


def run_seeded(module: KA.AugmentationBase2D, x: torch.Tensor, seed: int) -> tuple[torch.Tensor, dict[str, Any]]:
    """Apply a kornia augmentation with its global-RNG draws pinned to ``seed``; return output and its params."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        out = module(x)
    return out, module._params


class Stage:
    """One DA recipe: transforms all views of a batch and reports the parameters it sampled."""

    kind: ClassVar[str]  # "crop", "rotation", "colour": a view maker runs one stage of a kind at most
    rank: ClassVar[int]  # its place in the canonical pipeline: geometry, then orientation, then colour
    any_views: ClassVar[bool] = True  # draws any J >= 2 views (rotation: exactly two different ones)
    targets: tuple[str, ...] = ()  # what it changes: SCM change sets, groups or nodes (default of its kind)

    def __init__(self, name: str, targets: Sequence[str] | None = None):
        self.name = self.spec = name  # spec: the recipe as written with its settings (``Recipe.build``)
        if targets is not None:
            self.targets = tuple(targets)

    def __call__(self, views: list[torch.Tensor], seed: int) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        raise NotImplementedError


class CropStage(Stage):
    """RandomResizedCrop back to the input size (bicubic) + horizontal flip, drawn per view and sample.

    Settings: the crop's area as a fraction of the image in [scale_min, scale_max], its aspect ratio in
    [ratio_min, ratio_max] (torchvision's 3/4 to 4/3 by default), and the flip's probability ``flip_p``.
    """

    kind, rank = "crop", 0
    targets = ("positions",)  # a crop (and flip) moves and rescales the scene in the frame: where things are

    def __init__(self, name: str, targets: Sequence[str] | None = None, *, scale_min: Fraction = 0.08,
                 scale_max: Fraction = 1.0, ratio_min: Positive = 3 / 4, ratio_max: Positive = 4 / 3,
                 flip_p: Unit = 0.5):
        super().__init__(name, targets)
        if not 0 < scale_min <= scale_max or ratio_min > ratio_max:
            raise UserError(f"DA recipe {name}: needs 0 < scale_min <= scale_max and ratio_min <= ratio_max, got "
                            f"scale ({scale_min:g}, {scale_max:g}), ratio ({ratio_min:g}, {ratio_max:g})")
        self.scale, self.ratio = (scale_min, scale_max), (ratio_min, ratio_max)
        self._crops: dict[tuple[int, int], KA.RandomResizedCrop] = {}
        self.flip = KA.RandomHorizontalFlip(p=flip_p)

    def _crop(self, size: tuple[int, int]) -> KA.RandomResizedCrop:
        """The crop module for an output size (built once per size; 'resample' mode warps the batch in one call)."""
        if size not in self._crops:
            self._crops[size] = KA.RandomResizedCrop(
                size, scale=self.scale, ratio=self.ratio, resample="bicubic", cropping_mode="resample")
        return self._crops[size]

    def __call__(self, views: list[torch.Tensor], seed: int) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        crop = self._crop((views[0].shape[-2], views[0].shape[-1]))
        out, params = [], {}
        for i, (x, s) in enumerate(zip(views, _split_seed(seed, len(views)), strict=True)):
            x, p = run_seeded(crop, x, s)
            params[f"view{i}/crop_box"] = p["src"]  # (B, 4, 2) corners (x, y): TL, TR, BR, BL in input pixels
            x, p = run_seeded(self.flip, x.clamp_(0.0, 1.0), s + 1)  # bicubic overshoots [0, 1]
            params[f"view{i}/flip"] = p["batch_prob"] > 0.5
            out.append(x)
        return out, params


class ColourStage(Stage):
    """ColorJitter(0.8, 0.8, 0.8, 0.2) with p = 0.8, then RandomGrayscale p = 0.2, drawn per view and sample.

    Settings: the jitter's ``brightness``, ``contrast``, ``saturation`` and ``hue``, all scaled by ``strength``
    (SimCLR's colour strength s: ColorJitter(0.8 s, 0.8 s, 0.8 s, 0.2 s); the scaled hue is capped at 0.5, a half
    turn), the jitter's probability ``jitter_p`` and the grey probability ``grey_p``. kornia's ``ColorJitter`` (not
    ``ColorJiggle``) is used because it implements torchvision's formulas: multiplicative brightness in [1 - b,
    1 + b], contrast/saturation blends with the grayscale mean/image, and torchvision's hue shift; the order of the
    four steps is drawn per call (shared by the batch).
    """

    kind, rank = "colour", 2
    targets = ("hues",)  # brightness, contrast, saturation, hue and grey change every colour, not the geometry

    def __init__(self, name: str = "colour", targets: Sequence[str] | None = None, *, strength: NonNegative = 1.0,
                 brightness: Unit = 0.8, contrast: Unit = 0.8, saturation: Unit = 0.8, hue: HalfTurn = 0.2,
                 jitter_p: Unit = 0.8, grey_p: Unit = 0.2):
        super().__init__(name, targets)
        if strength * max(brightness, contrast, saturation) > 1:
            raise UserError(f"DA recipe {name}: strength x brightness, contrast and saturation must be at most 1 "
                            f"(a factor of 1 - x may not go below 0), got strength {strength:g}")
        self.jitter = KA.ColorJitter(strength * brightness, strength * contrast, strength * saturation,
                                     min(0.5, strength * hue), p=jitter_p)
        self.gray = KA.RandomGrayscale(p=grey_p)

    def __call__(self, views: list[torch.Tensor], seed: int) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        out, params = [], {}
        for i, (x, s) in enumerate(zip(views, _split_seed(seed, len(views)), strict=True)):
            x, p = run_seeded(self.jitter, x, s)
            params[f"view{i}/jitter_applied"] = p["batch_prob"] > 0.5
            for factor in ("brightness", "contrast", "saturation", "hue"):
                params[f"view{i}/{factor}"] = p[f"{factor}_factor"]
            params[f"view{i}/jitter_order"] = p["order"]
            x, p = run_seeded(self.gray, x, s + 1)
            params[f"view{i}/grayscale"] = p["batch_prob"] > 0.5
            out.append(x)
        return out, params


class RotationStage(Stage):
    """Exact rotations by multiples of 90 degrees; the two views of an anchor get two different angles."""

    kind, rank = "rotation", 1
    any_views = False
    targets = ("rotations",)  # a quarter turn of the whole image: the object's orientation in the frame

    def __call__(self, views: list[torch.Tensor], seed: int) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
        if len(views) != 2:
            raise ValueError("rotation makes exactly two views")
        b, _, h, w = views[0].shape
        if h != w:
            raise UserError(f"rotation needs square images, got {h}x{w}")
        g = torch.Generator().manual_seed(seed)
        k0 = torch.randint(0, 4, (b,), generator=g)
        k1 = (k0 + torch.randint(1, 4, (b,), generator=g)) % 4  # a non-zero offset: the angles always differ
        out = [rotate90(x, k.to(x.device, non_blocking=True)) for x, k in zip(views, (k0, k1), strict=True)]
        return out, {"view0/rotation_k": k0, "view1/rotation_k": k1}


def rotate90(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Rotate each image ``x[i]`` (B, C, H, H) by ``k[i] * 90`` degrees counter-clockwise, exactly and sync-free."""
    out = x
    for j in (1, 2, 3):
        out = torch.where((k == j).view(-1, 1, 1, 1), torch.rot90(x, j, dims=(2, 3)), out)
    return out


def _split_seed(seed: int, n: int) -> list[int]:
    """``n`` independent seeds from one (views are drawn independently of each other)."""
    return draw_seeds(torch.Generator().manual_seed(seed), n)


class Recipe:
    """A DA recipe, registered with ``@DA_RECIPES.register("NAME")``: the stage class it builds, with which parameters,
    changing which targets (None: the stage's); its docstring is the view maker ``--views NAME``'s line in
    ``train --list``."""

    registry_name: ClassVar[str]
    stage: ClassVar[type[Stage]]
    params: ClassVar[Mapping[str, Any]] = {}
    targets: ClassVar[tuple[str, ...] | None] = None  # set on registration: these, or the stage's

    @classmethod
    def build(cls, **settings: Any) -> Stage:
        """A fresh stage (kornia modules keep per-call state: every view maker gets its own); ``settings`` override
        the recipe's parameters, each checked against the stage's declaration (one line naming a bad one)."""
        name = cls.registry_name
        declared_ = declared(cls.stage, STAGE_FIXED)
        unknown = [k for k in settings if k not in declared_]
        if unknown:
            raise UserError(f"DA recipe {name} has no setting {unknown[0]!r}; it takes: "
                            f"{', '.join(declared_) or 'none'}")
        given = coerce(cls.stage, settings, f"DA recipe {name}", "setting", STAGE_FIXED)
        stage = cls.stage(name, cls.targets, **{**cls.params, **given})
        stage.spec = recipe_spec(name, given)
        return stage

    @classmethod
    def settings(cls) -> str:
        """Its settings with this recipe's values, for ``train --list``: 'strength=1.0 (a finite number >= 0), ...'."""
        return ", ".join(f"{k}={show(cls.params.get(k, p.default))} ({p.expected(example=False)})"
                         for k, p in declared(cls.stage, STAGE_FIXED).items())


class RecipeRegistry(Registry):
    """The DA recipes in registration order (the order messages list them in); registering one also registers its
    one-recipe view maker ``--views NAME`` in VIEWS, so a recipe is added in one place."""

    def added(self, name: str, cls: type) -> None:
        """Fix the recipe's targets (default: its stage's) and register its view maker."""
        recipe: type[Recipe] = cls
        recipe.targets = tuple(recipe.stage.targets if recipe.targets is None else recipe.targets)
        maker = type(f"DA_{name}", (DAViewMaker,), {"__doc__": f"{summary(recipe)} (style: {'+'.join(recipe.targets)})",
                                                    "__module__": __name__, "recipes": (name,),
                                                    "any_views": recipe.stage.any_views})
        VIEWS.register(name)(maker)

    def unregister(self, name: str) -> None:
        """Remove a DA recipe and its view maker."""
        super().unregister(name)
        VIEWS.unregister(name)


DA_RECIPES = RecipeRegistry("DA recipe", hint="ident3d train --list", sort=False)  # the names that combine with '+'
STAGE_FIXED = frozenset({"name", "targets"})  # a stage's arguments that are the recipe's, not the user's settings


def build_stage(name: str, **settings: Any) -> Stage:
    """A fresh stage for a registered DA recipe name, with ``settings`` over its parameters."""
    return DA_RECIPES.get(name).build(**settings)


def parse_recipe(text: str) -> tuple[str, dict[str, Any]]:
    """``"colour(strength=0.5, grey_p=0)"`` -> ("colour", {"strength": 0.5, "grey_p": 0}); a bare name has no
    settings. Values are read as YAML numbers/booleans (``ident3d.causal.yamlnum.parse_value``)."""
    from ident3d.causal.yamlnum import parse_value

    name, paren, rest = text.strip().partition("(")
    if not paren:
        return name.strip(), {}
    if not rest.endswith(")"):
        raise UserError(f"DA recipe {text!r}: settings go in parentheses, e.g. colour(strength=0.5)")
    settings: dict[str, Any] = {}
    for item in filter(None, (i.strip() for i in rest[:-1].split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UserError(f"DA recipe {text!r}: expected KEY=VALUE, got {item!r}")
        settings[key.strip()] = parse_value(value.strip())
    return name.strip(), settings


def recipe_spec(name: str, settings: Mapping[str, Any]) -> str:
    """The canonical text of a recipe with settings: ``colour(grey_p=0.0,strength=0.5)`` (sorted, declared types)."""
    if not settings:
        return name
    return f"{name}({','.join(f'{k}={show(v)}' for k, v in sorted(settings.items()))})"


class DAViewMaker(ViewMaker):
    """J independently augmented views of the same images (z~ = z; J = n_views, 2 by default), normalised;
    recipes combine with '+'."""

    recipes: ClassVar[tuple[str, ...]] = ()
    any_views = True

    def __init__(self, normalize: Normalize, recipes: Sequence[str] | None = None, **options: Any):
        super().__init__(normalize, **options)
        stages = self.build_stages(self.recipes if recipes is None else recipes)
        kinds = [s.kind for s in stages]
        if len(set(kinds)) != len(kinds):
            raise UserError(f"DA recipes {'+'.join(s.name for s in stages)} repeat a kind (one crop at most)")
        fixed = [s.name for s in stages if not s.any_views]
        if self.n_views != 2 and fixed:
            takes = ", ".join(n for n, r in DA_RECIPES.items() if r.stage.any_views)
            raise UserError(f"--n-views {self.n_views}: the {fixed[0]} recipe makes exactly 2 views; use --n-views 2 "
                            f"or recipes that make J views ({takes})")
        self.stages = sorted(stages, key=lambda s: s.rank)
        self.spec = "+".join(s.spec for s in self.stages) or "none"

    def build_stages(self, recipes: Sequence[str]) -> list[Stage]:
        """The stages of the named recipes, each ``NAME`` or ``NAME(KEY=VALUE, ...)`` (a maker with stages of its own
        overrides this)."""
        return [build_stage(name, **settings) for name, settings in map(parse_recipe, recipes)]

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        x = to_float(batch["images"])
        views = [x] * self.n_views
        seeds = draw_seeds(generator, len(self.stages))
        params: dict[str, torch.Tensor] = {}
        for stage, seed in zip(self.stages, seeds, strict=True):
            views, p = stage(views, seed)
            params.update(p)
        self.last_params = params
        return [self.normalize(v) for v in views]

    def style(self, scm: SCM, stored_views: Mapping[str, Sequence[str]],
              da_style: Mapping[str, Sequence[str]] | None = None) -> Style:
        """The union of its stages' targets resolved through the SCM; ``da_style`` {recipe: latents} wins for the
        recipes it names. A stage whose targets the SCM lacks changes nothing (it is listed as unmapped)."""
        style = Style(set())
        for stage in self.stages:
            if da_style and stage.name in da_style:
                style.add(stage.name, da_style[stage.name])
            else:
                style.add(stage.name, resolve_targets(scm, stage.targets))
        return style


def register_recipe(name: str, stage: type[Stage], doc: str, targets: Sequence[str] | None = None,
                    **params: Any) -> type[Recipe]:
    """Register DA recipe ``name`` in one call (the class form is ``@DA_RECIPES.register(NAME)`` on a ``Recipe``):
    its stage class and parameters, what it changes (default: the stage's targets) and so the one-recipe view maker
    ``--views NAME`` (``doc``: its line in ``train --list``); returns the recipe class."""
    recipe = type(f"Recipe_{name}", (Recipe,), {"__doc__": doc, "__module__": __name__, "stage": stage,
                                                 "params": dict(params),
                                                 "targets": None if targets is None else tuple(targets)})
    return DA_RECIPES.register(name)(recipe)


def unregister_recipe(name: str) -> None:
    """Remove a DA recipe and its view maker (a test's own registration, undone when the test ends)."""
    DA_RECIPES.unregister(name)


@VIEWS.register("none")
class NoAugment(DAViewMaker):
    """Identity views (the anchor twice): a debugging baseline."""


@DA_RECIPES.register("crop_large")
class CropLarge(Recipe):
    """Random resized crop, scale (0.8, 1), bicubic, + horizontal flip."""

    stage, params = CropStage, {"scale_min": 0.8}


@DA_RECIPES.register("crop_small")
class CropSmall(Recipe):
    """Random resized crop, scale (0.08, 1), bicubic, + horizontal flip."""

    stage, params = CropStage, {"scale_min": 0.08}


@DA_RECIPES.register("rotation")
class Rotation(Recipe):
    """Two different rotations from {0, 90, 180, 270} degrees."""

    stage = RotationStage


@DA_RECIPES.register("colour")
class Colour(Recipe):
    """Colour distortion: ColorJitter(0.8, 0.8, 0.8, 0.2) p = 0.8, then grayscale p = 0.2."""

    stage = ColourStage
