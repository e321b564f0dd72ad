"""Train your own small torch model on an ident3d store with ``ident3d.loader`` and score it with ``ident3d.metrics``.

    python examples/own_model.py --tiny                    # renders a small 3DIdent store first (about 30 s on 2 cores)
    python examples/own_model.py --store stores/c3d.zarr --views lt_exact:hues --steps 2000
"""

import argparse
import copy

import numpy as np
import torch
from torch import nn

import ident3d
import ident3d.metrics as M


def encoder(dim: int = 10) -> nn.Module:
    """A user's model: any module from normalised images (B, 3, H, W) to codes (B, dim)."""
    return nn.Sequential(nn.Conv2d(3, 16, 4, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 4, 2, 1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU(), nn.Linear(64, dim))


def infonce(a: torch.Tensor, b: torch.Tensor, tau: float = 0.1) -> torch.Tensor:
    """Symmetric InfoNCE of two views' codes: each code's positive is its partner, the batch its negatives."""
    logits = nn.functional.normalize(a, dim=1) @ nn.functional.normalize(b, dim=1).T / tau
    target = torch.arange(len(a), device=a.device)
    return (nn.functional.cross_entropy(logits, target) + nn.functional.cross_entropy(logits.T, target)) / 2


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", help="an existing store (path or URL)")
    p.add_argument("--tiny", action="store_true", help="render a small 3DIdent store into --out and use it")
    p.add_argument("--out", default="runs/own_model", help="where --tiny renders its store")
    p.add_argument("--views", default="lt_exact:hues", help="e.g. crop_large+colour, lt_exact:NAME, lt_nn:CHANGE")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (the GPU if there is one)")
    args = p.parse_args()
    if not args.tiny and not args.store:
        p.error("give --store STORE or --tiny")
    store = args.store or f"{args.out}/tiny3d.zarr"
    if args.tiny:  # re-running resumes (skips) the finished render
        ident3d.render_store(store, scene="3dident", n=384, settings={"resolution": 32, "samples": 1},
                             views="hues:hues", workers=1, progress=False)
    batches = ident3d.loader(store, views=args.views, batch_size=64, seed=args.seed, steps=args.steps,
                             device=args.device)
    torch.manual_seed(args.seed)
    model = encoder().to(batches.device)
    untrained = copy.deepcopy(model)
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    for batch in batches:  # batch b: the rows and views `ident3d train` would use at step b
        x1, x2 = batch["views"]
        loss = infonce(model(x1), model(x2))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    print(f"trained {args.steps} steps on {store} with views {args.views}; last loss {loss.item():.3f}")

    view = ident3d.open_store(store)
    rows = view.rows[:3000]  # kernel R^2 on up to 3,000 finished rows: fit on two thirds, test on the rest
    factors, fit = view.latents(rows), len(rows) * 2 // 3
    with torch.no_grad():
        codes = {name: m.eval()(batches.inputs(view.images(rows))).cpu().numpy() for name, m in
                 (("trained", model), ("untrained", untrained))}
    codes["shuffled"] = codes["trained"][np.random.default_rng(args.seed).permutation(len(factors))]
    style = M.style_of(args.views, view)
    scores = {name: M.content_style(factors=factors[:fit], codes=c[:fit], factors_test=factors[fit:],
                                    codes_test=c[fit:], names=view.latent_names, style=style, kind="kernel")
              for name, c in codes.items()}
    print("| factor | " + " | ".join(scores) + " |\n" + "|---" * (len(scores) + 1) + "|")
    for factor in view.latent_names:
        mark = "S" if factor in style else "C"
        print(f"| {factor} ({mark}) | " + " | ".join(f"{s.per_factor[factor]:.2f}" for s in scores.values()) + " |")
    for block in ("content", "style"):  # a block the views leave empty has no score
        cells = [getattr(s, block) for s in scores.values()]
        print(f"| {block} block | " + " | ".join("-" if v is None else f"{v:.2f}" for v in cells) + " |")


if __name__ == "__main__":
    main()
