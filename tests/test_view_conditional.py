"""Paper 001's conditionals for latent transformations: truncated Laplace against scipy's Laplace, the render
option that writes the conditional into the store's SCM, and its one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ident3d.causal import SCM, load_scm
from ident3d.causal.mechanisms import trunclaplace_ppf


def test_truncated_laplace_ppf_equals_scipy():
    u = np.random.default_rng(0).uniform(size=500)
    mu = np.random.default_rng(1).uniform(-1, 1, size=500)
    got = trunclaplace_ppf(u, mu, 0.3, -1.0, 1.0)
    lo, hi = stats.laplace.cdf(-1.0, mu, 0.3), stats.laplace.cdf(1.0, mu, 0.3)
    want = stats.laplace.ppf(lo + u * (hi - lo), mu, 0.3)
    assert np.allclose(got, want, atol=1e-9) and got.min() >= -1 and got.max() <= 1


@pytest.mark.parametrize("kind, spread", [("normal", 0.1), ("laplace", np.sqrt(2) * 0.1)])
def test_transform_follows_the_spec_conditional(kind, spread):
    base = load_scm("3dident").spec
    scm = SCM({**base, "transform": {"conditional": kind, "sigma": 0.1}})
    z = scm.sample(20000, seed=0)
    d = scm.transform(z, "hues", seed=1).latents - z.latents
    inner = np.abs(z.latents[:, 7]) < 0.5  # away from the range's ends, the truncation does not bite
    assert d[inner, 7].std() == pytest.approx(spread, rel=0.05)
    excess = stats.kurtosis(d[inner, 7])
    assert (excess > 2) if kind == "laplace" else abs(excess) < 0.3  # Laplace: 3, normal: 0
    assert np.all(d[:, :7] == 0)  # only the change set moves


def test_view_conditional_is_part_of_the_store_spec(tmp_path):
    from ident3d.render.api import plan_render

    plan = plan_render(tmp_path / "s.zarr", scene="3dident", n=4, views="near:hues", view_conditional="laplace:0.2")
    assert plan.job.scm["transform"] == {"conditional": "laplace", "sigma": 0.2}
    assert plan_render(tmp_path / "s.zarr", scene="3dident", n=4).job.scm.get("transform") != plan.job.scm["transform"]


@pytest.mark.parametrize("value", ["cauchy:0.1", "normal:0", "laplace:x", "normal"])
def test_bad_view_conditional_is_one_line(tmp_path, value):
    from helpers import run_cli

    r = run_cli("render", "--scene", "3dident", "--n", "4", "--views", "near:hues", "--view-conditional", value,
                "--out", str(tmp_path / "s.zarr"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--view-conditional" in r.stderr
    assert not (tmp_path / "s.zarr").exists()


def test_paper001_3dident_config_plans_its_stores_with_the_conditional():
    from ident3d.pipelines.kinds.compare import load_config
    from ident3d.pipelines.store_specs import render_args

    cfg = load_config("configs/paper001_3dident.yaml")
    assert [r.views for r in cfg.rows] == ["lt_nn:positions+rotations+hues", "lt_exact:near", "labels"]
    assert render_args(cfg.stores["train"], cfg.scene)["view_conditional"] == "normal:0.1"
