"""Self-supervised objectives, one module each; importing this package registers them all in OBJECTIVES."""

from training.objectives import (  # noqa: F401  (imported for their registration side effect)
    align_maxent,
    barlow_twins,
    byol,
    cr_vae,
    crl_tac,
    gin_nll,
    infonce,
    lp_infonce,
    moco_v2,
    simvae,
    supervised,
    vae,
    vicreg,
)
from training.objectives.base import Objective
from training.registry import OBJECTIVES

__all__ = ["OBJECTIVES", "Objective"]
