"""The time-contrastive view maker of sequence stores: an anchor frame x_t and the next frame x_{t+1} of the same
sequence (the last frame of a sequence is paired with the one before it), so any pair objective (InfoNCE and its
family) trains the time-contrastive baseline of CITRIS's benchmarks through ``ident3d train``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from ident3d.causal.errors import UserError
from ident3d.store.zarr_io import read_rows, store_group
from ident3d.training.registry import VIEWS
from ident3d.training.views.base import Style, ViewMaker, to_float

if TYPE_CHECKING:
    import zarr

    from ident3d.causal.scm import SCM
    from ident3d.training.data import StoreBatches
    from ident3d.training.objective_parts.base import Objective


class NextFramePairs:
    """A dataset's pairing: each anchor row's neighbour in time (row + 1, or row - 1 at a sequence's last step),
    with its images, latents, row ids and the targets of the step between them."""

    def __init__(self, dataset: StoreBatches):

        group: zarr.Group = store_group(dataset.info.path, mode="r")
        self.dataset = dataset
        self.time = read_rows(group["time"], slice(None), dataset.info.path)
        self.last = int(dataset.info.attrs.sequences["length"]) - 1
        self.targets = read_rows(group["interventions"], slice(None), dataset.info.path)

    def partners(self, rows: np.ndarray) -> np.ndarray:
        """The neighbour in time of every anchor row (within its sequence: chunks hold whole sequences)."""
        return np.where(self.time[rows] < self.last, rows + 1, rows - 1)

    def __call__(self, rows: np.ndarray, arrays: dict[str, np.ndarray], batch: int) -> dict[str, np.ndarray]:
        partners = self.partners(rows)
        got = self.dataset.rows(partners)
        later = np.maximum(rows, partners)  # the frame the step reached holds its targets
        return {"pair/images": got["images"], "pair/latents": got["latents"], "pair/index": partners,
                "pair/interventions": self.targets[later]}


@VIEWS.register("next_frame")
class NextFrameViews(ViewMaker):
    """Time-contrastive pairs (x_t, x_{t+1}) of a sequence store (rendered with --sequences, or imported)."""

    requires = ("pair/images",)
    data_needs = frozenset({"sequences"})

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        return [self.normalize(to_float(batch["images"])), self.normalize(to_float(batch["pair/images"]))]

    def style(self, scm: SCM, stored_views: Mapping[str, Sequence[str]],
              da_style: Mapping[str, Sequence[str]] | None = None) -> Style:
        """Every factor: in one step each one moves (by its dynamics, or by an intervention), none is kept."""
        return Style(set(scm.names))

    def bind(self, dataset: StoreBatches, objective: Objective, seed: int) -> None:
        """Pair each anchor with its neighbour in time; the store must hold sequences."""
        if not dataset.info.attrs.sequences:
            raise UserError(f"view maker next_frame needs a sequence store (ident3d render --sequences, or ident3d "
                            f"import --format temporal_causal3dident); {dataset.info.path} holds i.i.d. images")
        dataset.pairing = NextFramePairs(dataset)


@VIEWS.register("next_frame_targets")
class NextFrameTargetViews(NextFrameViews):
    """[x_t, x_{t+1}, the step's targets per causal variable] for ``citris_vae`` and ``ivae_temporal``.

    The pair comes in time order; the targets say, per causal variable of the store's dynamic SCM (nodes intervened
    on jointly form one variable), whether the step intervened on it."""

    n_views = 3

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None) -> list[torch.Tensor]:
        anchor, partner = self.normalize(to_float(batch["images"])), self.normalize(to_float(batch["pair/images"]))
        forward = (batch["pair/index"] > batch["index"]).view(-1, 1, 1, 1)
        earlier, later = torch.where(forward, anchor, partner), torch.where(forward, partner, anchor)
        nodes = batch["pair/interventions"]
        targets = nodes.float() @ self.node_to_variable.to(nodes.device)
        return [earlier, later, (targets > 0).to(earlier.dtype)]

    def bind(self, dataset: StoreBatches, objective: Objective, seed: int) -> None:
        """Pair frames in time and map the store's per-node targets to its causal variables; the objective's
        ``n_vars`` must be their number."""
        super().bind(dataset, objective, seed)
        from ident3d.causal.loading import load_dynamic_scm
        from ident3d.training.temporal.variables import causal_variables, node_variable

        model = load_dynamic_scm(dataset.info.attrs.sequences["spec"])
        variables = causal_variables(model)
        owner = torch.from_numpy(node_variable(variables, len(model.names)))
        self.node_to_variable = torch.nn.functional.one_hot(owner, len(variables)).float()  # (nodes, variables)
        want = getattr(objective, "n_vars", len(variables))
        if want != len(variables):
            raise UserError(f"the store's dynamic SCM has {len(variables)} causal variables ({', '.join(variables)}); "
                            f"the objective has n_vars {want}: pass --hp n_vars={len(variables)}")
