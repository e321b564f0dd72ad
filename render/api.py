"""The Python render API: ``render_store`` renders latents (sampled or given) into a Zarr store in parallel
Dask chunks; ``plan_render`` validates the same arguments and builds the job, store attributes and layout
without rendering. ``ident3d render`` is a thin command-line skin over these two.

    import ident3d
    report = ident3d.render_store("stores/c3d.zarr", scene="causal3dident", n=1000, views="hues:hues",
                                  settings={"resolution": 32, "samples": 8})
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal import SCM, Samples, builtin_names, load_scm
from ident3d.causal.errors import Note, UserError
from ident3d.causal.object_scope import is_scope
from ident3d.causal.scm import CONDITIONALS
from ident3d.jobs.cluster import CONNECT_TIMEOUT_S
from ident3d.render.driver import check_memory, run
from ident3d.render.job import VIEW_SEEDS, RenderJob, RenderPlan, RenderReport
from ident3d.render.latents_io import GivenLatents, given_latents
from ident3d.render.mechanisms import VIEW_KEYS, ViewSpec, check_mechanism, split_view, view_blocks, view_scene
from ident3d.render.meshes import MeshFolder, file_sha256, find_class_meshes, sniff_mesh
from ident3d.render.placement import preflight, render_rules, rules_breach
from ident3d.render.placement_rules import PlacementRules
from ident3d.render.scene import Scene, load_scene, scene_from_dict
from ident3d.render.settings import RenderSettings, settings_from
from ident3d.render.text_plan import TextArg, plan_text
from ident3d.store.attrs import StoreAttrs, block_names
from ident3d.store.zarr_io import is_url

VIEW_PRESETS = ("positions", "hues", "rotations", "positions+hues", "rotations+hues", "positions+rotations")

SceneArg = str | Path | Scene | Mapping[str, Any]
ScmArg = str | Path | SCM | Mapping[str, Any] | None
LatentsArg = str | Path | np.ndarray | Samples | None
SettingsArg = RenderSettings | Mapping[str, Any] | None
ViewsArg = str | Mapping[str, str | Sequence[str] | Mapping[str, Any]] | None
MeshesArg = Mapping[str, str | Path] | Sequence[str] | None
MeshesDirArg = str | Path | None
SupportArg = Mapping[str, Mapping[str, Sequence[float]]] | None


def render_store(out: str | Path, scene: SceneArg = "causal3dident", scm: ScmArg = None, n: int | None = None,
                 latents: LatentsArg = None, classes: np.ndarray | None = None, settings: SettingsArg = None,
                 preset: str = "fast", seed: int = 0, chunk_size: int = 64, views: ViewsArg = None,
                 meshes: MeshesArg = None, view_seeds: str = "independent", workers: int | None = None,
                 scheduler: str | None = None, retries: int = 2, overwrite: bool = False,
                 progress: bool = True, connect_timeout: float = CONNECT_TIMEOUT_S,
                 meshes_dir: MeshesDirArg = None, threads: int | None = None,
                 view_conditional: str | None = None, allow_blender_change: bool = False,
                 support: SupportArg = None, text: TextArg = None) -> RenderReport:
    """Render a store (or resume it: chunks already done are skipped) and report what was done.

    Arguments are those of :func:`plan_render`, plus where to run: ``workers`` local processes (None:
    ``ident3d.render.driver.default_workers``; one renders in this process, without a cluster), or an existing cluster's
    ``scheduler`` address (given up after ``connect_timeout`` seconds, before anything is written); ``threads``
    Cycles threads per worker (None: the cores split evenly between local workers; with a scheduler, each
    worker's Dask thread count); ``retries`` of a failing
    chunk; ``overwrite`` an existing store made with other settings; ``allow_blender_change``: resume a store another
    Blender version rendered (refused otherwise: the images would differ). Failed chunks are listed in the report
    (``report.ok`` is False); re-running retries them. Errors no retry can fix (a bad mesh, a full disk) stop the
    run with a one-line ``UserError``; finished chunks are kept, so a re-run resumes.
    """
    check_run_args(workers, threads, retries, connect_timeout, scheduler)
    check_switches(overwrite=overwrite, progress=progress, allow_blender_change=allow_blender_change)
    plan = plan_render(out, scene=scene, scm=scm, n=n, latents=latents, classes=classes, settings=settings,
                       preset=preset, seed=seed, chunk_size=chunk_size, views=views, meshes=meshes,
                       view_seeds=view_seeds, meshes_dir=meshes_dir, view_conditional=view_conditional,
                       support=support, text=text)
    return run(plan, workers=workers, scheduler=scheduler, overwrite=overwrite, retries=retries, progress=progress,
               connect_timeout=float(connect_timeout), threads=threads, allow_blender_change=allow_blender_change)


def check_run_args(workers: int | None, threads: int | None, retries: int, connect_timeout: float,
                   scheduler: str | None = None) -> None:
    """Where-to-run settings of any render: one line for a bad value, before anything is planned or written."""
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise UserError(f"scheduler must be a Dask scheduler's address (text, e.g. tcp://HOST:8786), got {scheduler!r}")
    if workers is not None and (not _is_int(workers) or workers <= 0):
        raise UserError(f"workers must be a positive number of processes, got {workers!r}")
    if threads is not None and (not _is_int(threads) or threads <= 0):
        raise UserError(f"threads must be a positive number of threads per worker, got {threads!r}")
    if not _is_int(retries) or retries < 0:
        raise UserError(f"retries must be a non-negative integer, got {retries!r}")
    if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int | float) or not connect_timeout > 0:
        raise UserError(f"connect timeout must be a positive number of seconds, got {connect_timeout!r}")


def check_switches(**switches: object) -> None:
    """On/off arguments of a render are bools: ``overwrite="no"`` is truthy and would replace a store, so anything but
    True or False is one line naming the argument."""
    for name, value in switches.items():
        if not isinstance(value, bool | np.bool_):
            raise UserError(f"{name} must be True or False, got {value!r}")


def plan_render(out: str | Path, scene: SceneArg = "causal3dident", scm: ScmArg = None, n: int | None = None,
                latents: LatentsArg = None, classes: np.ndarray | None = None, settings: SettingsArg = None,
                preset: str = "fast", seed: int = 0, chunk_size: int = 64, views: ViewsArg = None,
                meshes: MeshesArg = None, view_seeds: str = "independent",
                meshes_dir: MeshesDirArg = None, view_conditional: str | None = None,
                support: SupportArg = None, text: TextArg = None) -> RenderPlan:
    """Validate a render and build its job, store attributes and layout; nothing is written.

    ``scene``: a built-in name, a scene YAML path, a ``Scene`` or its dict. ``scm``: name, path, dict or SCM
    (default: the scene's namesake). Rows: ``n`` sampled from the SCM with ``seed``, or ``latents`` given as a
    .csv/.npy/.npz path, an (N, D) array (+ ``classes``) or ``causal.Samples`` (``n`` may then be left out).
    ``settings``: a ``RenderSettings``, or overrides of ``preset`` (``{"resolution": 32, "hue_mode": ...}``).
    ``views``: exact LT views, ``"hues:hues,pos:positions"`` or ``{name: change set}``, each optionally rendered by a
    second mechanism (another material, camera or lighting: ``"metal@material=metallic,near@camera=near:positions"``
    or ``{name: {"changes": ..., "mechanism": {...}, "specific": [...]}}``; ``ident3d.render.mechanisms``). ``meshes``:
    ``{class: path}`` or ``["CLASS=PATH"]``. ``meshes_dir``: a folder of per-class mesh files matched by name
    (render.meshes.find_class_meshes; classes without a file keep their stand-in, ``meshes`` entries win over
    the folder's). ``view_seeds``: 'independent' (each view has its own Cycles noise) or 'shared' (a view
    reuses its anchor's seeds). ``view_conditional``: ``"normal:SCALE"`` or ``"laplace:SCALE"``, the views' p(z~ | z)
    around each changed latent, truncated to its range (default: the SCM's ``transform``, SPEC's N(z, 1)); it is
    written into the store's SCM spec, so resuming with another is refused and LT-NN training pairs use it too.
    ``support``: a support region, ``{"exclude": {NAME: [LOW, HIGH], ...}}`` (rows with every listed latent inside
    are redrawn) or ``{"only": {...}}`` (only such rows are kept), added to the scene's placement rules
    (``ident3d.render.placement``); rows breaking the rules are redrawn, and rules too strict to be kept are refused
    here. Given latents cannot be redrawn: they must keep the SCM's support (``ident3d.causal.support``) and the
    scene's latent rules, or the first row that breaks one is refused; ``min_visible`` and the rules of their views are
    not applied to them, which a :class:`RenderNote` warning says (a ``support`` argument is refused).
    ``text``: the captions each anchor image pairs with, a caption spec (a built-in name, a YAML file or a mapping;
    ``ident3d.render.captions``); None: the scene's (``text:`` in the scene), False: none. The store then has ``text``
    and ``text_latents`` arrays. Bad input raises a one-line ``UserError``.
    """
    where = store_path(out)
    if n is not None and (not _is_int(n) or n <= 0):
        raise UserError(f"n must be a positive number of images, got {n!r}")
    if not _is_int(chunk_size) or chunk_size <= 0:
        raise UserError(f"chunk size must be a positive number of images, got {chunk_size!r}")
    if not _is_int(seed) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}")
    if view_seeds not in VIEW_SEEDS:
        raise UserError(f"view seeds must be one of {', '.join(VIEW_SEEDS)}, got {view_seeds!r}")
    the_scene, folder = scene_with_meshes(scene, meshes, meshes_dir)
    the_scm = with_conditional(_scm(scm, the_scene), view_conditional)
    check_scene_matches(the_scene, the_scm)
    the_settings = settings_from(settings, preset)
    specs = view_specs(views, the_scm)
    for name, spec in specs.items():
        view_scene(the_scene, spec.mechanism, name)  # a mechanism the scene cannot take: refused before anything runs
    the_views = {name: spec.change for name, spec in specs.items()}
    given = _given(latents, classes, n, the_scm)
    n = len(given) if given is not None else n
    if n is None:
        raise UserError("give n (images to sample) or latents (rows to render)")
    rules = _placement(the_scene, the_scm, support, given, n, seed, the_views)
    the_text = plan_text(text, the_scene, the_scm)
    job = RenderJob(out=where, scene=the_scene.to_dict(), scm=the_scm.spec,
                    settings=the_settings.to_dict(), n=n, seed=seed, chunk_size=chunk_size, views=the_views,
                    view_seeds=view_seeds, given=given is not None,
                    placement=None if rules is None else rules.to_dict(), text=the_text,
                    mechanisms={name: spec.mechanism for name, spec in specs.items() if spec.mechanism})
    layout = {"n": n, "chunk_size": chunk_size, "height": the_settings.resolution, "width": the_settings.resolution,
              "n_latents": len(the_scm.names), "has_classes": the_scm.class_node is not None,
              "views": list(the_views), "slots": the_scene.slots, "placement": rules is not None,
              "text_latents": None if the_text is None else len(the_text["names"])}
    check_memory(layout, workers=1)
    attrs = store_attrs(job, the_scene, the_scm, given, folder.folder if folder else None,
                        {name: spec.blocks for name, spec in specs.items()})
    return RenderPlan(job, attrs, layout,
                      None if given is None else given.latents, None if given is None else given.classes)


def _placement(scene: Scene, scm: SCM, support: SupportArg, given: GivenLatents | None, n: int, seed: int,
               views: dict[str, list[str]]) -> PlacementRules | None:
    """The placement rules a render applies (the scene's, with ``support``), checked by the preflight before anything
    is written; None without rules, and for given latents, which cannot be redrawn: they must keep the scene's latent
    rules (:func:`check_given_rows`; a ``support`` argument is refused)."""
    if given is not None:
        if support is not None:
            raise UserError("a support region selects sampled rows, but given latents are rendered as given; drop "
                            "the support (--support-exclude / --support-only) or sample the rows (--n)")
        check_given_rows(scene, scm, given, views)
        return None
    if support is not None and not isinstance(support, Mapping):
        raise UserError(f"support must be a mapping {{exclude|only: {{NAME: [LOW, HIGH]}}}}, got {support!r}")
    rules = render_rules(scene, support, scm.names)
    if rules is not None:
        preflight(rules, scene, scm, n, seed, views)
    return rules


def check_given_rows(scene: Scene, scm: SCM, given: GivenLatents, views: dict[str, list[str]]) -> None:
    """Given rows keep the scene's latent placement rules (min_distance, support), or the first that breaks one is
    refused in one line naming it and the rule; the rules they cannot be held to (``min_visible``, judged on rendered
    images, and the rules for ``views``, drawn by the render) are named in a :class:`RenderNote`."""
    rules = scene.placement
    if rules is None or not rules.active:
        return
    breach = rules_breach(rules, scene, given.latents, given.classes)
    if breach is not None:
        raise UserError(f"given latents ({given.source}): {breach}; move the row into the rules or drop it "
                        f"(`ident3d sample --scene {scene.name}` draws rows that keep them, as render --n does)")
    skipped = [f"min_visible {rules.min_visible:g} (judged on rendered images; the store's visibility array counts "
               "each object's pixels)"] if rules.min_visible > 0 else []
    latent_rules = " and ".join(r for r in (f"min_distance {rules.min_distance:g}" if rules.min_distance > 0 else "",
                                            "support" if rules.support else "") if r)
    skipped += [f"{latent_rules} to the rows of views {', '.join(views)} (drawn by the render, kept as drawn)"] \
        if views and latent_rules else []
    if skipped:
        warnings.warn(RenderNote(f"given latents are rendered as given, so these placement rules of scene {scene.name} "
                                 f"are not applied: {'; '.join(skipped)}"), stacklevel=3)


class RenderNote(Note):
    """A rule a render cannot apply to its rows, said once before rendering (``ident3d render`` prints it as a
    'note:' line; Python callers see a warning)."""


def check_chunk_memory(settings: SettingsArg, preset: str, chunk_size: int, chunk_flags: str) -> None:
    """One render worker's memory (``ident3d.render.driver.check_memory``) for chunks of ``chunk_size`` images at the
    resolution of ``settings`` / ``preset``: for a caller that checks it before building the rows it renders (a
    sequence render, before its rollout), naming its own ``chunk_flags``."""
    check_memory({"height": settings_from(settings, preset).resolution, "chunk_size": chunk_size}, workers=1,
                 chunk_flags=chunk_flags)


def store_path(out: str | Path) -> str:
    """Where workers open the store: a local path made absolute (workers of an existing cluster run in their own
    working directories), a URL as given; ``out`` that is not a non-empty path or text (``5`` would make a store
    named ``5``, ``""`` the working directory) is one line."""
    path = os.fspath(out) if isinstance(out, os.PathLike) else out
    if not isinstance(path, str) or not path.strip():
        raise UserError(f"out must be the store's path or URL (text or a pathlib.Path), got {out!r}")
    return path if is_url(path) else os.path.abspath(os.path.expanduser(path))


def check_mesh_files(scene: Scene) -> None:
    """Every class's mesh file exists and looks like its format (render.meshes.sniff_mesh): checked once here,
    before any store is created, rather than failing in every render worker."""
    for c in scene.classes:
        if not c.mesh.startswith("builtin:"):
            sniff_mesh(c.mesh, c.name)


def store_attrs(job: RenderJob, scene: Scene, scm: SCM, given: GivenLatents | None,
                meshes_dir: str | None, blocks: dict[str, dict[str, list[str]]] | None = None) -> StoreAttrs:
    """The rendered store's self-description (``ident3d.store.attrs.StoreAttrs.rendered``); ``blocks``: its views'
    latent blocks (None: those their change sets imply)."""
    return StoreAttrs.rendered(
        scene=scene.name, scene_spec=job.scene, scm=scm, render=job.settings, seed=job.seed, n=job.n,
        chunk_size=job.chunk_size, views=job.views, view_seeds=job.view_seeds,
        meshes={c["name"]: c["mesh"] for c in job.scene["classes"]}, mesh_sha256=mesh_hashes(scene),
        meshes_dir=meshes_dir, latents_source="scm" if given is None else given.source,
        latents_sha256=None if given is None else given.sha256(), placement=job.placement, text=job.text,
        view_mechanisms=job.mechanisms, view_blocks=blocks)


def parse_views(views: ViewsArg, scm: SCM) -> dict[str, list[str]]:
    """The views' change sets, {name: changed nodes}, of ``views`` as :func:`view_specs` reads them."""
    return {name: spec.change for name, spec in view_specs(views, scm).items()}


def view_specs(views: ViewsArg, scm: SCM) -> dict[str, ViewSpec]:
    """``"NAME[@KNOB=VALUE...][:CHANGESET][,...]"`` or ``{name: change | {changes, mechanism, shared, perturbed,
    specific}}`` -> {name: ViewSpec}. A bare preset like ``"hues"`` names itself; with a mechanism (``@``) and no
    change set a view changes no latent (``ident3d.render.mechanisms``). NAME ends at the first colon, so CHANGESET may
    hold object prefixes (``moved:obj1:positions``); a NAME that reads as one (``obj1:positions``) is refused, as it
    would name a view."""
    if not views:
        return {}
    items = views.items() if isinstance(views, Mapping) else [
        (name, {"changes": change, "mechanism": knobs})
        for name, change, knobs in map(split_view, str(views).split(","))]
    out: dict[str, ViewSpec] = {}
    for name, view in items:
        declared = view if isinstance(view, Mapping) else {"changes": view}
        change = declared.get("changes", [])
        if not isinstance(name, str) or not name.replace("_", "").replace("+", "").isalnum():
            raise UserError(f"views: bad view name {name!r}; use NAME:CHANGESET, e.g. hues:hues, or "
                            "NAME@KNOB=VALUE:CHANGESET, e.g. metal@material=metallic")
        if not isinstance(views, Mapping) and scm.plates is not None and is_scope(name):
            raise UserError(f"views: {name}:{change} would name a view {name!r} that changes all {change}; give the "
                            f"view a name first, NAME:{name}:{change}, e.g. moved:{name}:{change}")
        if name in out:
            raise UserError(f"views: view {name!r} given twice")
        if unknown := [k for k in declared if k not in VIEW_KEYS]:
            raise UserError(f"views: view {name!r}: unknown key {unknown[0]!r}; a view has {', '.join(VIEW_KEYS)}")
        if not isinstance(change, str) and not (isinstance(change, Sequence) and all(isinstance(c, str)
                                                                                     for c in change)):
            raise UserError(f"views: view {name!r} must change a change set (text) or a list of node names, "
                            f"got {change!r}")
        if isinstance(change, str) and "@" in change:
            raise UserError(f"views: view {name!r}: a mechanism goes after the name, NAME@KNOB=VALUE:CHANGESET, "
                            f"e.g. near@camera=near:positions; got the change set {change!r}")
        nodes = scm.resolve(change) if change else []
        out[name] = ViewSpec(nodes, check_mechanism(declared.get("mechanism"), name),
                             view_blocks(block_names(scm.names, scm.class_node), nodes, declared, name))
    return out


def parse_meshes(meshes: MeshesArg) -> dict[str, str]:
    """``{class: path}`` or ``["CLASS=PATH", ...]`` -> {class: absolute path}; the files must exist."""
    if not meshes:
        return {}
    if isinstance(meshes, Mapping):
        bad = [p for p in meshes.values() if not isinstance(p, str | os.PathLike)]
        if bad:
            raise UserError(f"meshes: a class's mesh must be a file path, got {bad[0]!r}")
        pairs = [(str(c), str(p)) for c, p in meshes.items()]
    elif isinstance(meshes, str) or not isinstance(meshes, Sequence):
        raise UserError(f"meshes must be {{CLASS: PATH}} or a list of 'CLASS=PATH', got {meshes!r}")
    else:
        pairs = []
        for item in meshes:
            cls, sep, path = str(item).partition("=")
            if not sep or not cls or not path:
                raise UserError(f"meshes: expected CLASS=PATH, got {item!r}")
            pairs.append((cls, path))
    for cls, path in pairs:
        if not os.path.isfile(path):
            raise UserError(f"meshes: mesh file for class {cls} not found: {path}")
    return {cls: os.path.abspath(path) for cls, path in pairs}


def check_scene_matches(scene: Scene, scm: SCM) -> None:
    """The scene binds the SCM's latents in order, has as many object classes as the SCM, and a scene with object
    slots renders an SCM with object plates (whose presence rules give the slots' flags their meaning)."""
    if tuple(scene.latent_names) != tuple(scm.names):
        raise UserError(f"scene {scene.name} binds latents {list(scene.latent_names)} but SCM {scm.name} "
                        f"samples {scm.names}; use a matching SCM or edit the scene's latents")
    if scm.class_names and len(scm.class_names) != len(scene.class_names):
        raise UserError(f"SCM {scm.name} has {len(scm.class_names)} classes but scene {scene.name} has "
                        f"{len(scene.class_names)}; use a matching SCM or scene")
    if scene.objects is not None and scm.plates is None:
        flags = scene.objects.present.replace("{k}", "K")
        raise UserError(f"scene {scene.name} has object slots but SCM {scm.name} has no object plates ('objects:' and "
                        f"'object_nodes:'), so nothing holds its {flags} columns to what a slot's flag means (0 or 1, "
                        "slots filled from 0, an absent object's latents 0); write the SCM with plates (`ident3d scm "
                        "show multi3dident_independent --yaml`)")
    for b in scene.bindings:  # object slots' class latents: as many categories as the scene has classes
        cats = scm.nodes[b.name].mechanism.categories if b.target.endswith(".class") else None
        if cats is not None and len(cats) != len(scene.class_names):
            raise UserError(f"SCM {scm.name}'s {b.name} has {len(cats)} categories but scene {scene.name} has "
                            f"{len(scene.class_names)} classes; use a matching SCM or scene")


def mesh_hashes(scene: Scene) -> dict[str, str] | None:
    """sha256 of each class's mesh file ({class: hex}); None when every class uses a built-in mesh, which is what
    stores made before mesh hashes were recorded hold, so they still resume."""
    files = {c.name: file_sha256(c.mesh) for c in scene.classes if not c.mesh.startswith("builtin:")}
    return files or None


def scene_with_meshes(scene: SceneArg, meshes: MeshesArg = None,
                      meshes_dir: MeshesDirArg = None) -> tuple[Scene, MeshFolder | None]:
    """The scene with its classes' mesh files put in (``meshes_dir`` matched by name, then ``meshes`` on top)
    and checked (render.meshes.sniff_mesh), and the folder match (None without ``meshes_dir``)."""
    if isinstance(scene, Scene):
        out = scene
    elif isinstance(scene, Mapping):
        out = scene_from_dict(scene)
    elif isinstance(scene, str | os.PathLike):
        out = load_scene(scene)
    else:
        raise UserError(f"scene must be a built-in scene's name, a scene YAML path, a Scene or its dict, got {scene!r}")
    if meshes_dir is not None and not isinstance(meshes_dir, str | os.PathLike):
        raise UserError(f"meshes_dir must be a folder's path, got {meshes_dir!r}")
    folder = find_class_meshes(meshes_dir, out.class_names) if meshes_dir is not None else None
    found = {**(folder.found if folder else {}), **parse_meshes(meshes)}
    out = out.with_meshes(found) if found else out
    check_mesh_files(out)
    return out, folder


def mesh_summary(scene: Scene, folder: MeshFolder | None = None) -> str:
    """One line saying which classes use a mesh file and which their stand-in (and which files were ignored)."""
    files = [f"{c.name} <- {Path(c.mesh).name}" for c in scene.classes if not c.mesh.startswith("builtin:")]
    standins = [c.name for c in scene.classes if c.mesh.startswith("builtin:")]
    line = f"meshes: {', '.join(files) or 'none'}"
    line += f" (from {folder.folder})" if folder else ""
    line += f"; stand-ins: {', '.join(standins) or 'none'}"
    if folder and folder.ignored:
        line += f"; ignored (no class of that name): {', '.join(folder.ignored)}"
    return line


def with_conditional(scm: SCM, conditional: str | None) -> SCM:
    """``scm`` with its latent transformation's conditional set from ``"normal:SCALE"`` / ``"laplace:SCALE"``."""
    if conditional is None:
        return scm
    kind, _, scale = str(conditional).partition(":")
    try:
        value = float(scale)
    except ValueError:
        value = float("nan")
    if kind not in CONDITIONALS or not math.isfinite(value) or value <= 0:
        raise UserError(f"--view-conditional must be KIND:SCALE with KIND one of {', '.join(CONDITIONALS)} and a "
                        f"positive SCALE, e.g. normal:0.1, got {conditional!r}")
    transform = {**(scm.spec.get("transform") or {}), "conditional": kind, "sigma": value}
    return SCM({**scm.spec, "transform": transform})


def _scm(scm: ScmArg, scene: Scene) -> SCM:
    """The SCM to sample: given, or the built-in of the scene's name."""
    if isinstance(scm, SCM):
        return scm
    if scm is None:
        if scene.name not in builtin_names():
            fits = [n for n in builtin_names() if n.startswith(f"{scene.name}_")]  # e.g. multi3dident_causal
            raise UserError(f"scene {scene.name} has no built-in SCM of the same name; give the SCM (name or path)"
                            + (f", e.g. {' or '.join(fits)}" if fits else ""))
        scm = scene.name
    return load_scm(scm)


def _given(latents: LatentsArg, classes: np.ndarray | None, n: int | None, scm: SCM) -> GivenLatents | None:
    """Given latent rows checked against the SCM and n; None when rows are to be sampled."""
    if latents is None:
        if classes is not None:
            raise UserError("classes= goes with latents=; to sample rows give n only")
        return None
    given = given_latents(latents, classes, scm)
    if n is not None and n != len(given):
        raise UserError(f"n={n} but the latents ({given.source}) have {len(given)} rows; leave n out to render "
                        "them all")
    return given


def _is_int(x: object) -> bool:
    """An integer (Python or NumPy), not a bool."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool)
