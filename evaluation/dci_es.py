"""DCI-ES explicitness (E): how little probe capacity a representation needs to predict each factor well, as one
minus the normalised area under its loss-capacity curve (Eastwood et al., "DCI-ES: an extended disentanglement
framework with connections to identifiability", ICLR 2023).

Per factor j, with probes of increasing capacity k_1 < ... < k_n, test losses l(k), a baseline loss l_b (the loss
of predicting the mean: 1 for 1 - R^2) and a lowest loss l*:
  the curve is the best loss reached up to each capacity (running minimum, as the authors' code), capped at l_b
  (the mean predictor is always available); AULCC_j = trapezoidal area between the curve and l* over [k_1, k_n];
  E_j = 1 - AULCC_j / Z_j with Z_j = (k_n - k_1)(l_b - l*) / 2, the area of the triangle from (k_1, l_b) down to
  (k_n, l*), the normaliser drawn in the paper's loss-capacity figure (the authors' code divides by the rectangle
  and doubles the area). So E = 1 when the smallest probe already reaches l*, 0 for a straight descent from l_b
  to l*, and -1 for a curve that stays at l_b.
What could be checked here (the authors' repository andreinicolicioiu/DCI-ES, its metrics/explitcitness.py and the
figure script; not the paper's text): their ICLR evaluation normalises with l* = 0 ("we assume l* = 0") but
measures the area above the curve's own minimum, which scores a curve flat at l_b as E = 1; here the same l* is
used in both (default 0; ``lowest_loss=None`` takes each curve's own minimum, the figure's l*). Tree probes use
depth as capacity (their random-forest runs, depths 1..32); their MLP probes use log(#parameters).
Size (S), the framework's other new measure, is not implemented: its definition could not be checked here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import RandomForestRegressor

from ident3d.causal.errors import UserError
from ident3d.evaluation.metric_inputs import as_matrix, fit_test, r2_columns, standardise

DEPTHS = (1, 2, 3, 4, 6, 8, 12)


@dataclass(frozen=True)
class ExplicitnessResult:
    """DCI-ES explicitness: mean E over factors, E per factor and the loss-capacity curves behind them."""

    score: float
    per_factor: np.ndarray  # (K,)
    capacities: np.ndarray  # (n,)
    losses: np.ndarray  # (n, K) raw test losses, 1 - R^2
    probe: str


def explicitness(capacities, losses, baseline_loss: float = 1.0,
                 lowest_loss: float | None = 0.0) -> float | np.ndarray:
    """E of one loss-capacity curve (``losses`` (n,)) or of one curve per column (``losses`` (n, K)).

    ``capacities`` (n,) strictly increasing, n >= 2. A loss below a given ``lowest_loss`` counts as it; None: each
    curve's own minimum (E is NaN for a curve that never gets below ``baseline_loss``).
    """
    k = np.asarray(capacities, dtype=float)
    if k.ndim != 1 or len(k) < 2 or not np.isfinite(k).all() or (np.diff(k) <= 0).any():
        raise UserError("capacities must be a 1-D, finite, strictly increasing sequence of at least 2 values")
    one = np.ndim(losses) == 1
    loss = as_matrix(losses, "losses")
    if len(loss) != len(k):
        raise UserError(f"{len(k)} capacities but {len(loss)} losses per curve")
    curve = np.minimum(np.minimum.accumulate(loss, axis=0), baseline_loss)
    if lowest_loss is None:
        floor = curve.min(0)
    else:
        if lowest_loss >= baseline_loss:
            raise UserError(f"lowest_loss ({lowest_loss}) must be below baseline_loss ({baseline_loss})")
        floor = np.full(loss.shape[1], float(lowest_loss))
        curve = np.maximum(curve, floor)
    gap = curve - floor
    area = ((gap[1:] + gap[:-1]) / 2 * np.diff(k)[:, None]).sum(0)
    norm = (k[-1] - k[0]) * (baseline_loss - floor) / 2
    e = np.where(norm > 0, 1.0 - area / np.where(norm > 0, norm, 1.0), np.nan)
    return float(e[0]) if one else e


def loss_capacity_curves(z_fit, c_fit, z_test, c_test, depths=DEPTHS, n_estimators: int = 20,
                         seed: int = 0) -> np.ndarray:
    """(len(depths), K) test losses 1 - R^2 of random-forest probes of each max depth, one forest per factor.

    Codes and factors are standardised on the fit split; the forests see all codes.
    """
    z_fit, c_fit, z_test, c_test = fit_test(z_fit, c_fit, z_test, c_test, min_fit=10, min_test=2)
    c_fit, c_test = standardise(c_fit, c_test)
    z_fit, z_test = standardise(z_fit, z_test)
    out = np.empty((len(depths), z_fit.shape[1]))
    for i, d in enumerate(depths):
        pred = np.empty_like(z_test)
        for j in range(z_fit.shape[1]):
            forest = RandomForestRegressor(n_estimators=n_estimators, max_depth=int(d), random_state=seed, n_jobs=1)
            pred[:, j] = forest.fit(c_fit, z_fit[:, j]).predict(c_test)
        out[i] = 1.0 - r2_columns(z_test, pred)
    return out


def dci_es_explicitness(z_fit, c_fit, z_test, c_test, depths=DEPTHS, n_estimators: int = 20,
                        lowest_loss: float | None = 0.0, seed: int = 0) -> ExplicitnessResult:
    """E of codes ``c`` for factors ``z``: random-forest probes of increasing depth (capacity = depth), loss
    1 - R^2 on the test split, baseline loss 1 (the mean predictor), E averaged over factors."""
    if len(depths) < 2 or any(int(d) < 1 for d in depths):
        raise UserError(f"depths must hold at least 2 positive depths, got {tuple(depths)}")
    losses = loss_capacity_curves(z_fit, c_fit, z_test, c_test, depths, n_estimators, seed)
    e = explicitness(np.asarray(depths, float), losses, 1.0, lowest_loss)
    return ExplicitnessResult(float(np.nanmean(e)) if np.isfinite(e).any() else float("nan"), e,
                              np.asarray(depths, float), losses, f"random forest ({n_estimators} trees), depth")
