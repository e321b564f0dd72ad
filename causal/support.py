"""The support of an SCM beyond its nodes' ranges: which rows its mechanisms and object plates can produce at all.

A row given from outside (``ident3d render --latents``) must be one the SCM could have sampled, or the store holds
rows no study of that SCM expects: a category node takes a category's index (a whole number), a Bernoulli node 0 or 1,
and with object plates (causal/plates.py) the presence flags are 0 or 1, fill slots 0, 1, ... without gaps, count at
least the plates' ``min`` objects, and an absent object's latents are 0 (the zero-padded layout the sampler stores).
Ranges (``range:``) are checked by the reader of the rows (``ident3d.render.latents_io``). No scene, no Blender here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ident3d.causal.mechanisms import Bernoulli
from ident3d.causal.plates import Plates
from ident3d.causal.scm import SCM


def support_breach(scm: SCM, latents: np.ndarray) -> str | None:
    """The first way rows ``latents`` (N x D, ``scm.names`` order) leave the SCM's support, as 'row I ...' naming the
    row, the node and the rule; None when every row is one the SCM can sample."""
    values = {name: np.asarray(latents, dtype=np.float64)[:, j] for j, name in enumerate(scm.names)}
    plates = None if scm.plates is None else _plates_breach(scm.plates, values, scm.name)
    return plates or _node_breach(scm, values)


def _node_breach(scm: SCM, values: Mapping[str, np.ndarray]) -> str | None:
    """A category node off its categories' indices, or a Bernoulli node that is neither 0 nor 1."""
    for name, x in values.items():
        mechanism = scm.nodes[name].mechanism
        if mechanism.categories is not None:
            last = len(mechanism.categories) - 1
            bad = (x != np.round(x)) | (x < 0) | (x > last)
            rule = f"a category index, a whole number 0..{last} ({', '.join(mechanism.categories)})"
        elif isinstance(mechanism, Bernoulli):
            bad, rule = (x != 0) & (x != 1), "0 or 1 (a Bernoulli node)"
        else:
            continue
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return f"row {i} has {name} = {x[i]:g}; in SCM {scm.name} it is {rule}"
    return None


def _plates_breach(plates: Plates, values: Mapping[str, np.ndarray], scm: str) -> str | None:
    """Presence flags that are not 0/1, leave a gap, count fewer than ``min`` objects, or an absent object whose
    latents are not 0."""
    flags = np.stack([values[f] for f in plates.present], axis=1)
    bad = (flags != 0) & (flags != 1)
    if bad.any():
        i, k = (int(v) for v in np.argwhere(bad)[0])
        return f"row {i} has {plates.present[k]} = {flags[i, k]:g}; an object is present (1) or absent (0)"
    gap = (flags[:, 1:] == 1) & (flags[:, :-1] == 0)
    if gap.any():
        i, k = (int(v) for v in np.argwhere(gap)[0])
        return (f"row {i} has {plates.present[k + 1]} = 1 after {plates.present[k]} = 0; objects fill slots 0, 1, ... "
                f"without gaps (SCM {scm}'s object plates)")
    few = flags.sum(axis=1) < plates.min
    if few.any():
        i = int(np.flatnonzero(few)[0])
        return f"row {i} holds {int(flags[i].sum())} object(s) but SCM {scm} has at least {plates.min} (objects: min)"
    for names, flag in zip(plates.objects, plates.present, strict=True):
        for name in names:
            stray = (values[flag] == 0) & (values[name] != 0)
            if stray.any():
                i = int(np.flatnonzero(stray)[0])
                return (f"row {i} has {name} = {values[name][i]:g} but its object is absent ({flag} = 0); an absent "
                        "object's latents are 0")
    return None
