"""Base of the object-centric autoencoders (``slot_attention``, ``additive_ae``; issue 35 §3): an image is split into
``n_slots`` slot codes, each decoded alone, and the per-slot outputs are combined into a reconstruction scored by
the pixel MSE (views arrive normalised with the store's statistics, so in normalised pixel units).

They train on the store's images themselves: their view maker is ``none`` (the anchor twice), of which the first
view is used. Both need the ``slot_cnn`` encoder (its per-position features); ``representations`` gives evaluation
the slots (``slots``: (B, n_slots, slot_dim), ``output``: the same flattened), the encoder's pooled features
(``inner``) and each pixel's slot (``slot_masks``), which the object metrics (``ident3d.evaluation.slot_metrics``)
compare with a multi-object store's masks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ident3d.causal.errors import UserError
from ident3d.training.objective_parts.base import Objective
from ident3d.training.slot_encoder import SlotCNN

EVAL_SEED = 0  # seed of what ``representations`` draws (Slot Attention's initial slots): same images, same codes


class SlotObjective(Objective):
    """Shared parts of slot_attention and additive_ae (not registered itself)."""

    view_maker = "none"  # reconstructs the store's images: the anchor as it is (the maker's second view is the same)

    def __init__(self, encoder: nn.Module, n_slots: int, slot_dim: int):
        super().__init__(encoder)
        name = type(self).registry_name
        if not isinstance(encoder, SlotCNN):
            given = getattr(encoder, "registry_name", type(encoder).__name__)
            raise UserError(f"objective {name} needs --encoder slot_cnn (features per position), not {given}")
        if encoder.constraint != "none":
            raise UserError(f"objective {name}: slots are unconstrained; use --constraint none")
        self.n_slots, self.slot_dim = int(n_slots), int(slot_dim)

    @classmethod
    def store_note(cls, info: Any) -> str | None:
        """What training on this store means, when it has no objects to separate (a single-object or sequence
        store): the slots then split each image into parts, and the object metrics cannot score them."""
        if (info.attrs.scene_spec or {}).get("objects"):
            return None
        what = "a sequence store (its frames are trained as single images)" if info.attrs.sequences else \
            "a store without object slots (a single-object scene or a dataset)"
        return (f"{cls.registry_name} on {what}: with no objects to separate, its slots split each image into "
                "parts (object, background, lighting), and the object metrics (fg_ari, sis, slot_r2) need a "
                "multi-object store's masks and per-object latents; render one with --scene multi3dident")

    def decompose(self, x: torch.Tensor, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """{"slots": (B, K, D), "recon": (B, 3, H, W), "masks": (B, K, H, W) each slot's weight per pixel, "features":
        (B, width) the encoder's pooled features} of images ``x``; ``generator``: for what the model draws at random."""
        raise NotImplementedError

    def forward(self, views: list[torch.Tensor], step: int = 0, total_steps: int = 1) -> dict[str, torch.Tensor]:
        """Pixel MSE of the reconstruction of the first view (the ``none`` maker's views are one image twice)."""
        x = views[0]
        return {"loss": (self.decompose(x)["recon"] - x).pow(2).mean()}

    def representations(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """"inner": the encoder's pooled features (B, width); "output": the slots flattened (B, K * D); "slots":
        (B, K, D); "slot_masks": (B, H, W) each pixel's slot index (argmax over the slots of ``decompose``'s masks)
        as float values, since ``encode_store`` stores every layer as floats (round them back to ints). Random
        parts are drawn from a generator seeded with EVAL_SEED, so encoding is deterministic."""
        parts = self.decompose(x, torch.Generator().manual_seed(EVAL_SEED))
        slots = parts["slots"]
        return {"inner": parts["features"], "output": slots.flatten(1), "slots": slots,
                "slot_masks": parts["masks"].argmax(dim=1).float()}

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        """The slots flattened (B, K * D), as ``representations``' "output"."""
        return self.representations(x)["output"]

    def target(self, x: torch.Tensor) -> torch.Tensor:
        """What the decoder reconstructs: the (normalised) image itself."""
        return x

    @torch.no_grad()
    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        """The combined reconstruction (for figures and the reconstruction probe), random parts seeded as in
        ``representations``."""
        return self.decompose(x, torch.Generator().manual_seed(EVAL_SEED))["recon"]
