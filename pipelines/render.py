"""``ident3d render``: the command-line skin over ``ident3d.render.render_store`` (latents -> Blender -> Zarr store)."""

from __future__ import annotations

import argparse

from ident3d.causal.errors import UserError
from ident3d.jobs.cluster import CONNECT_TIMEOUT_S
from ident3d.pipelines.notes import notes_printed
from ident3d.render.api import VIEW_PRESETS, mesh_summary, render_store, scene_with_meshes
from ident3d.render.job import VIEW_SEEDS, RenderReport
from ident3d.render.mechanisms import CAMERAS
from ident3d.render.placement_rules import support_from_flags
from ident3d.render.scene import MATERIAL_KINDS
from ident3d.render.sequences import render_sequences
from ident3d.render.settings import HUE_MODES


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``ident3d render`` and its options."""
    p = sub.add_parser(
        "render", help="render latents into a Zarr image store (parallel, resumable)",
        description="Sample latents from the scene's SCM (or read them from --latents FILE), render them with "
                    "Blender (Cycles) and write a Zarr store in parallel Dask chunks. Re-running the same command "
                    "resumes an interrupted run; a store made with other settings is refused unless --overwrite.",
        epilog="examples:\n"
               "  ident3d render --scene causal3dident --n 1000 --out stores/c3d.zarr --workers 2\n"
               "  ident3d render --scene 3dident --n 256 --out stores/3di.zarr --views hues:hues,pos:positions\n"
               "  ident3d render --scene causal3dident --latents my_latents.csv --out stores/mine.zarr\n"
               "  ident3d render --scene causal3dident --n 1000 --out stores/scans.zarr --meshes-dir ~/shapes\n"
               "  ident3d render --scene multi3dident --scm multi3dident_independent --n 1000 --out stores/m.zarr "
               "--support-exclude obj0_pos_x=0.2:1,obj1_pos_x=0.2:1\n"
               "  ident3d render --scene causal3dident --n 250000 --out s3://bucket/c3d.zarr "
               "--preset original --scheduler tcp://HOST:8786\n"
               "  ident3d render --scm temporal_causal3dident --sequences 500 --length 8 --resolution 64 "
               "--out stores/tc3d.zarr",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scene", metavar="NAME|PATH",
                   help="3dident, causal3dident, temporal_causal3dident or a scene YAML file (default causal3dident; "
                        "with --sequences, the dynamic SCM's namesake)")
    p.add_argument("--scm", metavar="NAME|PATH", help="SCM to sample (default: the scene's namesake)")
    p.add_argument("--n", type=int, help="number of images (anchors) to sample; with --latents, absent or the "
                                         "file's row count")
    p.add_argument("--latents", metavar="FILE",
                   help="render these latents instead of sampling: .csv with a header of latent names (any "
                        "order; a class column, by name or index, for scenes with classes), .npy (N x D, SCM "
                        "order) or .npz ('latents', optional 'classes')")
    p.add_argument("--sequences", type=int, metavar="N",
                   help="render N sequences of a dynamic SCM (--scm, e.g. temporal_causal3dident) instead of --n "
                        "i.i.d. images; its scene is the SCM's namesake unless --scene is given")
    p.add_argument("--length", type=int, default=8, metavar="T", help="steps per sequence (default 8)")
    p.add_argument("--sequences-per-chunk", type=int, default=8, metavar="K",
                   help="whole sequences per chunk/task (default 8; a chunk is K x T images)")
    p.add_argument("--out", required=True, metavar="STORE", help="Zarr store: a folder or an fsspec URL")
    p.add_argument("--preset", default="fast", choices=("fast", "original"),
                   help="fast: 64 px, 16 samples + denoiser (default); original: the papers' 224 px, 512 samples")
    p.add_argument("--resolution", type=int, help="image size in px (overrides the preset)")
    p.add_argument("--samples", type=int, help="Cycles samples per pixel (overrides the preset)")
    p.add_argument("--denoise", action=argparse.BooleanOptionalAction, default=None,
                   help="OpenImageDenoise on/off (default: the preset's)")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto", help="Cycles device")
    p.add_argument("--hue-mode", choices=HUE_MODES, default=None,
                   help="wrap: hues mod 1 (default); 'original' reproduces the original generator's un-wrapped, "
                        "clamped hues, for comparisons with the published datasets")
    p.add_argument("--seed", type=int, default=0, help="seed for latents, views and Cycles (default 0)")
    p.add_argument("--workers", type=int, default=None,
                   help="local worker processes, one Blender each, sharing the cores; 1 renders in this process "
                        "without a Dask cluster (default: one per 8 cores, so one on a laptop, and one for "
                        "--device gpu; on 2 cores one 2-thread process was the fastest split at 64-224 px, "
                        "benchmarks/render_bench.py)")
    p.add_argument("--threads", type=int, default=None,
                   help="Cycles CPU threads per worker (default: the cores split evenly between the workers; with "
                        "--scheduler, each Dask worker's thread count)")
    p.add_argument("--chunk-size", type=int, default=64, help="images per chunk/task (default 64)")
    p.add_argument("--views", metavar="NAME[@KNOB=VALUE...]:CHANGESET[,...]",
                   help="also render exact LT counterparts, e.g. hues:hues,pos:positions+hues (presets: "
                        f"{', '.join(VIEW_PRESETS)}); @KNOB=VALUE renders a view by a second mechanism: "
                        f"material={'|'.join(MATERIAL_KINDS)}, camera={'|'.join(CAMERAS)}, light=FACTOR (lamp "
                        "energies), e.g. metal@material=metallic (the anchors' latents, a metal object) or "
                        "near@material=metallic@camera=near:positions; without :CHANGESET such a view changes no "
                        "latent; a view's resolution is the anchors' (docs/multimodal.md)")
    p.add_argument("--view-seeds", choices=VIEW_SEEDS, default="independent",
                   help="Cycles noise of a view: its own seeds (independent, default) or its anchor's (shared: "
                        "the two images of a pair then share per-pixel sampling noise)")
    p.add_argument("--view-conditional", metavar="KIND:SCALE",
                   help="p(z~ | z) of the views' changed latents, truncated to their ranges: normal:SCALE or "
                        "laplace:SCALE (paper 001: normal:0.1); default: the SCM's transform (N(z, 1))")
    p.add_argument("--support-exclude", metavar="NAME=LOW:HIGH[,...]",
                   help="redraw rows whose listed latents ALL lie in their intervals (hold a corner of latent space "
                        "out, e.g. obj0_pos_x=0.2:1,obj1_pos_x=0.2:1 for a compositional split)")
    p.add_argument("--support-only", metavar="NAME=LOW:HIGH[,...]",
                   help="keep only rows whose listed latents all lie in their intervals (the held-out corner's test "
                        "store); rows are redrawn until they do")
    text = p.add_mutually_exclusive_group()
    text.add_argument("--text", metavar="NAME|SPEC.yaml",
                      help="also word a caption for every image (arrays text and text_latents): a caption spec "
                           "saying which latents it states and how (built-in: multimodal3dident; see "
                           "docs/multimodal.md); default: the scene's own, if it declares one")
    text.add_argument("--no-text", action="store_true", help="no captions, even where the scene declares them")
    p.add_argument("--meshes", nargs="+", metavar="CLASS=PATH",
                   help="your own meshes per class (OBJ/PLY/STL/glTF/.blend); win over --meshes-dir")
    p.add_argument("--meshes-dir", metavar="DIR",
                   help="a folder of per-class mesh files named after their class, any case (hare.ply, Cow.obj, "
                        "ShapeHead.blend; aliases such as bunny, stanford_bunny -> Hare, spot -> Cow, "
                        "utah_teapot -> Teapot); classes without a file keep their stand-in. Read +Y up "
                        "(.blend: Z up), scaled like the stand-ins. On a farm DIR must be on a shared file system")
    p.add_argument("--scheduler", metavar="ADDR", help="join an existing Dask cluster (tcp://HOST:PORT); a local "
                                                       "--out is made absolute, so it must be a path all workers share")
    p.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT_S, metavar="SECONDS",
                   help=f"give up on an unreachable --scheduler after this long (default {CONNECT_TIMEOUT_S:g})")
    p.add_argument("--retries", type=int, default=2, help="retries of a failed chunk (default 2)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.add_argument("--allow-blender-change", action="store_true",
                   help="resume a store that another Blender version rendered (refused otherwise: its images would "
                        "mix two renderers' output; the store then records both versions)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Render (or resume) the store the arguments describe; print which classes use a mesh file first."""
    if args.sequences is not None:
        return summarize(render_sequence_args(args))
    if args.n is None and args.latents is None:
        raise UserError("give --n N (images to sample) or --latents FILE (rows to render)")
    args.scene = args.scene or "causal3dident"
    if args.meshes or args.meshes_dir is not None:
        print(mesh_summary(*scene_with_meshes(args.scene, args.meshes, args.meshes_dir)), flush=True)
    settings = render_settings_args(args)
    support = support_from_flags(args.support_exclude, args.support_only)
    with notes_printed("render"):  # a rule the render cannot apply: one 'note:' line
        report = render_store(args.out, scene=args.scene, scm=args.scm, n=args.n, latents=args.latents,
                              settings=settings, preset=args.preset, seed=args.seed, chunk_size=args.chunk_size,
                              views=args.views, meshes=args.meshes, view_seeds=args.view_seeds,
                              view_conditional=args.view_conditional, workers=args.workers, scheduler=args.scheduler,
                              retries=args.retries, overwrite=args.overwrite,
                              progress=not args.no_progress, connect_timeout=args.connect_timeout,
                              meshes_dir=args.meshes_dir, threads=args.threads,
                              allow_blender_change=args.allow_blender_change, support=support,
                              text=False if args.no_text else args.text)
    return summarize(report)


def summarize(report: RenderReport) -> int:
    """Print what a run did; exit code 1 when chunks failed (re-running retries them)."""
    if not report.rendered and not report.failed:
        print(f"{report.out} is complete ({report.n} images, {report.n_chunks} chunks); nothing to do "
              "(--overwrite renders it again)")
        return 0
    rate = report.images / report.seconds if report.seconds else 0.0
    print(f"rendered {len(report.rendered)} chunks ({report.images} images) in {report.seconds:.1f} s "
          f"({rate:.1f} img/s); {len(report.skipped)} chunks were already done -> {report.out}")
    if report.placement_draws:
        print(f"placement: {1 - report.placed_rows / report.placement_draws:.1%} of {report.placement_draws:,} draws "
              f"rejected ({report.placement_draws / report.placed_rows:.2f} per row)")
    if report.workers_lost:
        print(f"{report.workers_lost} worker process(es) died during the run (crash or out of memory) and were "
              "replaced; their chunks were retried")
    if report.failed:
        for k, err in sorted(report.failed.items()):
            print(f"chunk {k} failed: {err}")
        print(f"{len(report.failed)} chunk(s) failed: {sorted(report.failed)}; re-run the same command "
              "to retry them")
        return 1
    return 0


def render_sequence_args(args: argparse.Namespace) -> RenderReport:
    """``--sequences N``: a sequence store of the dynamic SCM ``--scm``; options of i.i.d. renders that have no
    meaning here are refused in one line."""
    for flag, value in (("--n", args.n), ("--latents", args.latents), ("--views", args.views),
                        ("--view-conditional", args.view_conditional), ("--support-exclude", args.support_exclude),
                        ("--support-only", args.support_only), ("--text", args.text)):
        if value is not None:
            raise UserError(f"{flag} does not go with --sequences (a sequence store is rendered from the rollout of "
                            "the dynamic --scm); drop it")
    settings = render_settings_args(args)
    return render_sequences(args.out, scm=args.scm or "temporal_causal3dident", sequences=args.sequences,
                            length=args.length, seed=args.seed, scene=args.scene, settings=settings, preset=args.preset,
                            sequences_per_chunk=args.sequences_per_chunk, workers=args.workers,
                            scheduler=args.scheduler, threads=args.threads, retries=args.retries,
                            overwrite=args.overwrite, progress=not args.no_progress,
                            connect_timeout=args.connect_timeout, meshes=args.meshes, meshes_dir=args.meshes_dir,
                            allow_blender_change=args.allow_blender_change)


def render_settings_args(args: argparse.Namespace) -> dict[str, object]:
    """The render-setting overrides of the command line, for i.i.d. and sequence renders; a flag left unset keeps
    the preset's value (the API refuses None, so unset flags are left out)."""
    given = {"resolution": args.resolution, "samples": args.samples, "denoise": args.denoise, "device": args.device,
             "hue_mode": args.hue_mode}
    return {k: v for k, v in given.items() if v is not None}
