"""Spec generators for synthetic SCMs, e.g. the content/style model of von Kuegelgen et al. 2021.

The content/style model: (c, s0) ~ N(0, Sigma) with Sigma drawn from a Wishart distribution
(statistical dependence), then s = s0 + B c + a (causal dependence of style on content), B and a
drawn once per seed. It is written as an equivalent linear-Gaussian SCM (additive-noise nodes in
the order c_1..c_nc, s_1..s_ns), so it is an ordinary declarative spec users can edit.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _round(x: float) -> float:
    return float(np.round(x, 6))


def content_style_spec(n_content: int = 5, n_style: int = 5, seed: int = 0,
                       p_change: float = 0.75, sigma_change: float = 1.0,
                       statistical: bool = True, causal: bool = True) -> dict[str, Any]:
    """The paper-000 synthetic SCM as a spec dict; LT on change set ``style`` makes its pairs.

    ``statistical=False`` makes Sigma the identity, ``causal=False`` drops s += B c + a: the paper's four
    dependence settings (B, a and Sigma are still drawn, so switching one off leaves the other unchanged).
    """
    rs = np.random.default_rng(seed)
    n = n_content + n_style
    from scipy.stats import wishart  # scipy.stats takes ~0.6 s to import: only when a spec is drawn

    sigma = wishart(df=n, scale=np.eye(n)).rvs(random_state=rs)
    d = np.sqrt(np.diag(sigma))
    sigma = sigma / np.outer(d, d)  # unit variances keep every latent on the same scale
    b = rs.normal(size=(n_style, n_content)) / np.sqrt(n_content)
    a = rs.normal(size=n_style)
    if not statistical:
        sigma = np.eye(n)
    if not causal:
        b, a = np.zeros_like(b), np.zeros_like(a)
    mix = np.eye(n)
    mix[n_content:, :n_content] = b
    cov = mix @ sigma @ mix.T
    mean = np.concatenate([np.zeros(n_content), a])
    names = [f"c{i + 1}" for i in range(n_content)] + [f"s{i + 1}" for i in range(n_style)]
    nodes = []
    for k, name in enumerate(names):
        prev = names[:k]
        if k:
            coef = np.linalg.solve(cov[:k, :k], cov[:k, k])
            var = cov[k, k] - cov[k, :k] @ coef
            bias = mean[k] - coef @ mean[:k]
        else:
            coef, var, bias = np.zeros(0), cov[0, 0], mean[0]
        fn = {"type": "linear", "bias": _round(bias),
              "coef": {p: _round(c) for p, c in zip(prev, coef, strict=True)}}
        nodes.append({
            "name": name,
            "parents": prev,
            "group": "content" if k < n_content else "style",
            "mechanism": {"type": "additive", "fn": fn, "noise": "normal",
                          "scale": _round(np.sqrt(var))},
        })
    return {
        "name": "content_style",
        "description": (f"synthetic content/style SCM (n_c={n_content}, n_s={n_style}, seed={seed}, "
                        f"statistical={statistical}, causal={causal}): "
                        "Wishart-correlated Gaussian latents, style += B content + a"),
        "nodes": nodes,
        "change_sets": {"style": ["style"]},
        "transform": {"sigma": sigma_change, "p_change": p_change},
    }
