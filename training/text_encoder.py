"""The text encoder of Daunhawer et al. (ICLR 2023, Multimodal3DIdent): token ids -> one encoding per caption.

Not an ``ENCODERS`` entry: the registry holds the run's encoder of its data (images or vectors, ``--encoder``), built
before the data is read, while this one's width is the captions' vocabulary; the image/text objectives build it
beside the image encoder, as the generative objectives build their decoders.
"""

from __future__ import annotations

import torch
from torch import nn

HALVINGS = 3  # each strided convolution (kernel 4, stride 2, padding 1) maps a side n to floor(n / 2)
MIN_SIDE = 2**HALVINGS  # the fewest tokens (and embedding width) that leave a side after the three halvings


class TextEncoder(nn.Module):
    """One-hot tokens -> Linear(vocab, 128) -> 3 strided 2-D convolutions -> flatten -> Linear(out_dim).

    As in the reference's ``TextEncoder2D``: the (L, 128) token embeddings are one single-channel image; three
    ``Conv2d`` (kernel 4, stride 2, padding 1, with bias) of ``width``, 2 ``width``, 4 ``width`` channels (25, 50,
    100), each followed by BatchNorm and ReLU, halve both sides (L // 8 x 128 // 8 = 3 x 16 at the reference's
    L of 24-31), and a linear layer maps the flattened maps to ``out_dim``. The one-hot product is computed as a lookup
    of the linear layer's weight columns plus its bias (the same values and gradients, no (B, L, vocab) tensor).
    """

    def __init__(self, vocab_size: int, max_len: int, out_dim: int, embed_dim: int = 128, width: int = 25):
        super().__init__()
        if max_len < MIN_SIDE or embed_dim < MIN_SIDE:
            raise ValueError(f"the text encoder needs max_len and embed_dim >= {MIN_SIDE} (three halvings), got "
                             f"max_len={max_len}, embed_dim={embed_dim}")
        self.vocab_size, self.max_len, self.out_dim = vocab_size, max_len, out_dim
        self.embed = nn.Linear(vocab_size, embed_dim)
        layers: list[nn.Module] = []
        chans = [1, width, 2 * width, 4 * width]
        for cin, cout in zip(chans[:-1], chans[1:], strict=True):
            layers += [nn.Conv2d(cin, cout, 4, stride=2, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]
        self.conv = nn.Sequential(*layers, nn.Flatten())
        self.fc = nn.Linear(chans[-1] * (max_len >> HALVINGS) * (embed_dim >> HALVINGS), out_dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, max_len) int64 token ids -> (B, out_dim)."""
        if tokens.dim() != 2 or tokens.shape[1] != self.max_len or tokens.dtype != torch.long:
            raise ValueError(f"expected (B, {self.max_len}) int64 token ids, got {tuple(tokens.shape)} {tokens.dtype}")
        h = self.embed.weight.T[tokens] + self.embed.bias  # = one_hot(tokens, vocab) @ W.T + b: (B, L, embed_dim)
        return self.fc(self.conv(h.unsqueeze(1)))
