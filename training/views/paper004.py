"""Paper 004's augmentations as view makers (its Table 2): crops of scale 0.4-1 for grey digits and clothes,
scale 0.6-1 plus colour jitter for CIFAR10 and CelebA. Registered here (imported by training.views)
because the crop scales differ from the DA recipes' 0.8 and 0.08.

Their style is their stages' (``DAViewMaker.style``): a random resized crop with a flip moves and rescales the
scene in the frame, so it changes where things are (positions), not what or which colour they are; colour jitter
(brightness, contrast, saturation, hue) and grey change every colour, not the geometry (hues). So
``paper004_grey`` changes positions and ``paper004_colour`` positions and hues.
"""

from __future__ import annotations

from collections.abc import Sequence

from ident3d.training.registry import VIEWS
from ident3d.training.views.augment import CropStage, DAViewMaker, Stage, build_stage


@VIEWS.register("paper004_grey")
class Paper004Grey(DAViewMaker):
    """Paper 004's MNIST/FashionMNIST views: random resized crop, scale (0.4, 1), ratio (3/4, 4/3), + flip p = 0.5."""

    def build_stages(self, recipes: Sequence[str]) -> list[Stage]:
        """Its own crop (style: positions)."""
        return [CropStage("crop_0.4", scale_min=0.4)]


@VIEWS.register("paper004_colour")
class Paper004Colour(DAViewMaker):
    """Paper 004's CIFAR10/CelebA views: crop scale (0.6, 1) + flip, ColorJitter(.8, .8, .8, .2) p .8, grey p .2."""

    def build_stages(self, recipes: Sequence[str]) -> list[Stage]:
        """Its own crop (style: positions), then the colour recipe's jitter (style: hues)."""
        return [CropStage("crop_0.6", scale_min=0.6), build_stage("colour")]
