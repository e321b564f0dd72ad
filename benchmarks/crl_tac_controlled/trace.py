"""The channel's entropy and mass on digit crops over the first steps of CRL-TAC on the 84 px real-digit canvas:
the trainer's two phases on one shared Adam, in a plain loop, printed every ``--every`` steps (run from the
repository root; --args '{"channel_anchor": false}' gives the channel phase's denominator before the fix)."""

import argparse
import json
import sys

import torch

sys.path.insert(0, ".")
from ident3d.ingest.datasets import load_dataset  # noqa: E402
from ident3d.training.channel import nonblank_crops  # noqa: E402
from ident3d.training.encoders import build_encoder  # noqa: E402
from ident3d.training.objectives.crl_tac import CRLTAC  # noqa: E402
from ident3d.training.views import Normalize, to_float  # noqa: E402


def main() -> None:
    """Train for ``--steps`` steps on 2,000 training canvases, printing the channel's state."""
    torch.set_num_threads(1)
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=301)
    ap.add_argument("--every", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--args", default="{}", help="crl_tac objective arguments, JSON")
    a = ap.parse_args()
    imgs = load_dataset("mnist5k_canvas", train=True).images[:2000]
    mean, std = imgs.reshape(-1, 3).mean(0) / 255, imgs.reshape(-1, 3).std(0) / 255
    norm = Normalize(tuple(mean), tuple(std))
    torch.manual_seed(a.seed)
    obj = CRLTAC(build_encoder("tac_cnn", 50, 84), **json.loads(a.args))
    opt = torch.optim.Adam(obj.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(a.seed)
    for step in range(a.steps):
        raw = torch.from_numpy(imgs[torch.randint(0, len(imgs), (32,), generator=g).numpy()])
        x, u = norm(to_float(raw)), torch.rand(32, obj.draws_per_image, generator=g)
        logs = {}
        for phase in obj.phases:
            out = obj([x, u], step, a.steps, phase=phase)
            opt.zero_grad(set_to_none=True)
            out["loss"].backward()
            opt.step()
            logs.update({f"{phase}/{k}": round(float(v.detach()), 3) for k, v in out.items()})
        if step % a.every == 0:
            with torch.no_grad():
                p, nb = obj.probabilities(x), nonblank_crops(raw, obj.grid).float()
            print(step, "mass", round(float((p * nb).sum(1).mean()), 3), "uniform", round(float(nb.mean()), 3),
                  logs, flush=True)


if __name__ == "__main__":
    main()
