"""CITRIS's causal variables of a dynamic SCM: the distinct intervention targets (nodes intervened on jointly form
one multidimensional variable), and the per-variable target vectors of a rollout.

For temporal_causal3dident these are 7 variables (class, position = pos_x/y/z, rotation = rot_alpha/beta,
spot_angle, obj_hue, spot_hue, bg_hue): CITRIS's 7. ``DynamicSCM.groups`` is a coarser grouping for display
(``positions`` holds the spotlight angle and ``hues`` three independently intervened hues), not this partition.
"""

from __future__ import annotations

import numpy as np

from ident3d.causal.dynamic import DynamicSCM


def causal_variables(model: DynamicSCM) -> dict[str, list[int]]:
    """Variable name -> indices of its nodes in ``model.names``, in node order; a node's variable is its
    intervention target (its own name when it has none or no shared target)."""
    out: dict[str, list[int]] = {}
    for i, name in enumerate(model.names):
        inter = model.nodes[name].intervention
        out.setdefault(inter.target if inter is not None else name, []).append(i)
    return out


def node_variable(variables: dict[str, list[int]], n_nodes: int) -> np.ndarray:
    """(n_nodes,) index of each node's variable, in the order of ``variables``."""
    out = np.full(n_nodes, -1)
    for k, nodes in enumerate(variables.values()):
        out[nodes] = k
    if (out < 0).any():
        raise ValueError(f"nodes {np.flatnonzero(out < 0).tolist()} belong to no variable")
    return out


def variable_targets(targets: np.ndarray, variables: dict[str, list[int]]) -> np.ndarray:
    """(S, T, K) per-variable targets from per-node ones (S, T, N): variable k is intervened when any of its nodes is
    (its nodes share one draw, so any = all)."""
    return np.stack([targets[..., nodes].any(-1) for nodes in variables.values()], axis=-1)
