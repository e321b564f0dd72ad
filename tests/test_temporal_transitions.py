"""The transition data source (pairing, determinism per (seed, step), splitting, the shuffled-targets control), the
causal variables of the built-in Temporal Causal3DIdent spec, and the synthetic mixing (injective, deterministic)."""

import numpy as np
import pytest

from ident3d.causal import load_dynamic_scm
from ident3d.training.temporal.synthetic import SLOPE, mix, mixing_weights, synthetic_sequences
from ident3d.training.temporal.transitions import Transitions
from ident3d.training.temporal.variables import causal_variables, node_variable, variable_targets


def _toy(s=4, t=6, k=3):
    """Observations that encode their own (sequence, step): obs[s, t] = (s, t, 10 s + t)."""
    ss, tt = np.meshgrid(np.arange(s), np.arange(t), indexing="ij")
    obs = np.stack([ss, tt, 10 * ss + tt], axis=-1).astype(np.float32)
    targets = (np.random.default_rng(0).random((s, t, k)) < 0.3)
    targets[:, 0] = False
    return Transitions(obs, targets, obs[..., :2].copy())


def test_transitions_pair_consecutive_steps_with_the_later_steps_targets():
    data = _toy()
    assert len(data) == 4 * 5 and data.n_targets == 3
    b = data.take(np.arange(len(data)))
    assert np.array_equal(b.x_t1[:, 0], b.x_t[:, 0]) and np.array_equal(b.x_t1[:, 1], b.x_t[:, 1] + 1)
    s, t = b.x_t1[:, 0].astype(int), b.x_t1[:, 1].astype(int)
    assert np.array_equal(b.targets, data.targets[s, t].astype(np.float32))
    assert np.array_equal(b.latents_t1, data.latents[s, t])
    assert b.x_t[:, 1].max() == 4  # the last step is never a source


def test_batches_are_a_pure_function_of_seed_and_step():
    data = _toy()
    a, b = data.batch(3, 7, 16), data.batch(3, 7, 16)
    assert np.array_equal(a.x_t, b.x_t) and np.array_equal(a.targets, b.targets)
    _ = data.batch(3, 6, 16)  # drawing another batch first changes nothing
    assert np.array_equal(data.batch(3, 7, 16).x_t, a.x_t)
    assert not np.array_equal(data.batch(3, 8, 16).x_t, a.x_t)
    assert not np.array_equal(data.batch(4, 7, 16).x_t, a.x_t)


def test_frames_sequences_and_shuffled_targets():
    data = _toy()
    obs, lat = data.frames()
    assert obs.shape == (24, 3) and lat.shape == (24, 2)
    sub = data.sequences(np.array([2, 3]))
    assert len(sub) == 10 and sub.observations[0, 0, 0] == 2
    shuf = data.shuffled_targets(0)
    assert shuf.targets.sum() == data.targets.sum()  # same marginal
    assert not np.array_equal(shuf.targets, data.targets)
    assert np.array_equal(shuf.observations, data.observations)
    with pytest.raises(ValueError, match="at least 2 steps"):
        Transitions(np.zeros((2, 1, 3)), np.zeros((2, 1, 1)), np.zeros((2, 1, 1)))
    with pytest.raises(ValueError, match="targets"):
        Transitions(np.zeros((2, 3, 3)), np.zeros((2, 4, 1)), np.zeros((2, 3, 1)))


def test_causal_variables_of_temporal_causal3dident():
    model = load_dynamic_scm("temporal_causal3dident")
    variables = causal_variables(model)
    assert list(variables) == ["class", "position", "rotation", "spot_angle", "obj_hue", "spot_hue", "bg_hue"]
    assert variables["position"] == [1, 2, 3] and variables["rotation"] == [4, 5]
    nv = node_variable(variables, 10)
    assert nv.tolist() == [0, 1, 1, 1, 2, 2, 3, 4, 5, 6]
    roll = model.rollout(30, 10, seed=1)
    vt = variable_targets(roll.targets, variables)
    assert vt.shape == (30, 10, 7)
    for k, nodes in enumerate(variables.values()):  # jointly intervened nodes agree
        for n in nodes:
            assert np.array_equal(vt[..., k], roll.targets[..., n])
    rate = vt[:, 1:].mean()
    assert 0.10 < rate < 0.19  # p = 1/7 per variable and step


def test_mixing_is_injective_and_fixed_by_its_seed():
    w = mixing_weights(10, 20, 3, seed=5)
    z = np.random.default_rng(0).normal(size=(500, 10))
    x = mix(z, w)
    assert x.shape == (500, 20)
    h = x  # invert: leaky ReLU and orthogonal maps in reverse, then the lift's transpose (orthonormal columns)
    for m in reversed(w[1:]):
        h = np.where(h > 0, h, h / SLOPE) @ m
    np.testing.assert_allclose(h @ w[0], z, atol=1e-10)
    assert np.array_equal(mix(z, mixing_weights(10, 20, 3, seed=5)), x)
    with pytest.raises(ValueError, match="out_dim >= in_dim"):
        mixing_weights(10, 8, 1, seed=0)


def test_synthetic_sequences_split_by_sequence_and_standardise():
    s = synthetic_sequences(load_dynamic_scm("temporal_causal3dident"), 40, 10, 8, obs_dim=16, seed=2)
    assert s.train.observations.shape == (40, 8, 16) and s.test.observations.shape == (10, 8, 16)
    assert s.train.targets.shape == (40, 8, 7) and s.train.latents.shape == (40, 8, 10)
    flat = s.train.observations.reshape(-1, 16)
    np.testing.assert_allclose(flat.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(flat.std(0), 1, atol=1e-4)
    assert s.variable_names[1] == "position" and s.node_variable.tolist() == [0, 1, 1, 1, 2, 2, 3, 4, 5, 6]
