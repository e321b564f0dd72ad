"""Sources of paper 003's experiments: sets of views of each anchor for the GIN set-NLL objective.

* ``GaussianMixtureSets``: 2 informative latents from a 5-component Gaussian mixture + 8 noise latents
  (std 0.01), a fixed dataset mixed by a frozen random RealNVP; each anchor becomes a set of views by adding
  N(0, 1) to chosen latent dims before mixing (optionally N(0, data_noise^2) after).
* ``EMNISTSets``: EMNIST digits; the set is the original plus its 7 affine augmentations (translation,
  rotation, scaling and their combinations), all with pixel noise 0.01, flattened to vectors.

Anchors are visited epoch by epoch (a fresh permutation of the dataset per epoch), so batch b is a pure
function of (seed, b) and B = 1000 on 10,000 points gives the paper's 10 steps per epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torchvision
from torch.nn import functional as F

from ident3d.causal.errors import MissingData, UserError
from ident3d.causal.rng import stream_key
from ident3d.training.flows import RealNVPMixing
from ident3d.training.synthetic.base import SOURCES, VectorSource

NOISE_LATENT_STD = 0.01
EMNIST_SIZE = 28
# the set's views after the original: bit 1 translate, bit 2 rotate, bit 4 scale (paper 003, appendix B)
AUGMENTATIONS = {"translate": 1, "rotate": 2, "scale": 4, "translate+rotate": 3, "translate+scale": 5,
                 "rotate+scale": 6, "translate+rotate+scale": 7}
MAX_SHIFT, MAX_DEGREES, SCALE_RANGE = 0.1, 5.0, (0.8, 1.25)  # shift as a fraction of the image side


def epoch_indices(b: int, batch_size: int, n: int, perm: Callable[[int], torch.Tensor]) -> torch.Tensor:
    """Dataset rows of batch b when epochs e = 0, 1, ... visit the rows in the order ``perm(e)``."""
    start = b * batch_size
    first, last = start // n, (start + batch_size - 1) // n
    order = torch.cat([perm(e) for e in range(first, last + 1)])
    return order[start - first * n : start - first * n + batch_size]


@SOURCES.register("gmm_sets")
class GaussianMixtureSets(VectorSource):
    """Paper 003 synthetic: GMM latents (2 informative + 8 noise) -> random RealNVP; sets by latent noise."""

    n_views = 10

    def __init__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu", n_points: int = 10000,
                 informative: int = 2, noise_dims: int = 8, components: int = 5,
                 augment_dims: Sequence[int] = (0,), set_size: int = 10, data_noise: float = 0.0,
                 mixing_blocks: int = 8):
        super().__init__(batch_size, seed, device)
        dim = informative + noise_dims
        if informative < 1 or noise_dims < 0 or components < 1 or n_points < 1 or mixing_blocks < 1:
            raise UserError("gaussian mixture sets: informative, components, n_points and mixing_blocks must be "
                            ">= 1 and noise_dims >= 0")
        if not augment_dims or any(not 0 <= d < dim for d in augment_dims) or len(set(augment_dims)) < len(
                augment_dims):
            raise UserError(f"augment_dims must be distinct latent indices in 0..{dim - 1}, got {list(augment_dims)}")
        if set_size < 2:
            raise UserError(f"set_size must be >= 2 (views per anchor), got {set_size}")
        if not data_noise >= 0:
            raise UserError(f"data_noise must be >= 0, got {data_noise}")
        self.n_views = set_size
        self.informative, self.components, self.n_points = informative, components, n_points
        self.augment_dims, self.data_noise, self.mixing_blocks = list(augment_dims), float(data_noise), mixing_blocks
        self.obs_dim = dim
        self.latent_names = [f"z{i + 1}" for i in range(dim)]
        self.latent_groups = {"informative": self.latent_names[:informative],
                              "noise": self.latent_names[informative:]}
        g = self.generator("gmm")
        self.means = torch.rand(components, informative, generator=g, device=self.device) * 10 - 5
        self.stds = torch.rand(components, informative, generator=g, device=self.device) * 2.5 + 0.5
        self.latents = self.sample_latents(n_points, self.generator("dataset"))
        self.mixing = RealNVPMixing(dim, mixing_blocks, seed=stream_key(seed, "realnvp-mixing") % 2**63).to(self.device)

    def sample_latents(self, n: int, gen: torch.Generator) -> torch.Tensor:
        """n latents, components in equal shares (row i from component i mod 5), noise dims with std 0.01."""
        labels = torch.arange(n, device=self.device) % self.components
        inform = torch.randn(n, self.informative, generator=gen, device=self.device)
        noise = torch.randn(n, self.obs_dim - self.informative, generator=gen, device=self.device)
        return torch.cat([self.means[labels] + inform * self.stds[labels], noise * NOISE_LATENT_STD], dim=1)

    def view_latents(self, b: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(anchor latents (B, L), the set's latents (K, B, L)): N(0, 1) added along ``augment_dims`` only."""
        rows = epoch_indices(b, self.batch_size, self.n_points,
                             lambda e: torch.randperm(self.n_points, generator=self.generator("epoch", e),
                                                      device=self.device))
        z = self.latents[rows]
        shift = torch.zeros(self.n_views, *z.shape, device=self.device)
        shift[..., self.augment_dims] = torch.randn(self.n_views, z.shape[0], len(self.augment_dims),
                                                    generator=self.generator("augment", b), device=self.device)
        return z, z.unsqueeze(0) + shift

    @torch.no_grad()
    def batch(self, b: int) -> dict[str, torch.Tensor]:
        z, zs = self.view_latents(b)
        x = self.mixing(zs.flatten(0, 1)).view(zs.shape)
        if self.data_noise > 0:
            x = x + self.data_noise * torch.randn(x.shape, generator=self.generator("data-noise", b),
                                                  device=self.device)
        return {**{f"x{k}": x[k] for k in range(self.n_views)}, "latents": z}

    @torch.no_grad()
    def eval_set(self, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """n fresh anchors from the same mixture, mixed without augmentation or data noise."""
        z = self.sample_latents(n, self.generator("eval", seed))
        return self.mixing(z), z

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "n_points": self.n_points, "components": self.components,
                "augment_dims": self.augment_dims, "set_size": self.n_views, "data_noise": self.data_noise,
                "mixing_blocks": self.mixing_blocks, "gmm_means": self.means.cpu().tolist(),
                "gmm_stds": self.stds.cpu().tolist()}


def load_emnist_digits(root: str | Path, train: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """EMNIST digits from a local torchvision root: (uint8 images (N, 28, 28) upright, int64 labels (N,))."""
    try:
        ds = torchvision.datasets.EMNIST(str(root), split="digits", train=train, download=False)
    except RuntimeError:
        raise MissingData(f"EMNIST digits not found under {Path(root) / 'EMNIST'}; fetch them once with "
                        f"torchvision.datasets.EMNIST({str(root)!r}, split='digits', download=True) "
                        "or point the source's root (e.g. source: {kind: emnist_sets, root: DIR}) at them") from None
    return ds.data.transpose(1, 2).contiguous(), ds.targets.long()


def emnist_standin(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """n digit-like 28x28 uint8 images (a jittered stroke through one of 10 fixed class templates) and labels."""
    templates = torch.rand(10, 5, 2, generator=torch.Generator().manual_seed(3)) - 0.5
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(10, (n,), generator=g)
    ctrl = templates[labels] + 0.08 * torch.randn(n, 5, 2, generator=g)
    width = 0.08 + 0.06 * torch.rand(n, 1, generator=g)
    t = torch.linspace(0, 1, 12).view(1, 1, 12, 1)
    points = (ctrl[:, :-1, None] * (1 - t) + ctrl[:, 1:, None] * t).flatten(1, 2)  # (n, 48, 2) along the stroke
    axis = (torch.arange(EMNIST_SIZE) + 0.5) / EMNIST_SIZE * 2 - 1
    grid = torch.stack(torch.meshgrid(axis, axis, indexing="xy"), dim=-1).view(1, -1, 2)
    d2 = torch.cdist(grid.expand(n, -1, -1), points).amin(dim=2).pow(2)
    ink = torch.exp(-d2 / (2 * width**2))
    return (ink * 255).round().to(torch.uint8).view(n, EMNIST_SIZE, EMNIST_SIZE), labels


def affine_views(images: torch.Tensor, kinds: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """images (N, 28, 28) in [0, 1] moved by random affine maps; kinds (N,) bit masks of AUGMENTATIONS."""
    n, device = images.shape[0], images.device
    u = torch.rand(n, 4, generator=gen, device=device)
    on = [((kinds & bit) > 0).to(images.dtype) for bit in (1, 2, 4)]
    shift = (u[:, :2] * 2 - 1) * MAX_SHIFT * 2 * on[0][:, None]  # normalised coordinates span 2 per side
    angle = torch.deg2rad(u[:, 2] * MAX_DEGREES) * on[1]
    scale = 1 + (SCALE_RANGE[0] + u[:, 3] * (SCALE_RANGE[1] - SCALE_RANGE[0]) - 1) * on[2]
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    inv = torch.stack([torch.stack([cos, sin], 1), torch.stack([-sin, cos], 1)], 1)  # (s R(angle))^-1
    theta = torch.cat([inv, -(inv @ shift.unsqueeze(2))], dim=2)  # output pixel p samples input at inv (p - shift)
    grid = F.affine_grid(theta, [n, 1, EMNIST_SIZE, EMNIST_SIZE], align_corners=False)
    return F.grid_sample(images.unsqueeze(1), grid, align_corners=False).squeeze(1)


@SOURCES.register("emnist_sets")
class EMNISTSets(VectorSource):
    """Paper 003 EMNIST: set = original + 7 affine augmentations (+ noise 0.01), flattened 784-d vectors."""

    n_views = 1 + len(AUGMENTATIONS)
    obs_dim = EMNIST_SIZE * EMNIST_SIZE
    latent_names = ["digit"]
    latent_groups: dict[str, list[str]] = {}

    def __init__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu",
                 root: str | Path = "data", noise: float = 0.01, standin: int = 0):
        super().__init__(batch_size, seed, device)
        if not noise >= 0 or standin < 0:
            raise UserError(f"EMNIST sets: noise and standin must be >= 0, got {noise} and {standin}")
        self.root, self.noise, self.standin = Path(root), float(noise), standin
        images, labels = emnist_standin(standin, stream_key(seed, "standin") % 2**63) if standin else \
            load_emnist_digits(root)
        self.images, self.labels = images.to(self.device), labels.to(self.device)

    @torch.no_grad()
    def batch(self, b: int) -> dict[str, torch.Tensor]:
        n = self.images.shape[0]
        rows = epoch_indices(b, self.batch_size, n, lambda e: torch.randperm(
            n, generator=self.generator("epoch", e), device=self.device))
        x = self.images[rows].float() / 255
        kinds = torch.tensor(list(AUGMENTATIONS.values()), device=self.device).repeat_interleave(len(rows))
        moved = affine_views(x.repeat(len(AUGMENTATIONS), 1, 1), kinds, self.generator("affine", b))
        views = torch.cat([x.unsqueeze(0), moved.view(len(AUGMENTATIONS), *x.shape)]).flatten(2)
        views = views + self.noise * torch.randn(views.shape, generator=self.generator("noise", b), device=self.device)
        return {**{f"x{k}": views[k] for k in range(self.n_views)}, "latents": self.labels[rows].float()[:, None]}

    @torch.no_grad()
    def eval_set(self, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """n test digits (a seeded subset of EMNIST's test split, or fresh stand-ins), flattened, no noise."""
        if self.standin:
            images, labels = emnist_standin(n, stream_key(self.seed, "standin-eval", seed) % 2**63)
        else:
            images, labels = load_emnist_digits(self.root, train=False)
            keep = torch.randperm(images.shape[0], generator=torch.Generator().manual_seed(seed))[:n]
            images, labels = images[keep], labels[keep]
        x = images.to(self.device).float().flatten(1) / 255
        return x, labels.to(self.device).float()[:, None]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "views": ["original", *AUGMENTATIONS], "noise": self.noise,
                "max_shift": MAX_SHIFT, "max_degrees": MAX_DEGREES, "scale_range": list(SCALE_RANGE),
                "standin": self.standin, "root": str(self.root)}

