"""The stores an experiment config names, of three kinds: an image store to render (``n``), a sequence store to
render (``sequences`` x ``length``) and a labelled dataset written as a store (``dataset``: digits, mnist5k, the
canvas sets of paper 002, the torchvision sets). Each is a typed spec (parsed by ``ident3d.training.hparams.parse``);
one place gives its size, image size and fingerprint digest (what a cell's key records of its data), and makes or
resumes the store."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from ident3d.causal.errors import ParameterError, UserError
from ident3d.pipelines.cells import canonical
from ident3d.training.hparams import ConfigError, Count, Range, Tagged

SPLITS = ("train", "test")
Whole = Annotated[int, Range(ge=0)]


@dataclass(frozen=True)
class ImageStore:
    """An image store to render: ``n`` rows of the scene (its SCM, or ``scm``) at ``resolution`` px, with the views
    ``views`` names (``ident3d render --views`` text, or a mapping {name: change set | {changes, mechanism, shared,
    perturbed, specific}}: views of a second mechanism, ``ident3d.render.mechanisms``) and an optional support
    region."""

    n: Count
    resolution: Count
    samples: Count
    seed: Whole = 0
    preset: str | None = "fast"
    views: str | dict[str, Any] | None = None
    view_seeds: str | None = "independent"
    view_conditional: str | None = None
    scm: str | None = None
    support: Any = None
    # captions (ident3d render --text): a caption spec; true: the scene's (it must declare them); false: none;
    # None: the scene's, if any
    text: str | bool | None = None

    def __post_init__(self) -> None:
        if self.support is not None:  # {exclude|only: {NAME: [LOW, HIGH]}}, checked in full here
            from ident3d.render.placement_rules import parse_support  # zarr: not for `ident3d compare --help`

            try:
                parse_support(self.support)
            except UserError as exc:
                raise ConfigError("support", str(exc).removeprefix("support ")) from None


@dataclass(frozen=True)
class SequenceStore:
    """A sequence store to render: ``sequences`` x ``length`` frames of a dynamic SCM."""

    sequences: Count
    length: Count
    resolution: Count
    samples: Count
    scm: str | None = "temporal_causal3dident"
    seed: Whole = 0
    preset: str | None = "fast"


@dataclass(frozen=True)
class DatasetStore:
    """A labelled dataset written as a store: ``dataset`` (digits, mnist5k, a canvas set, a torchvision set), its
    ``split`` (by default the store's key), digit or image ``size``, the folder it is read from and its first ``n``
    rows (all by default)."""

    dataset: str
    split: Literal["train", "test"] | None = None
    size: Annotated[int, Range(ge=4)] | None = None
    root: str | None = None
    n: Count | None = None

    def __post_init__(self) -> None:
        from ident3d.ingest.datasets import dataset_names  # torch: not for `ident3d compare --help`

        if self.dataset.lower() not in dataset_names():
            raise ConfigError("dataset", f"unknown dataset {self.dataset!r}; choose one of: "
                                         f"{', '.join(dataset_names())}")


StoreSpec = ImageStore | SequenceStore | DatasetStore


def _store_kind(value: Any, path: str) -> type:
    """Which store a spec describes, by its keys: ``dataset:`` a dataset store, ``sequences:`` a sequence store, else
    an image store."""
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be a store spec: n, resolution and samples (or a dataset: {{dataset: mnist5k, "
                                f"split: train}}), got {value!r}")
    return DatasetStore if "dataset" in value else SequenceStore if "sequences" in value else ImageStore


Store = Annotated[StoreSpec, Tagged(_store_kind)]  # what a config's ``stores.KEY`` is parsed as


def spec_kind(spec: StoreSpec) -> str:
    """'dataset', 'sequences' or 'images': what a store spec makes."""
    return {DatasetStore: "dataset", SequenceStore: "sequences", ImageStore: "images"}[type(spec)]


def split_of(spec: DatasetStore, key: str) -> str:
    """A dataset store's split: its own, else its key's (``train`` or ``test``)."""
    return spec.split or key


def check_dataset_rows(spec: StoreSpec, key: str) -> None:
    """A dataset store asks for no more rows than its split has (``key``: the store's key, its default split)."""
    if isinstance(spec, DatasetStore) and spec.n is not None:
        from ident3d.ingest.datasets import DATASETS  # torch: not for `ident3d compare --help`

        split = split_of(spec, key)
        if spec.n > (rows := DATASETS.get(spec.dataset.lower())().count(split == "train")):
            raise ConfigError(f"stores.{key}.n", f"is {spec.n:,} but {spec.dataset} ({split}) has {rows:,} images; "
                                                 "lower n or leave it out (all of them)")


def store_size(spec: StoreSpec, key: str = "train") -> int:
    """The images of a store spec: n, sequences x length frames, or a whole dataset split's rows."""
    if isinstance(spec, SequenceStore):
        return spec.sequences * spec.length
    if isinstance(spec, DatasetStore) and not spec.n:
        from ident3d.ingest.datasets import DATASETS  # torch: not for `ident3d compare --help`

        return DATASETS.get(spec.dataset.lower())().count(split_of(spec, key) == "train")
    return spec.n


def image_size(spec: StoreSpec) -> int:
    """The side in pixels of the spec's images (a canvas dataset's: its canvas, three digits wide)."""
    if not isinstance(spec, DatasetStore):
        return spec.resolution
    from ident3d.ingest.datasets import stored_size  # torch: not for `ident3d compare --help`

    return stored_size(spec.dataset, spec.size)


def render_args(spec: ImageStore | SequenceStore, scene: str | None) -> dict[str, Any]:
    """The render API's arguments for a rendered store (``ident3d.render.render_store``, or for a sequence store
    ``ident3d.render.sequences.render_sequences``, whose scene is its SCM's unless the config names one)."""
    common = {"seed": spec.seed, "preset": spec.preset,
              "settings": {"resolution": spec.resolution, "samples": spec.samples}}
    if isinstance(spec, SequenceStore):
        return {**common, "scm": spec.scm, "sequences": spec.sequences, "length": spec.length, "scene": scene}
    scm = {"scm": spec.scm} if spec.scm else {}  # else the scene's own SCM
    text = {} if spec.text is None else {"text": spec.text}  # None: the scene's captions, if it declares any
    return {**common, "scene": scene or "causal3dident", "n": spec.n, "views": spec.views or None,
            "view_seeds": spec.view_seeds, "view_conditional": spec.view_conditional, "support": spec.support,
            **scm, **text}


def dataset_fields(spec: DatasetStore, key: str) -> dict[str, Any]:
    """What shapes a dataset store: the dataset, split, digit or image size and row count (not where it is read)."""
    name = spec.dataset.lower()
    from ident3d.ingest.datasets import image_size as dataset_size  # torch: not for `ident3d compare --help`

    return {"dataset": name, "split": split_of(spec, key), "size": dataset_size(name, spec.size), "n": spec.n}


DATA_WORDS = {"sequences": "a sequence store (sequences: and length:)",
              "objects": "a multi-object store (scene: multi3dident, masks and per-object latents)",
              "classes": "a store with classes",
              "text": "a store with captions (a scene that declares them, e.g. multimodal3dident, or text:)"}


@dataclass(frozen=True)
class PlannedStore:
    """A checked store spec before it is made: its fingerprint digest (what a cell's key records of its data) and
    the kinds of data it will hold (``DATA_WORDS``), which metrics and view makers declare they need."""

    digest: str
    provides: frozenset[str]


def plan_store(spec: StoreSpec, key: str, scene: str | None, head: str) -> PlannedStore:
    """The spec checked as making it would check it, with the renderer for a rendered store (its chunk bookkeeping
    included), nothing written (``head`` starts an error's line)."""
    if isinstance(spec, DatasetStore):
        digest = hashlib.sha256(canonical({"dataset_store": dataset_fields(spec, key)}).encode()).hexdigest()
        return PlannedStore(digest, frozenset({"classes"}))
    from ident3d.render import plan_render  # zarr: not for `ident3d compare --help`
    from ident3d.render.driver import check_bookkeeping
    from ident3d.render.sequences import plan_sequences

    try:
        plan = (plan_sequences if isinstance(spec, SequenceStore) else plan_render)(
            f"{key}.zarr", **render_args(spec, scene))
        check_bookkeeping(plan.job)
    except UserError as exc:
        raise UserError(f"{head}: stores.{key}: {exc}") from None
    provides = {"sequences"} if plan.attrs.sequences else set()
    provides |= {"objects"} if (plan.attrs.scene_spec or {}).get("objects") else set()
    provides |= {"classes"} if plan.attrs.class_names else set()
    provides |= {"text"} if plan.attrs.text else set()
    return PlannedStore(hashlib.sha256(canonical(plan.attrs.fingerprint()).encode()).hexdigest(),
                        frozenset(provides))


def make_store(spec: StoreSpec, key: str, scene: str | None, out: Path, scheduler: str | None,
               progress: bool = False) -> None:
    """Render (or resume) a rendered store, or write (or complete) a dataset store, at ``out``."""
    if isinstance(spec, DatasetStore):
        _write_dataset(spec, key, out, progress)
        return
    from ident3d.render import render_store as render  # zarr: not for `ident3d compare --help`
    from ident3d.render.sequences import render_sequences

    if progress:
        print(f"rendering {out}: {store_size(spec)} images at {spec.resolution} px", flush=True)
    report = (render_sequences if isinstance(spec, SequenceStore) else render)(
        out, **render_args(spec, scene), workers=None, scheduler=scheduler, progress=progress)
    if not report.ok:
        raise UserError(f"rendering {out} failed for chunks {sorted(report.failed)}; re-run to retry them")


def _write_dataset(spec: DatasetStore, key: str, out: Path, progress: bool) -> None:
    """Write (or complete) a dataset store: a finished store of the same dataset and settings is kept, a partial one
    completed, another one refused (``ident3d.ingest.datasets.dataset_store``)."""
    from ident3d.ingest.datasets import dataset_store  # torch: not for `ident3d compare --help`

    split = split_of(spec, key)
    if progress:
        print(f"writing {out}: {store_size(spec, key)} images of {spec.dataset} ({split})", flush=True)
    try:
        dataset_store(spec.dataset, out, spec.root, split == "train", size=spec.size, first=spec.n)
    except ParameterError as exc:  # ``first`` is the config's n
        raise UserError(f"stores.{key}.n {exc.detail}") from None
