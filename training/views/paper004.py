"""Paper 004's augmentations as view makers (its Table 2): crops of scale 0.4-1 for grey digits and clothes,
scale 0.6-1 plus colour jitter for CIFAR10 and CelebA. Registered here (imported by training.views)
because the crop scales differ from the DA recipes' 0.8 and 0.08."""

from __future__ import annotations

from typing import Any

from training.registry import VIEWS
from training.views.augment import ColourStage, CropStage, DAViewMaker
from training.views.base import Normalize


@VIEWS.register("paper004_grey")
class Paper004Grey(DAViewMaker):
    """Paper 004's MNIST/FashionMNIST views: random resized crop, scale (0.4, 1), ratio (3/4, 4/3), + flip p = 0.5."""

    def __init__(self, normalize: Normalize, **options: Any):
        super().__init__(normalize, recipes=(), **options)
        self.stages, self.spec = [CropStage("crop_0.4", (0.4, 1.0))], "crop_0.4"


@VIEWS.register("paper004_colour")
class Paper004Colour(DAViewMaker):
    """Paper 004's CIFAR10/CelebA views: crop scale (0.6, 1) + flip, ColorJitter(.8, .8, .8, .2) p .8, grey p .2."""

    def __init__(self, normalize: Normalize, **options: Any):
        super().__init__(normalize, recipes=(), **options)
        self.stages, self.spec = [CropStage("crop_0.6", (0.6, 1.0)), ColourStage()], "crop_0.6+colour"
