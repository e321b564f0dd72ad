"""Ground-truth latents from structural causal models over DAGs (no Blender, no torch).

``load_scm(name_or_path)`` gives an :class:`SCM`; ``scm.sample(n, seed, start)`` gives
:class:`Samples`; ``scm.do(...)`` intervenes; ``scm.transform(samples, change)`` makes
latent-transformation pairs. ``load_dynamic_scm(name_or_path)`` gives a :class:`DynamicSCM` (a first-order
dynamic Bayesian network with per-node interventions) whose ``rollout(n, length, seed, start)`` gives a
:class:`Rollout` of sequences and intervention targets.
"""

from ident3d.causal.dynamic import DynamicSCM
from ident3d.causal.errors import SpecError, UserError
from ident3d.causal.loading import builtin_names, load_any, load_dynamic_scm, load_scm, parse_spec, read_spec_text
from ident3d.causal.samples import Samples
from ident3d.causal.scm import SCM, Node
from ident3d.causal.sequences import Rollout
from ident3d.causal.synthetic import content_style_spec

__all__ = [
    "SCM", "DynamicSCM", "Node", "Rollout", "Samples", "SpecError", "UserError", "builtin_names",
    "content_style_spec", "load_any", "load_dynamic_scm", "load_scm", "parse_spec", "read_spec_text",
]
