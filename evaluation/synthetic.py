"""Scores of a synthetic run against its known latents: linear R^2 (all latents, and per group such as content
and style), kernel R^2 per group, and MCC (papers 000/001; of the content block where the representation is meant
to hold only it), or per modality the R^2 of each latent group from that modality's encoding (paper 005), on
held-out draws of the run's own source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ident3d.evaluation.mcc import report_mcc
from ident3d.evaluation.metric_suite import ScoringData, table_values
from ident3d.evaluation.metric_suite import score as score_metrics
from ident3d.evaluation.regression import R2Result, r2_per_latent
from ident3d.evaluation.spectrum import std_spectrum, top_dim_correlations
from ident3d.training.run_dir import RunDir
from ident3d.training.synthetic.run import source_of


def score(h_fit: np.ndarray, z_fit: np.ndarray, h_test: np.ndarray, z_test: np.ndarray,
          latent_names: Sequence[str], groups: Mapping[str, Sequence[str]], kernel: bool = False,
          kernel_max: int = 2000) -> dict[str, float]:
    """{"linear_r2": mean over latents, "linear_r2/GROUP", "kernel_r2", "kernel_r2/GROUP", "latent_r2/NAME" (linear,
    per latent), and the out-of-sample Pearson MCC under the name that says what it is (``evaluation.mcc.report_mcc``):
    "mcc" (cl-ica's) when the representation has as many dimensions as there are latents, "mcc_content" (the MCC of
    the "content" group) when it has fewer and as many as the content latents (paper 000: 5 codes for 5 content of 10
    latents), else no MCC key}. A latent constant on either split has no R^2: its "latent_r2/NAME" is NaN and every
    mean leaves it out (a mean over no defined latent is NaN); an MCC the metric refuses (a constant latent, too few
    samples) is NaN. Kernel ridge (exact, papers' grid) on the first ``kernel_max`` fit rows."""
    out: dict[str, float] = {}
    lin, ker = r2_results(h_fit, z_fit, h_test, z_test, kernel, kernel_max)
    out["linear_r2"] = lin.mean()
    corr = report_mcc(z_fit, h_fit, z_test, h_test, latent_names, groups.get("content"))
    if corr.name is not None:
        out[corr.name] = float("nan") if corr.value is None else corr.value
    if ker is not None:
        out["kernel_r2"] = ker.mean()
    out.update(group_means(lin, ker, latent_names, groups))
    for name, value in zip(latent_names, lin.scores, strict=True):
        out[f"latent_r2/{name}"] = float(value)
    return out


def r2_results(h_fit: np.ndarray, z_fit: np.ndarray, h_test: np.ndarray, z_test: np.ndarray, kernel: bool,
               kernel_max: int) -> tuple[R2Result, R2Result | None]:
    """(linear R^2 per latent, kernel R^2 per latent or None): kernel ridge (exact) on the first ``kernel_max`` rows
    of each split."""
    lin = r2_per_latent(h_fit, z_fit, h_test, z_test, kind="linear")
    if not kernel:
        return lin, None
    k = min(kernel_max, len(h_fit))
    return lin, r2_per_latent(h_fit[:k], z_fit[:k], h_test[:k], z_test[:k], kind="kernel", exact_max=k)


def group_means(lin: R2Result, ker: R2Result | None, latent_names: Sequence[str],
                groups: Mapping[str, Sequence[str]], prefix: str = "") -> dict[str, float]:
    """{"linear_r2/PREFIXGROUP": mean linear R^2 of the group's latents, and "kernel_r2/PREFIXGROUP" where ``ker``}."""
    index = {n: i for i, n in enumerate(latent_names)}
    out: dict[str, float] = {}
    for group, members in groups.items():
        cols = [index[m] for m in members]
        out[f"linear_r2/{prefix}{group}"] = lin.mean(cols)
        if ker is not None:
            out[f"kernel_r2/{prefix}{group}"] = ker.mean(cols)
    return out


def modality_scores(hs_fit: Sequence[np.ndarray], z_fit: np.ndarray, hs_test: Sequence[np.ndarray],
                    z_test: np.ndarray, latent_names: Sequence[str], groups: Mapping[str, Sequence[str]],
                    kernel: bool = False, kernel_max: int = 2000) -> dict[str, float]:
    """Paper 005's read-out: for the encoding of each modality k = 1, 2, ... (``hs_fit[k - 1]``), the mean R^2 of
    each latent group from it, as "linear_r2/xK/GROUP" and, with ``kernel``, "kernel_r2/xK/GROUP" (R^2 per latent as
    in ``score``, kernel ridge on the first ``kernel_max`` rows of each split)."""
    out: dict[str, float] = {}
    for k, (h_fit, h_test) in enumerate(zip(hs_fit, hs_test, strict=True), start=1):
        lin, ker = r2_results(h_fit, z_fit, h_test, z_test, kernel, kernel_max)
        out.update(group_means(lin, ker, latent_names, groups, prefix=f"x{k}/"))
    return out


@torch.no_grad()
def encode_modalities(run: Any, source: Any, n: int, seed: int, device: str = "cpu",
                      batch_size: int = 8192) -> tuple[list[np.ndarray], np.ndarray]:
    """([representation (n, D) of each modality], true latents (n, L)) of held-out draw ``seed`` of a synthetic run's
    source (``run``: the run loaded), each modality encoded by the objective's encoder of it."""
    objective = run.objective(device, in_dim=source.obs_dim)
    xs, z = source.eval_modalities(n, seed)
    hs = [torch.cat([objective.modality_representation(x[i:i + batch_size], k) for i in range(0, n, batch_size)])
          for k, x in enumerate(xs)]
    return [h.float().cpu().numpy() for h in hs], z.float().cpu().numpy()


def encode_source(run_dir: str | Path, n: int, seed: int, device: str = "cpu",
                  batch_size: int = 8192, run: Any = None) -> tuple[np.ndarray, np.ndarray, Any]:
    """(representation (n, D), true latents (n, L), source) of held-out draw ``seed`` of a synthetic run's source
    (its first modality), encoded with the run's trained weights (``run``: the run already loaded, else it is
    loaded from ``run_dir``)."""
    run = RunDir(Path(run_dir)).load() if run is None else run
    source = source_of(run.cfg, device)
    hs, z = encode_modalities(run, source, n, seed, device, batch_size)
    return hs[0], z, source


def spectrum_scores(h: np.ndarray, z: np.ndarray, informative: Sequence[int], top: int = 4) -> dict[str, float]:
    """Paper 003's read-out: the representation's per-dimension stds, sorted ("spectrum/1" the largest, ...),
    and the mean matched |corr| of the len(informative) highest-std dims with the informative latents."""
    stds, _ = std_spectrum(h)
    out = {f"spectrum/{i + 1}": float(s) for i, s in enumerate(stds[:top])}
    out["top_corr"] = top_dim_correlations(h, z, k=len(informative), informative=informative)["mean"]
    return out


def evaluate_synthetic(run_dir: str | Path, n_fit: int = 10000, n_score: int = 10000, kernel: bool = False,
                       device: str = "cpu", metrics: Sequence[str] = ()) -> dict[str, float]:
    """Scores of a synthetic run (see ``score``), fit and scored on two independent held-out draws; a source of
    several modalities (paper 005) gets ``modality_scores`` instead; sources with an "informative" latent group
    (paper 003) also get ``spectrum_scores`` on the scoring draw, and ``metrics`` (registered names,
    ``ident3d.evaluation.metric_suite``) their ``NAME/COLUMN`` numbers (of modality 1's encoding)."""
    run = RunDir(Path(run_dir)).load()  # once, for both draws and the metrics
    source = source_of(run.cfg, device)
    hs_fit, z_fit = encode_modalities(run, source, n_fit, 1, device)
    hs_test, z_test = encode_modalities(run, source, n_score, 2, device)
    names, groups = source.latent_names, source.latent_groups
    if source.modalities > 1:
        out = modality_scores(hs_fit, z_fit, hs_test, z_test, names, groups, kernel=kernel)
    else:
        out = score(hs_fit[0], z_fit, hs_test[0], z_test, names, groups, kernel=kernel)
    h_fit, h_test = hs_fit[0], hs_test[0]
    if "informative" in groups:
        idx = [names.index(n) for n in groups["informative"]]
        out.update(spectrum_scores(h_test, z_test, idx))
    if metrics:
        data = ScoringData(z_fit, h_fit, z_test, h_test, source=source)
        out.update(table_values(score_metrics(run, data, metrics)))
    return out
