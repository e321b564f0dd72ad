"""Synthetic identifiability experiments (papers 000, 001, 003): latents, conditionals, mixings and sources
that generate batches on the training device (see ``ident3d.training.synthetic.base``)."""

from ident3d.training.synthetic.base import VectorSource
from ident3d.training.synthetic.mixing import InvertibleMixing

__all__ = ["InvertibleMixing", "VectorSource"]
