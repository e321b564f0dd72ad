"""Train your own small torch model on an ident3d store with ``ident3d.loader`` and score it with ``ident3d.metrics``.

    python examples/own_model.py --tiny                    # renders a small 3DIdent store first (about 30 s on 2 cores)
    python examples/own_model.py --store stores/c3d.zarr --views lt_exact:hues --steps 2000
"""

import argparse
import copy
from typing import NoReturn

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


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line and exit code 2, as the ``ident3d`` command's."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE`` and exit 2 (no usage block, no traceback)."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and run the example; bad input (ident3d's ``UserError``) is one line and exit 2."""
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--store", help="an existing store (path or URL)")
    p.add_argument("--tiny", action="store_true", help="render a small 3DIdent store into --out and use it")
    p.add_argument("--out", default="runs/own_model", help="where --tiny renders its store")
    p.add_argument("--views", default="lt_exact:hues", help="e.g. crop_large+colour, lt_exact:NAME, lt_nn:CHANGE")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="auto: the GPU if there is one")
    args = p.parse_args(argv)
    if not args.tiny and not args.store:
        p.error("give --store STORE or --tiny")
    if args.steps < 1:  # before --tiny renders anything (the loader checks it too)
        p.error(f"--steps must be a whole number >= 1, got {args.steps}")
    try:
        run(args)
    except ident3d.UserError as exc:  # a store that is missing or too small, a view it cannot give, ...
        p.error(str(exc))


def run(args: argparse.Namespace) -> None:
    """Train the encoder on the store's batches, then print its kernel R^2 table against two baselines."""
    store = args.store or f"{args.out}/tiny3d.zarr"
    if args.tiny:  # re-running resumes (skips) the finished render
        ident3d.render_store(store, scene="3dident", n=384, settings={"resolution": 32, "samples": 1},
                             views="hues:hues", workers=1, progress=False)
    view = ident3d.open_store(store)
    batch_size = min(64, len(view.rows))  # a batch of 64, or every finished row of a smaller store
    batches = ident3d.loader(store, views=args.views, batch_size=batch_size, seed=args.seed, steps=args.steps,
                             device=args.device)
    if batch_size < 64:
        print(f"{store} has {len(view.rows)} finished rows: batches of {batch_size} instead of 64")
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
