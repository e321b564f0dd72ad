"""Render sequences of a dynamic SCM (e.g. Temporal Causal3DIdent) into a store: the rollout's frames in
(sequence x time) order as given latent rows, with per-row ``sequence``, ``time`` and ``interventions`` arrays,
chunked by whole sequences so no transition straddles a chunk; resumable and bit-identical however it is split,
like any render (each frame's Cycles seed is a function of its row)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal import load_scm
from ident3d.causal.errors import SpecError, UserError
from ident3d.causal.loading import load_dynamic_scm
from ident3d.jobs.cluster import CONNECT_TIMEOUT_S
from ident3d.render.api import check_chunk_memory, check_run_args, check_switches, plan_render
from ident3d.render.driver import run
from ident3d.render.job import RenderPlan, RenderReport
from ident3d.store.memory import check_fits
from ident3d.store.zarr_io import sequence_layout

# peak bytes per (frame, node) while a rollout is drawn and turned into store rows: the float32 latents and bool
# targets, each step's float64 draws, the flattened float32 copy, the interventions copy and the per-row int64 index,
# time and class arrays (measured 24.5 on temporal_causal3dident's 10 nodes, 800,000 frames; rounded up)
ROLLOUT_BYTES_PER_VALUE = 32


def _whole(value: Any, what: str, low: int) -> int:
    """An integer >= ``low`` (not a bool), else one line naming the setting."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise UserError(f"{what} must be a whole number >= {low}, got {value!r}")
    return int(value)


def plan_sequences(out: str | Path, scm: Any = "temporal_causal3dident", sequences: int = 8, length: int = 8,
                   seed: int = 0, scene: Any = None, settings: Any = None, preset: str = "fast",
                   sequences_per_chunk: int = 8, meshes: Any = None, meshes_dir: Any = None) -> RenderPlan:
    """Validate a sequence render and build its plan (nothing written): the rollout of ``sequences`` x ``length``
    steps from ``seed`` (sequence i depends only on (seed, i)), rendered with the scene of the SCM's name unless
    ``scene`` is given."""
    n_seq = _whole(sequences, "sequences", 1)
    steps = _whole(length, "length", 2)
    per_chunk = _whole(sequences_per_chunk, "sequences per chunk", 1)
    seed = _whole(seed, "seed", 0)
    try:
        dynamic = load_dynamic_scm(scm)
    except SpecError as exc:
        raise UserError(f"--scm: {exc}") from None
    check_chunk_memory(settings, preset, per_chunk * steps, "--sequences-per-chunk, --length")
    check_rollout(n_seq, steps, len(dynamic.names))
    rollout = dynamic.rollout(n_seq, steps, seed=seed)
    static = load_scm(dynamic.step0_spec())
    flat = rollout.latents.reshape(n_seq * steps, -1)
    cols = [rollout.names.index(name) for name in static.names]
    classes = None
    if static.class_node is not None:
        classes = flat[:, rollout.names.index(static.class_node)].astype(np.int64)
    extra = {"sequence": np.repeat(rollout.index, steps).astype(np.int64),
             "time": np.tile(np.arange(steps, dtype=np.int64), n_seq),
             "interventions": rollout.targets.reshape(n_seq * steps, -1).astype(bool)}
    plan = plan_render(out, scene=_scene_for(dynamic.name, scene), scm=static, latents=flat[:, cols].astype(np.float32),
                       classes=classes, settings=settings, preset=preset, seed=seed,
                       chunk_size=per_chunk * steps, meshes=meshes, meshes_dir=meshes_dir)
    record = {"spec": dynamic.spec, "sequences": n_seq, "length": steps, "seed": seed,
              "intervention_names": list(rollout.names)}
    attrs = _with_sequences(plan.attrs, record)
    layout = {**plan.layout, "extra": sequence_layout(len(rollout.names))}
    return RenderPlan(plan.job, attrs, layout, plan.latents, plan.classes, extra)


def check_rollout(sequences: int, length: int, nodes: int, available: int | None = None) -> None:
    """Refuse a rollout whose frames would not fit in memory (``ident3d.store.memory.check_fits``), before it is drawn:
    ``ROLLOUT_BYTES_PER_VALUE`` per frame and node of the dynamic SCM."""
    frames = sequences * length
    check_fits(frames * nodes * ROLLOUT_BYTES_PER_VALUE, f"--sequences {sequences:,} x --length {length:,} "
               f"({frames:,} frames of {nodes} nodes) need", "lower --sequences or --length", available)


def _scene_for(scm_name: str, scene: Any) -> Any:
    """The scene to render with: the one given, else the built-in scene of the SCM's name; an SCM without one
    (a user's own spec) is one line asking for ``--scene``."""
    from ident3d.render.scene import BUILTIN_SCENES

    if scene is not None:
        return scene
    if scm_name not in BUILTIN_SCENES:
        raise UserError(f"the dynamic SCM {scm_name!r} has no built-in scene of its name; give --scene, a scene YAML "
                        "that binds its latents in order (see render/scenes/temporal_causal3dident.yaml)")
    return scm_name


def _with_sequences(attrs: Any, record: dict[str, Any]) -> Any:
    """The plan's store attributes with the sequence record (and the latents' source named)."""
    return replace(attrs, sequences=record, latents_source=f"rollout of {record['spec'].get('name', 'a dynamic SCM')}")


def render_sequences(out: str | Path, scm: Any = "temporal_causal3dident", sequences: int = 8, length: int = 8,
                     seed: int = 0, scene: Any = None, settings: Any = None, preset: str = "fast",
                     sequences_per_chunk: int = 8, workers: int | None = None, scheduler: str | None = None,
                     threads: int | None = None, retries: int = 2, overwrite: bool = False, progress: bool = True,
                     connect_timeout: float = CONNECT_TIMEOUT_S, meshes: Any = None,
                     meshes_dir: Any = None, allow_blender_change: bool = False) -> RenderReport:
    """Render (or resume) a sequence store; arguments as :func:`plan_sequences`, plus where to run (as
    ``ident3d.render.render_store``)."""
    check_run_args(workers, threads, retries, connect_timeout, scheduler)
    check_switches(overwrite=overwrite, progress=progress, allow_blender_change=allow_blender_change)
    plan = plan_sequences(out, scm, sequences, length, seed, scene, settings, preset, sequences_per_chunk, meshes,
                          meshes_dir)
    return run(plan, workers=workers, scheduler=scheduler, overwrite=overwrite, retries=retries, progress=progress,
               connect_timeout=float(connect_timeout), threads=threads, allow_blender_change=allow_blender_change)
