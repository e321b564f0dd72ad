"""Synthetic pairs: the mixing is invertible, pairs differ only in the change set, batches repeat."""

import numpy as np
import torch

from causal import load_scm
from training.synthetic import InvertibleMixing, SyntheticPairs


def test_mixing_is_invertible_and_nonlinear():
    g = InvertibleMixing(10, seed=1)
    z = torch.randn(500, 10)
    x = g(z)
    assert torch.allclose(g.inverse(x), z, atol=1e-4)
    lin = torch.linalg.lstsq(torch.cat([z, torch.ones(500, 1)], 1), x).solution
    resid = x - torch.cat([z, torch.ones(500, 1)], 1) @ lin
    assert resid.var() / x.var() > 0.01  # not a linear map


def test_pairs_change_only_the_style_and_are_reproducible():
    scm = load_scm("content_style")
    ds = SyntheticPairs(scm, "style", InvertibleMixing(10, seed=0), batch_size=2000, seed=3)
    b = ds.batch(5)
    z, zt = b["latents"].numpy(), b["latents_view"].numpy()
    assert np.array_equal(z[:, :5], zt[:, :5])
    assert abs((z[:, 5:] != zt[:, 5:]).mean() - 0.75) < 0.03  # p_change = 0.75 per style dim
    assert torch.equal(ds.batch(5)["x"], b["x"]) and not torch.equal(ds.batch(6)["x"], b["x"])
    assert torch.allclose(b["x"], InvertibleMixing(10, seed=0)(b["latents"]))
