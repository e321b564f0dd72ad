"""``ident3d evaluate``: score a trained run on a test store (R^2 per latent, class accuracy, MCC),
in columns derived from the store's latent groups (paper 000's table for Causal3DIdent), each marked
content or style, for the encoder's output and inner layer: the CLI over
``ident3d.evaluation.run_report.evaluate_run``."""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.pipelines.files import check_output, write_atomic


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate", help="score a trained run on a test store (R^2 per latent, class accuracy)",
        description="Encode a test store with a trained run and report, per latent, how well it can be "
                    "predicted from the representation (linear and RBF kernel-ridge R^2, fit and scored on "
                    "separate halves of the store), class accuracy and MCC, for the encoder's output and its "
                    "inner layer, in one column per latent group of the store (split by name prefix; paper 000's "
                    "columns for Causal3DIdent), each marked content or style by the run's view maker.",
        epilog="example: ident3d evaluate --run runs/da_crop --data stores/c3d_test.zarr --out report.json")
    p.add_argument("--run", dest="run_dir", required=True, metavar="RUN_DIR", help="a run directory (ident3d train)")
    p.add_argument("--data", required=True, metavar="STORE", help="test store (same scene as the training store)")
    p.add_argument("--out", help="write the report as JSON here")
    p.add_argument("--fit", type=int, default=10240, help="images to fit the regressions on (default 10240)")
    p.add_argument("--score", type=int, default=20480, help="images to score them on (default 20480)")
    p.add_argument("--no-kernel", action="store_true", help="linear R^2 only (fast)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    p.add_argument("--da-style", action="append", default=[], metavar="RECIPE=NAMES",
                   help="which latents a DA recipe changes, as nodes, groups or change sets joined by '+' "
                        "(default: the recipe's style in `ident3d train --list`, e.g. colour=hues, where the "
                        "store's SCM has it); repeatable")
    p.add_argument("--metrics", metavar="NAMES", action="append",
                   help="also metrics of the output layer from the one registry, comma-separated (repeatable): dci "
                        "(Lasso importances), dci_es (explicitness), mig (20 equal-width bins), sap, citris (R^2 "
                        "diag/sep after matching dimensions to factors), temporal (sequence stores: CITRIS's "
                        "variable-level R^2 diag/sep under the run's learned assignment, DCI, MIG); labelled stores: "
                        "probe (linear, MLP, kNN, GMM), recon (reconstruction MSE), crl_tac (paper 002's scores); "
                        "multi-object stores and slot runs (slot_attention, additive_ae): fg_ari (foreground ARI of "
                        "the slot masks), slot_r2 (per-object R^2, slots matched by the readout's loss), slot_r2_masks "
                        "(per-object R^2 of the mask-matched slot), sis (Brady et al.'s slot identifiability score), "
                        "block_mcc (slots as fixed blocks, Lachapelle et al.'s tree readout); captioned stores: "
                        "modality_probes (each latent from the image and the caption encodings, by block)")
    p.add_argument("--figure", metavar="PNG", help="CRL-TAC runs: draw test images over their P(T|X) here")
    p.add_argument("--overwrite", action="store_true", help="replace an existing report file")
    p.set_defaults(run=run)


def parse_da_style(items: list[str]) -> dict[str, list[str]]:
    """``["colour=tint+lamp"]`` -> ``{"colour": ["tint", "lamp"]}`` (checked by ``ident3d.evaluation.report``)."""
    from ident3d.evaluation.report import check_da_style  # torch, sklearn: not for --help

    out: dict[str, list[str]] = {}
    for item in items:
        recipe, sep, names = item.partition("=")
        if not sep or not names.strip():
            raise UserError(f"--da-style {item!r}: use RECIPE=NAMES, e.g. colour=hues")
        out[recipe.strip()] = [n.strip() for n in names.split("+")]
    return check_da_style(out, "--da-style")


def run(args: argparse.Namespace) -> int:
    if args.fit <= 0 or args.score <= 0:
        raise UserError("--fit and --score must be positive")
    da_style = parse_da_style(args.da_style)
    from ident3d.evaluation.metric_suite import parse_metrics
    from ident3d.evaluation.run_report import (
        evaluate_run,  # here, not at the top: `ident3d --help` imports every command
    )

    metrics = parse_metrics(",".join(args.metrics or []))  # before any work: an unknown name is one line
    if args.metrics is not None and not metrics:
        raise UserError("--metrics names no metric; give one or more, e.g. --metrics dci,mig (or leave it out)")
    out = check_output(args.out, (".json",), args.overwrite) if args.out else None
    figure = check_output(args.figure, (".png",), args.overwrite) if args.figure else None
    report = evaluate_run(args.run_dir, args.data, args.fit, args.score, kernel=not args.no_kernel, device=args.device,
                          da_style=da_style, figure=figure, metrics=metrics)
    print(report["markdown"])
    if out:
        write_atomic(out, lambda p: p.write_text(json.dumps(report, indent=2, default=_jsonable) + "\n"))
        print(f"wrote {out}")
    return 0


def _jsonable(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else str(x)
