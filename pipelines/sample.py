"""``ident3d sample``: draw latents from an SCM and save them as .npz or .csv."""

from __future__ import annotations

import argparse
from pathlib import Path

from ident3d.causal import SCM, Samples, load_scm
from ident3d.causal.errors import UserError
from ident3d.pipelines.files import check_output, write_atomic
from ident3d.store.memory import available_memory, check_fits


def sample_to_file(scm_name: str, n: int, seed: int, out: str | Path, start: int = 0,
                   overwrite: bool = False, scene: str | None = None) -> Samples:
    """Sample rows ``start..start+n-1`` of an SCM and write them to ``out`` (npz or csv); with ``scene``, rows that
    keep that scene's latent placement rules (:func:`placed_rows`), which ``ident3d render --latents`` holds them to."""
    if n <= 0:
        raise UserError(f"--n must be a positive number of samples, got {n}")
    if seed < 0 or start < 0:
        raise UserError("--seed and --start must be non-negative")
    path = check_output(out, (".npz", ".csv"), overwrite)
    scm = load_scm(scm_name)
    check_memory(n, len(scm.nodes) + 1, available_memory())
    samples = scm.sample(n, seed=seed, start=start) if scene is None else placed_rows(scm, scene, n, seed, start)
    write_atomic(path, samples.save)
    return samples


def placed_rows(scm: SCM, scene_arg: str, n: int, seed: int, start: int) -> Samples:
    """Rows of ``scm`` that keep scene ``scene_arg``'s latent placement rules (min_distance, support), drawn as
    ``ident3d render --n`` draws them (``ident3d.render.placement.sample_placed``); the scene must bind the SCM, and
    rules too strict to keep are refused before drawing (the render's preflight). A scene without such rules gives
    the SCM's own rows."""
    from ident3d.render.api import check_scene_matches  # the renderer, zarr: only with --scene
    from ident3d.render.placement import preflight, sample_placed
    from ident3d.render.scene import load_scene

    scene = load_scene(scene_arg)
    check_scene_matches(scene, scm)
    rules = scene.placement
    if rules is None or not rules.on_latents:
        return scm.sample(n, seed=seed, start=start)
    preflight(rules, scene, scm, n, seed)
    return sample_placed(scm, scene, rules, n, seed, start)


BYTES_PER_VALUE = 32  # peak memory per sampled value (measured ~27: draws, intermediates, the output arrays)


def check_memory(n: int, values_per_row: int, available: int | None) -> None:
    """Refuse an ``n`` whose samples cannot fit in memory (it would end in a MemoryError or the OOM killer after
    minutes), saying how many rows fit and how to split the job with --start (the one bound: store.memory)."""
    if available is None:
        return
    fit = max(1, available // (values_per_row * BYTES_PER_VALUE))
    check_fits(n * values_per_row * BYTES_PER_VALUE, f"--n {n} needs", f"sample at most --n {fit} per file and "
               "split the rest with --start (rows are the same either way)", available)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sample", help="sample ground-truth latents from an SCM to .npz/.csv",
        description="Sample latents from a built-in SCM (3dident, causal3dident, content_style) or "
                    "a spec file. Row i depends only on (seed, i): sampling 0..N at once or in "
                    "pieces with --start gives identical rows.",
        epilog="examples:\n"
               "  ident3d sample --scm causal3dident --n 1000 --seed 0 --out latents.npz\n"
               "  ident3d sample --scm multi3dident_independent --scene multi3dident --n 100 --out objects.npz",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scm", required=True, metavar="NAME|PATH", help="built-in SCM name or spec file")
    p.add_argument("--n", type=int, required=True, help="number of samples (> 0)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--start", type=int, default=0, help="index of the first row (default 0)")
    p.add_argument("--out", required=True, metavar="FILE", help="output .npz (arrays) or .csv")
    p.add_argument("--scene", metavar="NAME|PATH",
                   help="keep this scene's placement rules on the latents (min_distance, support): rows that break "
                        "them are redrawn as `ident3d render --n` redraws them, so `render --latents` takes the file "
                        "on that scene (min_visible is judged on rendered images, so not here)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    samples = sample_to_file(args.scm, args.n, args.seed, args.out, args.start, args.overwrite, args.scene)
    cls = f", classes {sorted(set(samples.classes.tolist()))}" if samples.classes is not None else ""
    print(f"wrote {len(samples)} samples x {len(samples.names)} latents{cls} to {args.out}")
    return 0
