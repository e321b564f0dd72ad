"""What a rendered multi-object store holds, checked over every row: each present object's visible share against the
scene's placement rule, mask centroids against where the latents put each object (and against a shuffled pairing:
another present object's position in the same image), and what rejection did (``render.placement.placement_summary``).

    python benchmarks/multi_object_store.py runs/multi_object/stores/train.zarr --out results/multi_object/store.json
    python benchmarks/multi_object_store.py --tiny      # a 16-image, 32 px store rendered for it (a test)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from _tiny import add_tiny  # benchmarks/_tiny.py, beside this script

from ident3d.store.zarr_io import store_group

WELL_SEEN = 0.02  # share of the frame: objects this visible have a mask centroid near their origin's projection


def centroid_distances(masks: np.ndarray, visibility: np.ndarray, where: np.ndarray, min_px: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(distance from each well-seen object's mask centroid to its own projected origin, to the next well-seen
    object's in the same image) in px; ``where`` (N, K, 2) from ``render.projection.slot_pixels``."""
    own, other = [], []
    for i, m in enumerate(masks):
        seen = [k for k in range(visibility.shape[1]) if visibility[i, k] >= min_px]
        cent = {k: np.argwhere(m == k + 1).mean(axis=0) for k in seen}
        own += [float(np.linalg.norm(cent[k] - where[i, k])) for k in seen]
        if len(seen) > 1:
            other += [float(np.linalg.norm(cent[k] - where[i, j])) for k, j in zip(seen, seen[1:] + seen[:1],
                                                                                   strict=True)]
    return np.array(own), np.array(other)


def summarise(path: str) -> dict:
    """Every check of the store at ``path`` as plain numbers."""
    from ident3d.causal import load_scm
    from ident3d.render.placement import placement_summary
    from ident3d.render.projection import slot_pixels
    from ident3d.render.scene import scene_from_dict
    from ident3d.store.attrs import read_attrs

    g = store_group(path, mode="r")
    a = read_attrs(g, path)
    scene, scm = scene_from_dict(a.scene_spec), load_scm(a.scm)
    latents, present = g["latents"][:], g["present"][:].astype(bool)
    visibility, masks = g["visibility"][:], g["masks"][:]
    n, h, w = masks.shape
    rule = (a.placement or {}).get("min_visible", 0.0)
    need = max(1, math.ceil(rule * h * w))
    vis = visibility[present]
    where = slot_pixels(scene, latents, h)
    own, other = centroid_distances(masks, visibility, where, max(need, math.ceil(WELL_SEEN * h * w)))
    counts = np.array([np.count_nonzero(m == k + 1) for m in masks[:200] for k in range(scene.slots)])
    return {"store": Path(path).name, "n": int(n), "resolution": int(h), "objects": int(present.sum()),
            "objects_per_image": float(present.sum(1).mean()),
            "min_visible_rule": rule, "min_visible_px": need, "visible_px_min": int(vis.min()),
            "visible_px_median": float(np.median(vis)), "objects_below_rule": int((vis < need).sum()),
            "absent_with_pixels": int(visibility[~present].sum()),
            "visibility_equals_mask_counts_first_200": bool(np.array_equal(counts, visibility[:200].ravel())),
            "centroid_px": {"objects": len(own), "median": float(np.median(own)), "p95": float(np.quantile(own, .95)),
                            "max": float(own.max()), "shuffled_median": float(np.median(other)),
                            "shuffled_within_5px": float((other <= 5).mean())},
            "placement": placement_summary(latents, present, g["attempts"][:], list(scm.names), scm.plates.objects)}


def tiny_store(path: Path) -> Path:
    """A 16-image, 32 px multi3dident store for ``--tiny`` (enough well-seen objects for every statistic)."""
    from ident3d.render import render_store

    assert render_store(path, scene="multi3dident", scm="multi3dident_independent", n=16,
                        settings={"resolution": 32, "samples": 2}, workers=1, threads=1, progress=False).ok
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stores", nargs="*", help="rendered multi-object stores")
    p.add_argument("--out", help="the JSON to write")
    tiny = add_tiny(p, "a 16-image, 32 px multi3dident store rendered for it")
    args = p.parse_args()
    folder = tiny.apply(args, paths={"out": "store.json"}, inputs=not args.stores)
    if folder and not args.stores:
        args.stores = [str(tiny_store(folder / "multi.zarr"))]
    if not args.stores or not args.out:
        p.error("give one or more stores and --out (or --tiny)")
    result = {"command": "python benchmarks/multi_object_store.py " + " ".join(sys.argv[1:]),
              "stores": [summarise(s) for s in args.stores]}
    Path(args.out).write_text(json.dumps(result, indent=2, default=float) + "\n")
    for s in result["stores"]:
        c = s["centroid_px"]
        print(f"{s['store']}: {s['n']} images at {s['resolution']} px, {s['objects']} objects; visible px min "
              f"{s['visible_px_min']} (rule {s['min_visible_px']}), {s['objects_below_rule']} below; mask centroids "
              f"{c['median']:.2f} px median / {c['max']:.2f} max from their latents ({c['objects']} objects), "
              f"{c['shuffled_median']:.1f} px from a shuffled pairing; {s['placement']['rejection_rate']:.1%} of "
              f"draws rejected")


if __name__ == "__main__":
    main()
