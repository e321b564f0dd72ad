"""CRL-TAC on 1-channel [0, 1] images, as paper 002 feeds MNIST (a lever of the paper's open choices; ident3d
otherwise hands every network 3 channels standardised with the store's statistics). The view maker and evaluation
still hand over standardised RGB; ``UnitGray`` undoes the standardisation with the store's statistics (a buffer,
set by the view maker's ``bind`` and saved with the weights, so evaluation sees what training saw) and averages
the channels; ``one_input_channel`` makes a network's first convolution take that one channel."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class UnitGray(nn.Module):
    """Standardised (B, 3, H, W) -> (B, 1, H, W) in [0, 1]: x * std + mean per channel, then the channels' mean."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("stats", torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))  # mean; std

    def set_normalisation(self, mean: Sequence[float], std: Sequence[float]) -> None:
        """The store's per-channel mean and std that the input was standardised with."""
        self.stats.copy_(torch.tensor([list(mean), list(std)], dtype=self.stats.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = (v.to(x.dtype).view(1, -1, 1, 1) for v in self.stats)
        return (x * std + mean).mean(dim=1, keepdim=True)


def one_input_channel(net: nn.Module) -> nn.Module:
    """Replace the first ``nn.Conv2d`` of ``net`` by a fresh one (torch's default initialisation, from the global
    generator) with the same settings but one input channel; returns the new convolution."""
    for name, module in net.named_modules():
        if isinstance(module, nn.Conv2d):
            new = nn.Conv2d(1, module.out_channels, module.kernel_size, module.stride, module.padding,
                            module.dilation, 1, module.bias is not None, module.padding_mode)
            parent = net.get_submodule(name.rpartition(".")[0]) if "." in name else net
            setattr(parent, name.rpartition(".")[2], new)
            return new
    raise ValueError(f"{type(net).__name__} has no convolution to take one input channel")
