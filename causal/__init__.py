"""Ground-truth latents from structural causal models over DAGs (no Blender, no torch).

``load_scm(name_or_path)`` gives an :class:`SCM`; ``scm.sample(n, seed, start)`` gives
:class:`Samples`; ``scm.do(...)`` intervenes; ``scm.transform(samples, change)`` makes
latent-transformation pairs.
"""

from causal.errors import SpecError, UserError
from causal.loading import builtin_names, load_scm, parse_spec, read_spec_text
from causal.samples import Samples
from causal.scm import SCM, Node
from causal.synthetic import content_style_spec

__all__ = [
    "SCM", "Node", "Samples", "SpecError", "UserError", "builtin_names", "content_style_spec",
    "load_scm", "parse_spec", "read_spec_text",
]
