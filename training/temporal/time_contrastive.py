"""Time-contrastive baseline: the project's InfoNCE objective (SimCLR's NT-Xent,
``ident3d.training.objectives.infonce``) with consecutive frames (x^t, x^{t+1}) as the positive pair and the other
frames of the batch as negatives. Intervention targets are not used."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ident3d.training.encoder_base import Encoder
from ident3d.training.objectives.infonce import InfoNCE


class TimeContrastive(nn.Module):
    """InfoNCE on (x^t, x^{t+1}) pairs; the representation is the encoder's output."""

    def __init__(self, encoder: Encoder, *, tau: float = 0.1):
        super().__init__()
        self.nce = InfoNCE(encoder, tau=tau)

    def loss(self, x_t: torch.Tensor, x_t1: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
        """NT-Xent of the two frames' embeddings (``targets`` is ignored)."""
        return self.nce.loss([self.nce.encoder(x_t), self.nce.encoder(x_t1)])

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        """The encoder's output."""
        return self.nce.encoder(x)

    def assignment(self) -> np.ndarray | None:
        """None: no grouping of dimensions."""
        return None
