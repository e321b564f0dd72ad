"""ident3d: sample latents from causal models, render them with Blender into Zarr stores, and measure which latents
self-supervised learning recovers.

The packages of the repository's folders install under this namespace: ``ident3d.causal``, ``ident3d.store``,
``ident3d.jobs``, ``ident3d.render``, ``ident3d.ingest``, ``ident3d.training``, ``ident3d.evaluation`` and
``ident3d.pipelines``. The names below are the public API; each is imported on first use, so ``import ident3d`` (and
every Dask worker that unpickles a task) does not pay for torch or Blender::

    import ident3d
    ident3d.render_store("stores/c3d.zarr", scene="causal3dident", n=1000, views="hues:hues")

A source checkout runs through its editable install (``pip install -e .``), which maps each of those folders to its
name and nothing else: the checkout's other folders (``benchmarks/``, ``tests/``) are not ``ident3d.benchmarks`` or
``ident3d.tests``.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("ident3d")
except PackageNotFoundError:  # a source tree that was not installed
    __version__ = "0+unknown"

SUBPACKAGES = ("causal", "store", "jobs", "render", "ingest", "training", "evaluation", "pipelines")
# public name -> the module that defines it
PUBLIC = {
    "render_store": "ident3d.render.api",
    "plan_render": "ident3d.render.api",
    "render_sequences": "ident3d.render.sequences",
    "load_scm": "ident3d.causal.loading",
    "load_dynamic_scm": "ident3d.causal.loading",
    "UserError": "ident3d.causal.errors",
    "open_store": "ident3d.store.view",
    "StoreView": "ident3d.store.view",
    "loader": "ident3d.training.loaders",
    "StoreDataset": "ident3d.training.loaders",
    "metrics": "ident3d.metrics",  # a module: the metrics on arrays (ident3d.metrics.r2, .mig, ...)
}

__all__ = ["__version__", *SUBPACKAGES, *PUBLIC]


def __getattr__(name: str) -> Any:
    """The public API and the subpackages, imported when first asked for (PEP 562)."""
    if name in SUBPACKAGES or PUBLIC.get(name) == f"ident3d.{name}":  # a subpackage, or a public module
        return import_module(f"ident3d.{name}")
    if name in PUBLIC:
        return getattr(import_module(PUBLIC[name]), name)
    raise AttributeError(f"module 'ident3d' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
