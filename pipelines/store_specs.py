"""The stores an experiment config names, of three kinds: an image store to render (``n``), a sequence store to
render (``sequences`` x ``length``) and a labelled dataset written as a store (``dataset``: digits, mnist5k, the
canvas sets of paper 002, the torchvision sets). One place checks a spec, gives its size, image size and
fingerprint digest (what a cell's key records of its data), and makes or resumes the store."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ident3d.causal.errors import UserError

IMAGE_KEYS = {"n", "resolution", "samples", "seed", "preset", "views", "view_seeds", "view_conditional", "scm",
              "support"}
SEQUENCE_KEYS = {"sequences", "length", "scm", "resolution", "samples", "seed", "preset"}
DATASET_KEYS = {"dataset", "split", "size", "root", "n"}
SPLITS = ("train", "test")


def spec_kind(spec: dict[str, Any]) -> str:
    """'dataset', 'sequences' or 'images': what a store spec makes."""
    return "dataset" if "dataset" in spec else "sequences" if "sequences" in spec else "images"


def _whole(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def check_spec(spec: Any, key: str, where: str) -> None:
    """A store spec's keys and values (``key``: train or test; ``where`` names the config), before anything runs."""
    if not isinstance(spec, dict):
        raise UserError(f"config {where}: stores.{key} is missing; give n, resolution and samples "
                        "(or a dataset: {dataset: mnist5k, split: train})")
    kind = spec_kind(spec)
    allowed = {"dataset": DATASET_KEYS, "sequences": SEQUENCE_KEYS, "images": IMAGE_KEYS}[kind]
    if unknown := sorted(set(spec) - allowed):
        why = {"dataset": " (a dataset store is written from the named dataset)",
               "sequences": " (a sequence store has sequences x length frames)", "images": ""}[kind]
        raise UserError(f"config {where}: stores.{key} has no setting {unknown[0]!r}{why}; "
                        f"allowed: {', '.join(sorted(allowed))}")
    if kind == "dataset":
        _check_dataset(spec, key, where)
        return
    for field_ in ("sequences", "length", "resolution", "samples") if kind == "sequences" else (
            "n", "resolution", "samples"):
        if not _whole(spec.get(field_), 1):
            raise UserError(f"config {where}: stores.{key}.{field_} must be a whole number >= 1, "
                            f"got {spec.get(field_)!r}")
    if not _whole(spec.get("seed", 0), 0):
        raise UserError(f"config {where}: stores.{key}.seed must be a whole number >= 0, got {spec['seed']!r}")
    for field_ in ("preset", "views", "view_seeds", "view_conditional", "scm"):
        if field_ in spec and spec[field_] is not None and not isinstance(spec[field_], str):
            raise UserError(f"config {where}: stores.{key}.{field_} must be text, got {spec[field_]!r}")
    if spec.get("support") is not None:  # a support region: {exclude|only: {NAME: [LOW, HIGH]}}, checked in full here
        from ident3d.render.placement_rules import parse_support

        try:
            parse_support(spec["support"])
        except UserError as exc:
            raise UserError(f"config {where}: stores.{key}.{exc}") from None


def _check_dataset(spec: dict[str, Any], key: str, where: str) -> None:
    """A dataset store spec: a known dataset, a split, whole sizes, and no more rows than the split has."""
    from ident3d.ingest.datasets import DATASETS, dataset_names

    head = f"config {where}: stores.{key}"
    if not isinstance(spec["dataset"], str) or spec["dataset"].lower() not in dataset_names():
        raise UserError(f"{head}.dataset: unknown dataset {spec['dataset']!r}; choose one of: "
                        f"{', '.join(dataset_names())}")
    if spec.get("split", key) not in SPLITS:
        raise UserError(f"{head}.split must be train or test, got {spec['split']!r}")
    for field_, low in (("size", 4), ("n", 1)):
        if field_ in spec and not _whole(spec[field_], low):
            raise UserError(f"{head}.{field_} must be a whole number >= {low}, got {spec[field_]!r}")
    if "root" in spec and not isinstance(spec["root"], str):
        raise UserError(f"{head}.root must be a folder (text), got {spec['root']!r}")
    split = spec.get("split", key)
    if "n" in spec and spec["n"] > (rows := DATASETS.get(spec["dataset"].lower())().count(split == "train")):
        raise UserError(f"{head}.n is {spec['n']:,} but {spec['dataset']} ({split}) has {rows:,} images; lower n "
                        "or leave it out (all of them)")


def store_size(spec: dict[str, Any], key: str = "train") -> int:
    """The images of a store spec: n, sequences x length frames, or a whole dataset split's rows."""
    if spec_kind(spec) == "sequences":
        return spec["sequences"] * spec["length"]
    if spec_kind(spec) == "dataset" and not spec.get("n"):
        from ident3d.ingest.datasets import DATASETS

        return DATASETS.get(spec["dataset"].lower())().count(spec.get("split", key) == "train")
    return spec["n"]


def image_size(spec: dict[str, Any]) -> int:
    """The side in pixels of the spec's images (a canvas dataset's: its canvas, three digits wide)."""
    if spec_kind(spec) != "dataset":
        return spec["resolution"]
    from ident3d.ingest.datasets import stored_size

    return stored_size(spec["dataset"], spec.get("size"))


def render_args(spec: dict[str, Any], scene: str | None) -> dict[str, Any]:
    """The render API's arguments for a rendered store (``ident3d.render.render_store``, or for a sequence store
    ``ident3d.render.sequences.render_sequences``, whose scene is its SCM's unless the config names one)."""
    common = {"seed": spec.get("seed", 0), "preset": spec.get("preset", "fast"),
              "settings": {"resolution": spec["resolution"], "samples": spec["samples"]}}
    if spec_kind(spec) == "sequences":
        return {**common, "scm": spec.get("scm", "temporal_causal3dident"), "sequences": spec["sequences"],
                "length": spec["length"], "scene": scene}
    scm = {"scm": spec["scm"]} if spec.get("scm") else {}  # else the scene's own SCM
    return {**common, "scene": scene or "causal3dident", "n": spec["n"], "views": spec.get("views") or None,
            "view_seeds": spec.get("view_seeds", "independent"), "view_conditional": spec.get("view_conditional"),
            "support": spec.get("support"), **scm}


def dataset_fields(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """What shapes a dataset store: the dataset, split, digit or image size and row count (not where it is read)."""
    name = spec["dataset"].lower()
    from ident3d.ingest.datasets import image_size as dataset_size

    return {"dataset": name, "split": spec.get("split", key), "size": dataset_size(name, spec.get("size")),
            "n": spec.get("n")}


DATA_WORDS = {"sequences": "a sequence store (sequences: and length:)",
              "objects": "a multi-object store (scene: multi3dident, masks and per-object latents)",
              "classes": "a store with classes"}


@dataclass(frozen=True)
class PlannedStore:
    """A checked store spec before it is made: its fingerprint digest (what a cell's key records of its data) and
    the kinds of data it will hold (``DATA_WORDS``), which metrics and view makers declare they need."""

    digest: str
    provides: frozenset[str]


def plan_store(spec: dict[str, Any], key: str, scene: str | None, head: str) -> PlannedStore:
    """The spec checked as making it would check it, with the renderer for a rendered store (its chunk bookkeeping
    included), nothing written (``head`` starts an error's line)."""
    from ident3d.pipelines.cells import canonical

    if spec_kind(spec) == "dataset":
        digest = hashlib.sha256(canonical({"dataset_store": dataset_fields(spec, key)}).encode()).hexdigest()
        return PlannedStore(digest, frozenset({"classes"}))
    from ident3d.render import plan_render
    from ident3d.render.driver import check_bookkeeping
    from ident3d.render.sequences import plan_sequences

    try:
        plan = (plan_sequences if spec_kind(spec) == "sequences" else plan_render)(
            f"{key}.zarr", **render_args(spec, scene))
        check_bookkeeping(plan.job)
    except UserError as exc:
        raise UserError(f"{head}: stores.{key}: {exc}") from None
    provides = {"sequences"} if plan.attrs.sequences else set()
    provides |= {"objects"} if (plan.attrs.scene_spec or {}).get("objects") else set()
    provides |= {"classes"} if plan.attrs.class_names else set()
    return PlannedStore(hashlib.sha256(canonical(plan.attrs.fingerprint()).encode()).hexdigest(),
                        frozenset(provides))


def make_store(spec: dict[str, Any], key: str, scene: str | None, out: Path, scheduler: str | None,
               progress: bool = False) -> None:
    """Render (or resume) a rendered store, or write (or complete) a dataset store, at ``out``."""
    if spec_kind(spec) == "dataset":
        _write_dataset(spec, key, out, progress)
        return
    from ident3d.render import render_store as render
    from ident3d.render.sequences import render_sequences

    if progress:
        print(f"rendering {out}: {store_size(spec)} images at {spec['resolution']} px", flush=True)
    report = (render_sequences if spec_kind(spec) == "sequences" else render)(
        out, **render_args(spec, scene), workers=None, scheduler=scheduler, progress=progress)
    if not report.ok:
        raise UserError(f"rendering {out} failed for chunks {sorted(report.failed)}; re-run to retry them")


def _write_dataset(spec: dict[str, Any], key: str, out: Path, progress: bool) -> None:
    """Write (or complete) a dataset store: a finished store of the same dataset and settings is kept, a partial one
    completed, another one refused (``ident3d.ingest.datasets.dataset_store``)."""
    from ident3d.causal.errors import ParameterError
    from ident3d.ingest.datasets import dataset_store

    split = spec.get("split", key)
    if progress:
        print(f"writing {out}: {store_size(spec, key)} images of {spec['dataset']} ({split})", flush=True)
    try:
        dataset_store(spec["dataset"], out, spec.get("root"), split == "train", size=spec.get("size"),
                      first=spec.get("n"))
    except ParameterError as exc:  # ``first`` is the config's n
        raise UserError(f"stores.{key}.n {exc.detail}") from None
