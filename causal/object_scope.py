"""Object-wise change sets on an SCM with object plates: ``obj1:positions`` is the positions group (or any change
set, group or node) restricted to object 1's nodes (obj1_pos_x, obj1_pos_y, obj1_pos_z), ``shared:hues`` the same
restricted to the shared nodes (those in no object's plate and no ``present_k`` flag: spot_hue, bg_hue).

A latent transformation of such a set redraws only that object's (or the shared) latents, the exact LT view that
intervenes on one object; ``+`` joins parts as usual, each with its own prefix (``obj0:positions+obj1:hues``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ident3d.causal.errors import SpecError
from ident3d.causal.plates import Plates

SHARED = "shared"
_OBJECT = re.compile(r"^obj(\d+)$")


def is_scope(name: str) -> bool:
    """Whether ``name`` is an object prefix (``obj1``, ``shared``): a view named so reads as a misplaced prefix."""
    return name == SHARED or _OBJECT.match(name) is not None


def split_scope(part: str) -> tuple[str | None, str]:
    """('obj1', 'positions') for ``obj1:positions``, (None, part) for a part without a prefix: the prefix is read
    before the part's name is looked up, so a wrong prefix is named rather than an unknown node."""
    scope, sep, rest = part.partition(":")
    return (scope.strip(), rest.strip()) if sep else (None, part)


def scope_nodes(scope: str, part: str, plates: Plates | None, nodes: Iterable[str], scm: str,
                where: str) -> set[str]:
    """The nodes a prefix admits (object k's plate, or the shared nodes); a one-line SpecError for a prefix that is
    not ``objK``/``shared``, a slot the SCM lacks, an SCM without plates, or a second prefix."""
    if ":" in part.partition(":")[2]:
        raise SpecError(f"{where}: '{part}' has more than one prefix; write one per part, "
                        "e.g. obj0:positions+obj1:hues")
    match = _OBJECT.match(scope)
    if match is None and scope != SHARED:
        raise SpecError(f"{where}: unknown prefix '{scope}' in '{part}'; use objK: (object slot K, "
                        "e.g. obj1:positions) or shared: (the nodes of no object, e.g. shared:hues)")
    if plates is None:
        raise SpecError(f"{where}: '{part}' names an object prefix, but SCM {scm} has no object plates "
                        f"('objects:' and 'object_nodes:'); drop the '{scope}:' prefix")
    if match is None:
        owned = {n for names in plates.objects for n in names} | set(plates.present)
        return {n for n in nodes if n not in owned}
    slot = int(match.group(1))
    if slot >= plates.slots:
        raise SpecError(f"{where}: '{part}' names object {slot}, but SCM {scm} has object slots 0..{plates.slots - 1} "
                        f"(obj0..obj{plates.slots - 1}); use one of those")
    return set(plates.objects[slot])


def restrict(found: list[str], allowed: set[str], scope: str, part: str, where: str) -> list[str]:
    """``found`` (a set's nodes, in order) kept where the prefix admits them; refused in one line when none is."""
    kept = [n for n in found if n in allowed]
    if not kept:
        whose = "shared nodes" if scope == SHARED else f"nodes of object {scope[3:]}"
        shown = ", ".join(found[:3]) + (f", ... ({len(found)} nodes)" if len(found) > 3 else "")
        raise SpecError(f"{where}: '{part}' is empty: {part.partition(':')[2]} ({shown}) has no {whose}; "
                        "name a set, group or node that has some")
    return kept
