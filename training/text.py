"""Captions as token ids: a plain word tokenizer and the vocabulary of a set of training captions.

``tokenize`` lower-cases a caption and splits it with ``TOKEN_PATTERN``: a word is a run of letters, digits or
underscores, with inner hyphens or apostrophes kept in it ("bottom-left", "it's" are one token each), and every other
character that is not a space is a token of its own (".", ",", '"'). The reference code of Daunhawer et al. (ICLR
2023) tokenises with nltk's ``word_tokenize`` and keeps case; this one needs no download.

A ``Vocabulary`` lists its words most frequent first (ties alphabetically) after ``<pad>`` (id 0) and ``<unk>`` (id 1),
so the same captions give the same ids in any order; ``to_dict``/``from_dict`` record it as JSON.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch

TOKEN_PATTERN = r"\w+(?:[-']\w+)*|[^\w\s]"
PAD, UNK = "<pad>", "<unk>"  # ids 0 and 1; the pattern never yields them (it splits "<" and ">" off)
TOKENIZER = {"lowercase": True, "pattern": TOKEN_PATTERN}  # what a recorded vocabulary was tokenised with


def tokenize(caption: str) -> list[str]:
    """The lower-cased caption's words and punctuation marks, in order."""
    return re.findall(TOKEN_PATTERN, caption.lower())


def longest(captions: Iterable[str]) -> int:
    """The most tokens of any caption (0 for none): the padded length that truncates none of them."""
    return max((len(tokenize(c)) for c in captions), default=0)


@dataclass(frozen=True)
class Vocabulary:
    """Words by id: ``<pad>``, ``<unk>``, then the training captions' words, most frequent first."""

    words: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.words[:2] != (PAD, UNK) or len(set(self.words)) != len(self.words):
            raise ValueError(f"a vocabulary starts with {PAD!r}, {UNK!r} and lists each word once")

    @classmethod
    def build(cls, captions: Iterable[str], min_count: int = 1) -> Vocabulary:
        """The vocabulary of ``captions``: every word seen at least ``min_count`` times (the rest read as ``<unk>``)."""
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        counts = Counter(word for caption in captions for word in tokenize(caption))
        kept = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
        return cls((PAD, UNK, *kept))

    def __len__(self) -> int:
        """The number of ids, ``<pad>`` and ``<unk>`` included: the text encoder's one-hot width."""
        return len(self.words)

    @cached_property
    def ids(self) -> dict[str, int]:
        """Word -> id."""
        return {w: i for i, w in enumerate(self.words)}

    def encode(self, captions: Sequence[str], max_len: int) -> torch.Tensor:
        """Token ids of each caption, (N, max_len) int64: unknown words as ``<unk>``, cut after ``max_len`` tokens,
        padded with ``<pad>`` (0)."""
        out = torch.zeros(len(captions), max_len, dtype=torch.long)
        unk = self.ids[UNK]
        for row, caption in enumerate(captions):
            ids = [self.ids.get(w, unk) for w in tokenize(caption)[:max_len]]
            out[row, :len(ids)] = torch.tensor(ids, dtype=torch.long)
        return out

    def decode(self, ids: torch.Tensor) -> list[list[str]]:
        """The words of each row of (N, L) ids, ``<pad>`` left out."""
        return [[self.words[i] for i in row if i != 0] for row in ids.tolist()]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able record: the tokenizer's settings and the words by id."""
        return {"tokenizer": dict(TOKENIZER), "words": list(self.words)}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Vocabulary:
        """The vocabulary ``to_dict`` recorded; refuses one tokenised otherwise than ``tokenize`` does now."""
        if record.get("tokenizer") != TOKENIZER:
            raise ValueError(f"the vocabulary was tokenised with {record.get('tokenizer')}, not {TOKENIZER}")
        return cls(tuple(record["words"]))
