"""The view-maker interface: turn a batch of anchors into the views an objective compares.

A batch is a dict of tensors already on the training device: ``images`` uint8 (B, H, W, 3),
``latents`` float32 (B, D), optionally ``classes`` (B,), ``index`` (B,) and, for stores with exact
LT pairs, ``views/NAME/images`` etc. A view maker returns ``n_views`` float tensors (B, 3, H, W),
normalised with the store's statistics: a fixed count, or, for makers with ``any_views`` (the DA makers), the
J >= 2 of ``--n-views J`` (``TrainConfig.n_views``). View makers are registered by name in
``ident3d.training.registry.VIEWS``; ``A+B`` combines recipes (see ``ident3d.training.views.make_view_maker``).

Each view maker also says what it means: which latents its views differ in (its *style*, :meth:`ViewMaker.style`;
the rest is content), the ``NAME:ARG`` argument it takes (``arg``) and what it takes from the run before the first
batch (:meth:`ViewMaker.bind`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from ident3d.causal.errors import UserError

if TYPE_CHECKING:
    from ident3d.causal.scm import SCM
    from ident3d.training.data import StoreBatches
    from ident3d.training.objective_parts.base import Objective

DEFAULT_VIEWS = 2  # --n-views default: every view maker's own count (J = 2 for the ones that take any J)


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> float (B, 3, H, W) in [0, 1]."""
    return images.permute(0, 3, 1, 2).float().div_(255.0)


class Normalize:
    """Per-channel standardisation with the store's mean and std (computed from its images)."""

    def __init__(self, mean: tuple[float, float, float], std: tuple[float, float, float]):
        self.mean, self.std = mean, std

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        m = torch.tensor(self.mean, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
        s = torch.tensor(self.std, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
        return (x - m) / s


@dataclass
class Style:
    """What a view maker changes between its views: its style latents, what each augmentation (DA recipe) was
    mapped to and the augmentations that map to no latent of the store (their would-be columns stay content)."""

    latents: set[str]
    da_map: dict[str, list[str]] = field(default_factory=dict)
    unmapped: list[str] = field(default_factory=list)

    def add(self, name: str, mapped: Sequence[str]) -> None:
        """Record that augmentation ``name`` changes the latents ``mapped`` (none: it is unmapped)."""
        self.da_map[name] = list(mapped)
        self.latents |= set(mapped)
        if not mapped:
            self.unmapped.append(name)


def resolve_targets(scm: SCM, targets: Sequence[str]) -> list[str]:
    """The latents of ``targets`` (change sets, groups or nodes) that the SCM has; a target it lacks maps to
    nothing, so e.g. colour jitter on a scene without a ``hues`` group or change set has no style."""
    known = [t for t in targets if t in scm.change_sets or t in scm.groups or t in scm.nodes]
    return [n for n in scm.resolve(known) if n in scm.names] if known else []


class ViewMaker:
    """Base class: ``__call__(batch, generator) -> list of n_views normalised float image batches``."""

    registry_name: ClassVar[str]
    n_views: int = 2  # views per anchor: a fixed count, or the instance's J where ``any_views``
    any_views: ClassVar[bool] = False  # makes any J >= 2 independently drawn views (``--n-views J``)
    requires: ClassVar[tuple[str, ...]] = ()  # store arrays the maker needs, e.g. ("views/hues/images",)
    # kinds of store it needs ("sequences", "objects", "classes"), checked by experiment configs before any store
    data_needs: ClassVar[frozenset[str]] = frozenset()
    objective: ClassVar[str | None] = None  # the one objective this maker feeds, if its views are not images
    arg: ClassVar[str | None] = None  # the keyword 'NAME:ARG' fills (lt_exact:VIEW -> view); None: takes no ':ARG'
    # what its views differ in, as SCM change sets, groups or nodes (resolved through the store's SCM by
    # :meth:`style`); None: the maker does not say, so it must override :meth:`style`
    changes: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, normalize: Normalize, n_views: int = DEFAULT_VIEWS, **options: Any):
        if n_views != DEFAULT_VIEWS and not self.any_views:
            raise UserError(f"--n-views {n_views}: view maker {getattr(self, 'registry_name', type(self).__name__)} "
                            f"makes a fixed set of views (use --n-views {DEFAULT_VIEWS}); only DA view makers (crops, "
                            "colour, none, paper004_*, not rotation) make J views")
        if self.any_views:
            self.n_views = n_views
        self.normalize = normalize
        self.last_params: dict[str, torch.Tensor] = {}  # sampled parameters of the last call, for logging

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        raise NotImplementedError

    def style(self, scm: SCM, stored_views: Mapping[str, Sequence[str]],
              da_style: Mapping[str, Sequence[str]] | None = None) -> Style:
        """The latents this maker's views differ in (its style; the rest is content) on a store with SCM ``scm`` and
        stored views {name: changed latents}; ``da_style``: {DA recipe: latents} overriding a recipe's targets.
        Here: ``changes`` resolved through the SCM."""
        if self.changes is None:
            raise NotImplementedError(f"view maker {type(self).__name__} does not say what its views change: set "
                                      "`changes` or override `style`")
        style = Style(set())
        if self.changes:
            style.add(self.registry_name, resolve_targets(scm, self.changes))
        return style

    def bind(self, dataset: StoreBatches, objective: Objective, seed: int) -> None:
        """Take what the maker needs from the run's dataset and objective before the first batch (LT-NN: the
        partner search, CRL-TAC: its draws per image); default: nothing."""
