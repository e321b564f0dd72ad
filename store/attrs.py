"""The store's attributes (format v1) as one typed value: every writer builds it with a named constructor,
every reader gets it from :func:`read_attrs`, and the resume fingerprint is derived from its fields.

Keys are the attribute names on disk, so stores written before this module (and by other tools that follow
the README's format) read unchanged; keys a store lacks take the field's default.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from ident3d.causal.errors import UserError

FORMAT_VERSION = 1


def _fp(default: Any = MISSING, factory: Any = MISSING) -> Any:
    """A field that belongs to the fingerprint (stores differing in it are different renders)."""
    kw = {"default": default} if default is not MISSING else {"default_factory": factory} if factory is not MISSING \
        else {}
    return field(metadata={"fingerprint": True}, **kw)


@dataclass(frozen=True)
class StoreAttrs:
    """What a store is and how it was made. Fingerprint fields decide whether a run may resume on a store."""

    scene: str
    scene_spec: dict[str, Any] = _fp()
    scm: dict[str, Any] = _fp()
    n: int = _fp()
    chunk_size: int = _fp()
    latent_names: list[str] = field(default_factory=list)
    latent_groups: dict[str, list[str]] = field(default_factory=dict)
    class_node: str | None = None
    class_names: list[str] | None = None
    change_sets: dict[str, list[str]] = field(default_factory=dict)
    render: dict[str, Any] = _fp(factory=dict)
    seed: int = _fp(0)
    views: dict[str, list[str]] = _fp(factory=dict)
    view_seeds: str | None = _fp(None)
    meshes: dict[str, str] = field(default_factory=dict)
    mesh_sha256: dict[str, str] | None = _fp(None)
    meshes_dir: str | None = None
    latents_source: str = "scm"
    latents_sha256: str | None = _fp(None)
    label_names: dict[str, list[str]] | None = None  # converted datasets: each label's category names
    sequences: dict[str, Any] | None = _fp(None)  # sequence stores: the dynamic spec, sequences, length, seed
    placement: dict[str, Any] | None = _fp(None)  # renders with placement rules: the rules its rows keep
    # stores with captions: {"spec": the resolved caption spec, "names": the text_latents columns}
    text: dict[str, Any] | None = _fp(None)
    # views rendered by a second mechanism (ident3d.render.mechanisms): {view: {knob: value}}; null: none has one
    view_mechanisms: dict[str, dict[str, Any]] | None = _fp(None)
    # each view's latent blocks: {view: {shared|perturbed|specific: names}} (block_names order; default_view_blocks)
    view_blocks: dict[str, dict[str, list[str]]] = _fp(factory=dict)
    source_format: str | None = None  # imports: the published format, folder, layout and file hashes
    source: str | None = None
    source_layout: dict[str, Any] | None = None
    source_sha256: dict[str, str] | None = None
    software: dict[str, str] = field(default_factory=dict)
    created: str = ""
    format_version: int = _fp(FORMAT_VERSION)

    # ----- writing and reading ------------------------------------------------------------------------
    def to_attrs(self) -> dict[str, Any]:
        """The attributes to write (JSON values): every field, so every writer's store has the same keys."""
        return asdict(self)

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any], where: str = "the store") -> StoreAttrs:
        """Validate and type a store's attributes; a missing or mistyped key is one line naming the store."""
        if attrs.get("format_version") != FORMAT_VERSION:
            raise UserError(f"{where} is not an ident3d store of format v{FORMAT_VERSION}")
        missing = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
                   and f.name not in attrs]
        if missing:
            raise UserError(f"{where} lacks the attribute(s) {', '.join(missing)}; re-render or re-import it")
        for name, kind in _TYPES.items():
            if attrs.get(name) is not None and not isinstance(attrs[name], kind):
                raise UserError(f"{where}: attribute {name!r} should be a {kind.__name__}, "
                                f"got {type(attrs[name]).__name__}; re-render or re-import it")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in attrs.items() if k in known})

    def fingerprint(self) -> dict[str, Any]:
        """The values that must match for a run to resume (or be skipped) on an existing store; a key added to the
        format later is left out while it has its default, so digests of stores made before it stay the same."""
        return {k: getattr(self, k) for k in FINGERPRINT_KEYS if not self._implied(k)}

    def _implied(self, key: str) -> bool:
        """Whether fingerprint key ``key`` holds what a store made before it existed implies: an ADDED_LATER key its
        default, ``view_blocks`` nothing or the blocks its views' change sets imply (``default_view_blocks``)."""
        if key == "view_blocks":
            return self.view_blocks in ({}, default_view_blocks(self))
        return key in ADDED_LATER and getattr(self, key) == ADDED_LATER[key]

    def differences(self, other: StoreAttrs) -> list[str]:
        """Fingerprint keys whose values differ from ``other``'s (a key one of them implies counts as unset)."""
        mine, theirs = self.fingerprint(), other.fingerprint()
        return [k for k in FINGERPRINT_KEYS if mine.get(k, MISSING) != theirs.get(k, MISSING)]

    @property
    def blocks(self) -> dict[str, dict[str, list[str]]]:
        """Each view's latent blocks: as recorded, else (stores made before blocks were) implied by its change set."""
        return self.view_blocks or default_view_blocks(self)

    # ----- named constructors, one per writer ----------------------------------------------------------
    @classmethod
    def rendered(cls, scene: str, scene_spec: dict[str, Any], scm: Any, render: dict[str, Any], seed: int, n: int,
                 chunk_size: int, views: dict[str, list[str]], view_seeds: str | None, meshes: dict[str, str],
                 mesh_sha256: dict[str, str] | None, meshes_dir: str | None, latents_source: str,
                 latents_sha256: str | None, sequences: dict[str, Any] | None = None,
                 placement: dict[str, Any] | None = None, text: dict[str, Any] | None = None,
                 view_mechanisms: dict[str, dict[str, Any]] | None = None,
                 view_blocks: dict[str, dict[str, list[str]]] | None = None) -> StoreAttrs:
        """A store rendered by Blender from an SCM (or given latents, or a dynamic SCM's rolled-out ``sequences``)
        and a scene; ``placement``: the rules its rows were drawn to keep (``PlacementRules.to_dict``), None: none;
        ``text``: its captions' spec and text latent names (``ident3d.render.captions``), None: no captions;
        ``view_mechanisms``: the views' mechanisms (None: none has one); ``view_blocks``: the views' latent blocks
        (None: those their change sets imply)."""
        out = cls(scene=scene, scene_spec=scene_spec, render=render, seed=seed, n=n, chunk_size=chunk_size,
                  views=views, view_seeds=view_seeds, meshes=meshes, mesh_sha256=mesh_sha256, meshes_dir=meshes_dir,
                  latents_source=latents_source, latents_sha256=latents_sha256, sequences=sequences,
                  placement=placement, text=text, view_mechanisms=view_mechanisms or None, **_scm_fields(scm),
                  **_stamp())
        return replace(out, view_blocks=view_blocks or default_view_blocks(out))

    @classmethod
    def imported(cls, fmt: str, folder: str, layout: dict[str, Any], sha256: dict[str, str], scm: Any,
                 resolution: int, n: int, chunk_size: int, latents_source: str, latents_sha256: str,
                 text: dict[str, Any] | None = None) -> StoreAttrs:
        """A store imported from a published folder (3DIdent, Causal3DIdent, Multimodal3DIdent): where it came from,
        its SCM and (Multimodal3DIdent) its captions' text latent names."""
        return cls(scene="imported", scene_spec={"imported": fmt, "source": folder, "layout": layout},
                   render={"source": "imported", "resolution": resolution}, n=n, chunk_size=chunk_size,
                   latents_source=latents_source, latents_sha256=latents_sha256, source_format=fmt, source=folder,
                   source_layout=layout, source_sha256=sha256, text=text, **_scm_fields(scm), **_stamp())

    @classmethod
    def converted(cls, dataset: str, label_names: dict[str, list[str]], n: int, chunk_size: int,
                  source: str) -> StoreAttrs:
        """A labelled image dataset converted to a store: its labels become the latents of a small SCM spec (a
        categorical class node for the first label, one uniform node per label), so reports work unchanged."""
        main = next(iter(label_names))
        cats = label_names[main]
        nodes: list[dict[str, Any]] = [{"name": "class", "mechanism": {
            "type": "categorical", "categories": cats, "probs": [1.0 / len(cats)] * len(cats)}}]
        nodes += [{"name": k, "range": [0, max(1, len(v) - 1)], "mechanism": {"type": "uniform"}}
                  for k, v in label_names.items()]
        return cls(scene=f"dataset:{dataset}", scene_spec={"dataset": dataset},
                   scm={"name": dataset, "class_node": "class", "nodes": nodes}, latent_names=list(label_names),
                   class_node="class", class_names=cats, label_names=label_names, render={"source": source},
                   n=n, chunk_size=chunk_size, latents_source=source, **_stamp())


# fingerprint fields added after stores were first made, with their default (and view_blocks: see _implied)
ADDED_LATER = {"sequences": None, "placement": None, "text": None, "view_mechanisms": None}
FINGERPRINT_KEYS = tuple(f.name for f in fields(StoreAttrs) if f.metadata.get("fingerprint"))
_TYPES: dict[str, type] = {"scene": str, "scene_spec": dict, "scm": dict, "latent_names": list, "n": int,
                           "chunk_size": int, "latent_groups": dict, "class_names": list, "render": dict,
                           "views": dict, "meshes": dict, "software": dict, "sequences": dict,
                           "placement": dict, "text": dict, "view_mechanisms": dict, "view_blocks": dict}
BLOCKS = ("shared", "perturbed", "specific")  # a latent's block in a view: same in both images, changed, one-sided


def block_names(latent_names: list[str], class_node: str | None) -> list[str]:
    """The names view blocks sort: the class node (if any) first, then the latent columns."""
    return ([class_node] if class_node else []) + list(latent_names)


def latent_blocks(names: list[str], change: list[str], specific: list[str] | tuple[str, ...] = ()) -> dict[
        str, list[str]]:
    """One view's blocks over ``names``: ``perturbed`` the change set, ``specific`` as given, ``shared`` the rest."""
    return {"shared": [n for n in names if n not in change and n not in specific],
            "perturbed": [n for n in names if n in change], "specific": [n for n in names if n in specific]}


def default_view_blocks(attrs: StoreAttrs) -> dict[str, dict[str, list[str]]]:
    """The blocks a store's views' change sets imply: changed latents perturbed, none specific, the rest shared."""
    names = block_names(attrs.latent_names, attrs.class_node)
    return {view: latent_blocks(names, change) for view, change in attrs.views.items()}


def _scm_fields(scm: Any) -> dict[str, Any]:
    """The attributes an SCM (``causal.SCM``) gives a store: its spec, latent names, groups, class and change sets."""
    return {"scm": scm.spec, "latent_names": list(scm.names),
            "latent_groups": {g: [m for m in ms if m in scm.names] for g, ms in scm.groups.items()
                              if any(m in scm.names for m in ms)},
            "class_node": scm.class_node, "class_names": scm.class_names, "change_sets": scm.change_sets}


def _stamp() -> dict[str, Any]:
    """The software versions a store was made with and when."""
    return {"software": software_versions(), "created": datetime.now(UTC).isoformat(timespec="seconds")}


def software_versions() -> dict[str, str]:
    """Versions of Python and the packages a store was made with."""
    out = {"python": platform.python_version()}
    for pkg in ("ident3d", "bpy", "zarr", "numpy", "dask"):
        try:
            out["blender" if pkg == "bpy" else pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out["blender" if pkg == "bpy" else pkg] = "unknown"
    return out


BLENDER_SEP = ", "  # between the Blender versions of a store resumed with --allow-blender-change


def check_blender_resume(group: Any, allow: bool, where: str) -> None:
    """Resuming a store rendered by another Blender (its ``software`` stamp) mixes two renderers' images: refused in
    one line unless ``allow``; allowed, the stamp then lists every version that rendered into it ("5.0.1, 5.3.0"),
    and any of them may resume it. A stamp or a Python without bpy ("unknown") is not compared."""
    recorded = read_attrs(group, where).software
    had, now = recorded.get("blender", "unknown"), software_versions()["blender"]
    if "unknown" in (had, now) or now in had.split(BLENDER_SEP):
        return
    if not allow:
        raise UserError(f"{where} was rendered with Blender {had} but this is Blender {now}, whose images may differ; "
                        "resume it where it was made, render into another --out, or pass --allow-blender-change "
                        "to mix the two")
    group.attrs["software"] = {**recorded, "blender": f"{had}{BLENDER_SEP}{now}"}


def read_attrs(group: Any, where: str | None = None) -> StoreAttrs:
    """The typed attributes of an open Zarr group (``where``: the store's name in errors)."""
    return StoreAttrs.from_attrs(dict(group.attrs), where or str(getattr(group.store, "root", "the store")))
