"""Synthetic identifiability experiments (papers 000, 001, 003): latents, conditionals, mixings and sources
that generate batches on the training device (see ``training.synthetic.base``)."""

from training.synthetic.base import VectorSource
from training.synthetic.mixing import InvertibleMixing

__all__ = ["InvertibleMixing", "VectorSource"]
