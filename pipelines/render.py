"""``ident3d render``: latents from an SCM -> Blender images -> a Zarr store, in parallel Dask chunks."""

from __future__ import annotations

import argparse
import os
import platform
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from causal import SCM, builtin_names, load_scm
from causal.errors import UserError

VIEW_PRESETS = ("positions", "hues", "rotations", "positions+hues", "rotations+hues", "positions+rotations")


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("ident3d", "bpy", "zarr", "numpy", "dask"):
        try:
            out["blender" if pkg == "bpy" else pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def parse_views(text: str | None, scm: SCM) -> dict[str, list[str]]:
    """``NAME:CHANGESET[,NAME:CHANGESET]`` (or a bare preset like ``hues``) -> {name: nodes}."""
    if not text:
        return {}
    views: dict[str, list[str]] = {}
    for item in text.split(","):
        name, _, change = item.strip().partition(":")
        change = change or name
        if not name.replace("_", "").replace("+", "").isalnum():
            raise UserError(f"--views: bad view name {name!r}; use NAME:CHANGESET, e.g. hues:hues")
        if name in views:
            raise UserError(f"--views: view {name!r} given twice")
        views[name] = scm.resolve(change)
    return views


def parse_meshes(items: list[str] | None) -> dict[str, str]:
    """``CLASS=PATH`` items -> {class: path}; files must exist."""
    out = {}
    for item in items or []:
        cls, sep, path = item.partition("=")
        if not sep or not cls or not path:
            raise UserError(f"--meshes: expected CLASS=PATH, got {item!r}")
        if not os.path.isfile(path):
            raise UserError(f"--meshes: mesh file for class {cls} not found: {path}")
        out[cls] = os.path.abspath(path)
    return out


def _check_scene_matches(scene: Any, scm: SCM) -> None:
    if tuple(scene.latent_names) != tuple(scm.names):
        raise UserError(f"scene {scene.name} binds latents {list(scene.latent_names)} but SCM {scm.name} "
                        f"samples {scm.names}; use a matching --scm or edit the scene's latents")
    if scm.class_names and len(scm.class_names) != len(scene.class_names):
        raise UserError(f"SCM {scm.name} has {len(scm.class_names)} classes but scene {scene.name} has "
                        f"{len(scene.class_names)}; use a matching --scm or scene")


def plan(args: argparse.Namespace) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Validate the command line and build (RenderJob, store attributes, store layout)."""
    from render.driver import RenderJob
    from render.scene import load_scene
    from render.settings import render_settings

    if args.n <= 0:
        raise UserError(f"--n must be a positive number of images, got {args.n}")
    if args.resolution is not None and args.resolution < 8:
        raise UserError(f"--resolution must be at least 8 px, got {args.resolution}")
    if args.samples is not None and args.samples < 1:
        raise UserError(f"--samples must be at least 1, got {args.samples}")
    if args.chunk_size <= 0 or (args.workers is not None and args.workers <= 0) or args.seed < 0:
        raise UserError("--chunk-size and --workers must be positive and --seed non-negative")
    scene = load_scene(args.scene)
    meshes = parse_meshes(args.meshes)
    if meshes:
        scene = scene.with_meshes(meshes)
    scm_name = args.scm or (scene.name if scene.name in builtin_names() else None)
    if scm_name is None:
        raise UserError(f"scene {scene.name} has no built-in SCM of the same name; pass --scm NAME|PATH")
    scm = load_scm(scm_name)
    _check_scene_matches(scene, scm)
    settings = render_settings(args.preset, resolution=args.resolution, samples=args.samples,
                               denoise=args.denoise, device=args.device)
    views = parse_views(args.views, scm)
    out = str(args.out)
    job = RenderJob(out=out, scene=scene.to_dict(), scm=scm.spec, settings=settings.to_dict(), n=args.n,
                    seed=args.seed, chunk_size=args.chunk_size, views=views)
    attrs = {
        "format_version": 1,
        "scene": scene.name,
        "scene_spec": job.scene,
        "scm": job.scm,
        "latent_names": scm.names,
        "latent_groups": {g: [m for m in ms if m in scm.names] for g, ms in scm.groups.items()
                          if any(m in scm.names for m in ms)},
        "class_node": scm.class_node,
        "class_names": scm.class_names,
        "meshes": {c["name"]: c["mesh"] for c in job.scene["classes"]},
        "change_sets": scm.change_sets,
        "render": job.settings,
        "seed": args.seed,
        "n": args.n,
        "chunk_size": args.chunk_size,
        "views": views,
        "software": _versions(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    layout = {"n": args.n, "chunk_size": args.chunk_size, "height": settings.resolution,
              "width": settings.resolution, "n_latents": len(scm.names),
              "has_classes": scm.class_node is not None, "views": list(views)}
    return job, attrs, layout


def default_workers(resolution: int) -> int:
    """Worker processes for a local cluster. Measured on 2 cores (benchmarks/render_bench.py): at 64 px one
    2-thread Blender gives 16.0 img/s vs 13.3 for two 1-thread ones; at 224 px two give 1.66 vs 0.90."""
    cores = os.cpu_count() or 1
    return cores if resolution >= 128 else max(1, cores // 2)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "render", help="render latents into a Zarr image store (parallel, resumable)",
        description="Sample latents from the scene's SCM, render them with Blender (Cycles) and write a "
                    "Zarr store in parallel Dask chunks. Re-running the same command resumes an "
                    "interrupted run; a store made with other settings is refused unless --overwrite.",
        epilog="examples:\n"
               "  ident3d render --scene causal3dident --n 1000 --out stores/c3d.zarr --workers 2\n"
               "  ident3d render --scene 3dident --n 256 --out stores/3di.zarr --views hues:hues,pos:positions\n"
               "  ident3d render --scene causal3dident --n 250000 --out s3://bucket/c3d.zarr "
               "--preset original --scheduler tcp://HOST:8786",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scene", default="causal3dident", metavar="NAME|PATH",
                   help="3dident, causal3dident or a scene YAML file (default causal3dident)")
    p.add_argument("--scm", metavar="NAME|PATH", help="SCM to sample (default: the scene's namesake)")
    p.add_argument("--n", type=int, required=True, help="number of images (anchors)")
    p.add_argument("--out", required=True, metavar="STORE", help="Zarr store: a folder or an fsspec URL")
    p.add_argument("--preset", default="fast", choices=("fast", "original"),
                   help="fast: 64 px, 16 samples + denoiser (default); original: the papers' 224 px, 512 samples")
    p.add_argument("--resolution", type=int, help="image size in px (overrides the preset)")
    p.add_argument("--samples", type=int, help="Cycles samples per pixel (overrides the preset)")
    p.add_argument("--denoise", action=argparse.BooleanOptionalAction, default=None,
                   help="OpenImageDenoise on/off (default: the preset's)")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto", help="Cycles device")
    p.add_argument("--seed", type=int, default=0, help="seed for latents and Cycles (default 0)")
    p.add_argument("--workers", type=int, default=None,
                   help="local Dask worker processes, one Blender each, sharing the cores (default: one per core "
                        "from 128 px up, one per two cores below, which measured fastest)")
    p.add_argument("--chunk-size", type=int, default=64, help="images per chunk/task (default 64)")
    p.add_argument("--views", metavar="NAME:CHANGESET[,...]",
                   help="also render exact LT counterparts, e.g. hues:hues,pos:positions+hues; "
                        f"presets: {', '.join(VIEW_PRESETS)}")
    p.add_argument("--meshes", nargs="+", metavar="CLASS=PATH",
                   help="your own meshes per class (OBJ/PLY/STL/glTF/.blend)")
    p.add_argument("--scheduler", metavar="ADDR", help="join an existing Dask cluster (tcp://HOST:PORT)")
    p.add_argument("--retries", type=int, default=2, help="retries of a failed chunk (default 2)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from render import driver

    job, attrs, layout = plan(args)
    workers = args.workers or default_workers(layout["height"])
    report = driver.run(job, attrs, layout, workers=workers, scheduler=args.scheduler,
                        overwrite=args.overwrite, retries=args.retries, progress=not args.no_progress)
    if not report.rendered and not report.failed:
        print(f"{job.out} is complete ({job.n} images, {job.n_chunks} chunks); nothing to do "
              "(--overwrite renders it again)")
        return 0
    rate = report.images / report.seconds if report.seconds else 0.0
    print(f"rendered {len(report.rendered)} chunks ({report.images} images) in {report.seconds:.1f} s "
          f"({rate:.1f} img/s); {len(report.skipped)} chunks were already done -> {job.out}")
    if report.failed:
        for k, err in sorted(report.failed.items()):
            print(f"chunk {k} failed: {err}")
        print(f"{len(report.failed)} chunk(s) failed: {sorted(report.failed)}; re-run the same command "
              "to retry them")
        return 1
    return 0
