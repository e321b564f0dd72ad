"""Fidelity of our 3DIdent scene to the original generator: PSNR and silhouette IoU against reference renders.

REF_DIR holds ``raw_latents.csv`` (one row of raw latents per image, our column order) and ``NN.png`` (row NN,
rendered by the original generator). Each row is rendered with the project's 3dident scene through
``ident3d.render.blender.BlenderRenderer`` at the reference's resolution, 64 samples, denoiser (prefilter ACCURATE),
``hue_mode="original"`` and Cycles seed 0, as the references were:

    python benchmarks/fidelity_3dident.py REF_DIR --out results/fidelity_3dident.json --png results/fidelity_3dident.png
    python benchmarks/fidelity_3dident.py --tiny      # against 2 of our own 16 px renders, Cycles seed 7 (a test)

Silhouette: the reference has no object mask, so both images are compared with the same object-free
estimate of the background, our render of the same latents with the object hidden from the camera (it still
casts its shadow, so shadows cancel); a pixel is object where the summed |RGB difference| exceeds
``--mask-threshold``. The same rule on both images gives the IoU. As a check that the metric can fail, the
JSON also holds the IoU of each reference against our render of the next row's latents (a wrong pose).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script
from imaging import image_grid, psnr  # benchmarks/imaging.py, beside this script
from PIL import Image

from ident3d.causal.errors import UserError
from ident3d.render.scene import LATENT_NAMES, load_scene, pose
from ident3d.render.settings import RenderSettings
from ident3d.store.attrs import software_versions


def object_mask(img: np.ndarray, background: np.ndarray, threshold: float) -> np.ndarray:
    """Pixels where ``img`` differs from the object-free background by more than ``threshold`` (sum over RGB)."""
    return np.abs(img.astype(np.int32) - background.astype(np.int32)).sum(-1) > threshold


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two boolean masks (1.0 when both are empty)."""
    union = (a | b).sum()
    return float((a & b).sum() / union) if union else 1.0


def read_reference(ref_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """Raw latents (N, 10) in our column order and the reference images (N, H, W, 3) uint8."""
    table = ref_dir / "raw_latents.csv"
    if not table.is_file():
        raise UserError(f"{table} not found")
    with open(table) as fh:
        rows = list(csv.DictReader(fh))
    missing = set(LATENT_NAMES) - set(rows[0]) if rows else set(LATENT_NAMES)
    if missing:
        raise UserError(f"{table} lacks column(s) {sorted(missing)}")
    latents = np.array([[float(r[k]) for k in LATENT_NAMES] for r in rows], dtype=np.float64)
    images = []
    for i in range(len(rows)):
        path = ref_dir / f"{i:02d}.png"
        if not path.is_file():
            raise UserError(f"{path} not found (one image per row of {table})")
        with Image.open(path) as im:
            images.append(np.asarray(im.convert("RGB"), dtype=np.uint8))
    return latents, np.stack(images)


def render_all(latents: np.ndarray, res: int, samples: int, seed: int) -> dict[str, np.ndarray]:
    """Ours (object shown) and the object-free background for every row, one renderer."""
    from ident3d.render.blender import BlenderRenderer

    settings = RenderSettings(resolution=res, samples=samples, denoise=True, max_bounces=0,
                              denoise_prefilter="ACCURATE", hue_mode="original")
    scene = load_scene("3dident")
    renderer = BlenderRenderer(scene, settings)
    out: dict[str, list[np.ndarray]] = {"ours": [], "background": []}
    for row in latents:
        p = pose(scene, row.tolist(), 0, settings.hue_mode)
        out["ours"].append(renderer.render_pose(p, seed))
        out["background"].append(renderer.render_pose(p, seed, object_visible=False))
    renderer.close()
    return {k: np.stack(v) for k, v in out.items()}


def side_by_side(path: Path, ref: np.ndarray, ours: np.ndarray, rows: list[dict]) -> None:
    """Reference row over ours, with 4x the absolute difference below; PSNR and IoU under each of ours."""
    diff = np.clip(np.abs(ref.astype(np.int32) - ours.astype(np.int32)) * 4, 0, 255).astype(np.uint8)
    captions = {1: [f"{r['psnr_db']:.1f} dB, IoU {r['iou']:.3f}" for r in rows]}
    image_grid(path, [("original", ref), ("ours", ours), ("4 x |diff|", diff)], captions,
               "3DIdent: original generator (top) vs ours (same raw latents, Cycles seed 0)")


def score(ref: np.ndarray, ours: np.ndarray, bg: np.ndarray, threshold: float) -> list[dict]:
    """Per image: PSNR, silhouette IoU, mask sizes, and the IoU against the next row's render (a wrong pose)."""
    rows = []
    for i in range(len(ref)):
        m_ref, m_ours = object_mask(ref[i], bg[i], threshold), object_mask(ours[i], bg[i], threshold)
        j = (i + 1) % len(ref)
        rows.append({"image": f"{i:02d}.png", "psnr_db": psnr(ours[i], ref[i]), "iou": iou(m_ref, m_ours),
                     "mask_px_ref": int(m_ref.sum()), "mask_px_ours": int(m_ours.sum()),
                     "wrong_pose_iou": iou(m_ref, object_mask(ours[j], bg[j], threshold))})
    return rows


def tiny_reference(folder: Path, n: int, res: int, samples: int) -> Path:
    """A reference folder for ``--tiny``: ``n`` rows of the 3dident SCM rendered by us with Cycles seed 7 (so the
    comparison, at seed 0, scores a real difference), in the layout REF_DIR has."""
    from ident3d.causal import load_scm

    latents = load_scm("3dident").sample(n, seed=0).latents
    folder.mkdir(parents=True)
    with open(folder / "raw_latents.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(LATENT_NAMES)
        writer.writerows(latents.tolist())
    for i, img in enumerate(render_all(latents, res, samples, seed=7)["ours"]):
        Image.fromarray(img).save(folder / f"{i:02d}.png")
    return folder


def main(argv: list[str] | None = None) -> int:
    """Render, score, print and write the JSON/PNG; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref_dir", type=Path, nargs="?", help="folder with raw_latents.csv and NN.png")
    ap.add_argument("--out", type=Path, default=Path("results/fidelity_3dident.json"))
    ap.add_argument("--png", type=Path, default=Path("results/fidelity_3dident.png"))
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--mask-threshold", type=float, default=30.0, help="summed |RGB difference| (0..765)")
    ap.add_argument("--seed-ceiling", action="store_true", help="also render with Cycles seed 7: PSNR seed 0 vs 7")
    tiny = add_tiny(ap, "against 2 of our own 16 px renders at Cycles seed 7, 4 samples")
    args = ap.parse_args(argv)
    folder = tiny.apply(args, sizes={"samples": 4}, paths=("out", "png"), inputs=args.ref_dir is None)
    if folder and args.ref_dir is None:
        args.ref_dir = tiny_reference(folder / "reference", 2, 16, args.samples)
    if args.ref_dir is None:
        ap.error("give REF_DIR (or --tiny)")
    try:
        latents, ref = read_reference(args.ref_dir)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    r = render_all(latents, ref.shape[1], args.samples, seed=0)
    seconds = time.perf_counter() - t0
    rows = score(ref, r["ours"], r["background"], args.mask_threshold)
    for row in rows:
        print(f"{row['image']}: PSNR {row['psnr_db']:6.2f} dB  IoU {row['iou']:.3f}  "
              f"(wrong pose {row['wrong_pose_iou']:.3f})")
    result = {
        "command": " ".join(["python", "benchmarks/fidelity_3dident.py", *argv]),
        "blender": software_versions()["blender"],
        "resolution": int(ref.shape[1]), "samples": args.samples,
        "denoiser": "OpenImageDenoise, prefilter ACCURATE", "hue_mode": "original", "cycles_seed": 0,
        "mask_threshold": args.mask_threshold,
        "mask": "summed |RGB diff| against our render with the object hidden from the camera (shadow kept)",
        "images": rows,
        "mean_psnr_db": float(np.mean([x["psnr_db"] for x in rows])),
        "mean_iou": float(np.mean([x["iou"] for x in rows])),
        "min_iou": float(np.min([x["iou"] for x in rows])),
        "mean_wrong_pose_iou": float(np.mean([x["wrong_pose_iou"] for x in rows])),
        "render_seconds_incl_background": round(seconds, 1),
    }
    if args.seed_ceiling:
        seven = render_all(latents, ref.shape[1], args.samples, seed=7)["ours"]
        result["seed_ceiling_psnr_db"] = float(np.mean([psnr(a, b) for a, b in zip(r["ours"], seven, strict=True)]))
    print(f"mean: PSNR {result['mean_psnr_db']:.2f} dB  IoU {result['mean_iou']:.3f} (min {result['min_iou']:.3f}); "
          f"wrong-pose IoU {result['mean_wrong_pose_iou']:.3f}"
          + (f"; seed 0 vs 7: {result['seed_ceiling_psnr_db']:.2f} dB" if args.seed_ceiling else ""))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.png:
        side_by_side(args.png, ref, r["ours"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
