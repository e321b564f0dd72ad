"""Per-modality scores of an image/text run (Daunhawer et al., ICLR 2023): how well each latent of the test store can
be read from the image encoding and from the caption encoding, with each latent's block (shared, perturbed or
image-specific, from the store's caption spec), the theory's prediction for that block, and chance levels beside.

- Continuous latents: R^2 of a linear and a kernel (RBF ridge, cross-validated) regression, fitted on the fit rows and
  scored on the score rows, as the paper's code does. A hue that spans the whole colour circle (its scene binding
  maps the latent's range onto a full turn, e.g. multimodal3dident's object hue) is circular: it is scored as the
  mean R^2 of (cos 2 pi h, sin 2 pi h), so hue 0.99 and 0.01 are near, and flagged ``circular``.
- Discrete latents (the class node and every categorical node): accuracy and the Matthews correlation
  (``sklearn.metrics.matthews_corrcoef``, as Cai et al. 2025) of a logistic regression.
- A latent constant on the scored rows (multimodal3dident's z) is undefined: NaN, named, left out of every mean.
- Blocks: a latent the captions state is *shared*, or *perturbed* where the spec resamples it with probability > 0;
  every other latent is *image-specific*. The theory: shared latents are identified from both encodings (up to a
  block-wise map); image-specific ones are discarded by both; perturbed ones only as far as the captions keep them.

The table's columns are block means of each latent's primary score (R^2 linear for continuous latents, the MCC for
discrete ones) per modality; the report's JSON keeps every latent's numbers, block, prediction and chance level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import matthews_corrcoef
from sklearn.preprocessing import StandardScaler

from ident3d.causal.errors import UserError
from ident3d.causal.yamlnum import load_yaml
from ident3d.evaluation.metric_base import Metric, ScoringData, register_metric
from ident3d.evaluation.regression import r2_per_latent
from ident3d.render.captions import TEXTS_DIR
from ident3d.render.text_plan import HUE_TARGETS
from ident3d.store.zarr_io import read_rows, store_group

BLOCKS = ("shared", "perturbed", "specific")
PREDICTION = {"shared": "identified from both encodings (score near 1)",
              "perturbed": "identified only as far as the captions keep it (between)",
              "specific": "discarded by both encodings (near chance)"}
MODALITIES = ("image", "text")


def latent_blocks(text_attr: Mapping[str, Any] | None, names: Sequence[str]) -> dict[str, str]:
    """Each latent's block from a store's ``text`` attribute: shared (stated), perturbed (stated, resampled with a
    probability > 0) or specific (never stated). An imported store without a spec states the built-in's latents."""
    spec = (text_attr or {}).get("spec") or published_spec()
    states = spec["states"]
    stated = {states[p]["latent"] for p in spec.get("select") or list(states)}
    perturbed = {states[p]["latent"] for p, q in (spec.get("perturb") or {}).items() if q > 0}
    return {n: ("perturbed" if n in perturbed else "shared") if n in stated else "specific" for n in names}


def published_spec() -> dict[str, Any]:
    """What the published Multimodal3DIdent captions state (an imported store records no spec: their sentence forms
    are the generator's): the states of the built-in caption spec that follows its rules."""
    return load_yaml((TEXTS_DIR / "multimodal3dident.yaml").read_text())


def circular_latents(scene_spec: Mapping[str, Any] | None, scm: Mapping[str, Any] | None) -> set[str]:
    """Latents bound to a hue whose declared range covers a whole turn (scale x range width >= 1)."""
    ranges = {n["name"]: n.get("range") for n in (scm or {}).get("nodes", [])}
    out = set()
    for b in (scene_spec or {}).get("latents", []):
        span, hue = ranges.get(b["name"]), str(b.get("target", "")).endswith(HUE_TARGETS)
        if hue and span and abs(b.get("scale", 1.0)) * (span[1] - span[0]) >= 1:
            out.add(b["name"])
    return out


def discrete_latents(scm: Mapping[str, Any] | None) -> set[str]:
    """The SCM's categorical nodes (the class node among them)."""
    return {n["name"] for n in (scm or {}).get("nodes", []) if n.get("mechanism", {}).get("type") == "categorical"}


def classify(h_fit: np.ndarray, y_fit: np.ndarray, h_score: np.ndarray, y_score: np.ndarray,
             seed: int) -> dict[str, float]:
    """Accuracy and MCC of a logistic regression (standardised codes) predicting a discrete latent; NaN where the
    fit rows hold one value only."""
    if len(np.unique(y_fit)) < 2 or len(np.unique(y_score)) < 2:
        return {"accuracy": math.nan, "mcc": math.nan}
    scaler = StandardScaler().fit(h_fit)
    model = LogisticRegression(max_iter=2000, random_state=seed).fit(scaler.transform(h_fit), y_fit)
    guess = model.predict(scaler.transform(h_score))
    return {"accuracy": float(np.mean(guess == y_score)), "mcc": float(matthews_corrcoef(y_score, guess))}


def regress(h_fit: np.ndarray, y_fit: np.ndarray, h_score: np.ndarray, y_score: np.ndarray, circular: bool,
            kernel_max: int, seed: int) -> dict[str, float]:
    """Linear and kernel R^2 of a continuous latent (a circular one as the mean over its cos and sin)."""
    if circular:
        y_fit = np.stack([np.cos(2 * np.pi * y_fit), np.sin(2 * np.pi * y_fit)], 1)
        y_score = np.stack([np.cos(2 * np.pi * y_score), np.sin(2 * np.pi * y_score)], 1)
    lin = r2_per_latent(h_fit, y_fit, h_score, y_score, kind="linear")
    k = min(kernel_max, len(h_fit))
    ker = r2_per_latent(h_fit[:k], y_fit[:k], h_score[:k], y_score[:k], kind="kernel", exact_max=k, seed=seed)
    return {"r2_linear": finite_mean(lin.scores), "r2_kernel": finite_mean(ker.scores)}


def finite_mean(scores: np.ndarray) -> float:
    """The mean of a latent's R^2 columns (a circular latent has two), NaN if any is undefined."""
    return float(np.mean(scores)) if np.all(np.isfinite(scores)) else math.nan


def chance(y_score: np.ndarray, discrete: bool) -> dict[str, float]:
    """What an encoding that knows nothing scores: the majority class's rate and MCC 0, or R^2 0."""
    if discrete:
        return {"accuracy": float(np.max(np.unique(y_score, return_counts=True)[1]) / len(y_score)), "mcc": 0.0}
    return {"r2_linear": 0.0, "r2_kernel": 0.0}


def primary(scores: Mapping[str, float], discrete: bool) -> float:
    """A latent's number in the block means: its MCC (discrete) or linear R^2 (continuous)."""
    return scores["mcc"] if discrete else scores["r2_linear"]


def score_latents(codes: Mapping[str, tuple[np.ndarray, np.ndarray]], factors: Mapping[str, tuple[np.ndarray,
                  np.ndarray]], blocks: Mapping[str, str], discrete: set[str], circular: set[str],
                  kernel_max: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Every latent from every modality's codes: {"per_latent": {latent: {...}}, "MODALITY/BLOCK": mean}.

    ``codes``: modality -> (fit codes, score codes); ``factors``: latent -> (fit values, score values)."""
    per: dict[str, Any] = {}
    for name, (y_fit, y_score) in factors.items():
        is_discrete = name in discrete
        entry: dict[str, Any] = {"block": blocks[name], "prediction": PREDICTION[blocks[name]],
                                 "kind": "discrete" if is_discrete else "circular" if name in circular else
                                 "continuous"}
        if np.ptp(y_fit) == 0 or np.ptp(y_score) == 0:
            entry["undefined"] = "constant on the scored rows"
            per[name] = entry
            continue
        entry["chance"] = chance(y_score, is_discrete)
        for modality, (h_fit, h_score) in codes.items():
            entry[modality] = (classify(h_fit, y_fit.astype(np.int64), h_score, y_score.astype(np.int64), seed)
                               if is_discrete else regress(h_fit, y_fit, h_score, y_score, name in circular,
                                                           kernel_max, seed))
        per[name] = entry
    out: dict[str, Any] = {"per_latent": per}
    for modality in codes:
        for block in BLOCKS:
            values = [primary(e[modality], e["kind"] == "discrete") for e in per.values()
                      if e["block"] == block and modality in e]
            values = [v for v in values if math.isfinite(v)]
            out[f"{modality}/{block}"] = float(np.mean(values)) if values else math.nan
    return out


@register_metric("modality_probes")
class ModalityProbes(Metric):
    """Each latent read from the image encoding and from the caption encoding of an image/text run (R^2 linear and
    kernel, or accuracy and MCC), by block (shared, perturbed, image-specific), with the theory's prediction and
    chance levels; columns: the block means per modality (``evaluation.modality_metrics``). A run without a text
    encoder (an image-pair or supervised row beside the image/text rows) is scored on its images; its text columns
    are NaN."""

    needs = frozenset({"codes", "run", "store"})
    data_needs = frozenset({"text"})
    columns = tuple(f"{m}/{b}" for m in MODALITIES for b in BLOCKS)

    def __call__(self, run: Any, data: ScoringData) -> dict[str, Any]:
        info = data.store
        if not info.attrs.text:
            raise UserError(f"needs a test store with captions; {info.path} has none")
        objective = run.objective("cpu", image_size=info.image_size)
        n = len(data.codes_fit)
        codes = {"image": (data.codes_fit, data.codes_score)}
        if hasattr(objective, "caption_representation"):  # an image/text run; any other is scored on its images
            rows = np.asarray(data.encoded["rows"])
            captions = read_rows(store_group(info.path, mode="r")["text"], slice(None), info.path)[rows]
            with torch.no_grad():
                text = np.concatenate([objective.caption_representation(list(captions[i:i + 256])).float().numpy()
                                       for i in range(0, len(captions), 256)])
            codes["text"] = (text[:n], text[n:])
        attrs = info.attrs
        values = {name: data.encoded["latents"][:, j] for j, name in enumerate(attrs.latent_names)}
        if attrs.class_node and "classes" in data.encoded:
            values = {attrs.class_node: data.encoded["classes"], **values}
        factors = {name: (v[:n].astype(np.float64), v[n:].astype(np.float64)) for name, v in values.items()}
        out = score_latents(codes, factors, latent_blocks(attrs.text, list(factors)), discrete_latents(attrs.scm),
                            circular_latents(attrs.scene_spec, attrs.scm), seed=data.seed)
        return {**dict.fromkeys(self.columns, math.nan), **out}  # a run without a text encoder: text columns NaN
