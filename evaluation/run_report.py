"""Score a trained run on a test store (what ``ident3d evaluate`` and each ``compare`` cell report): R^2 per
latent, class accuracy and MCC, in columns derived from the store's latent groups (paper 000's table for
Causal3DIdent), each marked content or style, for the encoder's output and inner layer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ident3d.causal.errors import UserError
from ident3d.evaluation import linear_probe_accuracy
from ident3d.evaluation.channel import summarise_run
from ident3d.evaluation.encode import encode_store
from ident3d.evaluation.mcc import report_mcc
from ident3d.evaluation.metric_suite import ScoringData, score
from ident3d.evaluation.regression import r2_or_undefined
from ident3d.evaluation.report import columns, markdown, marks, resolve_style, table_row, titles
from ident3d.evaluation.uniformity import uniformity
from ident3d.store.info import store_info
from ident3d.store.zarr_io import store_reachable
from ident3d.training.objectives import OBJECTIVES
from ident3d.training.run_dir import RunDir, StoreData
from ident3d.training.trainer import pick_device


def evaluate_run(run_dir: str, test_store: str, n_fit: int = 10240, n_score: int = 20480, kernel: bool = True,
                 device: str = "auto", da_style: dict[str, Any] | None = None,
                 figure: str | None = None, metrics: Sequence[str] = ()) -> dict[str, Any]:
    """Encode the test store with the run and score every latent; returns the report as a dict.

    The report's columns come from the test store's latent groups; ``da_style`` ({DA recipe: nodes, groups
    or change sets}) overrides which latents a DA recipe counts as changing (see ``ident3d.evaluation.report``). Runs
    with a trained augmentation channel (CRL-TAC) also get a "channel" section (where P(T|X) puts its mass)
    and, with ``figure``, paper 002's Fig. 3 as a PNG there. ``metrics``: disentanglement metrics of the output
    layer (``ident3d.evaluation.metric_suite.score``: any registered metric by name), fit and scored on the same
    splits as the probes.
    """
    run = RunDir(Path(run_dir)).load()
    cfg = run.cfg
    info = store_info(test_store)
    stored_views = info.views
    if isinstance(run.data, StoreData) and store_reachable(run.data.path):
        train_info = store_info(run.data.path, allow_partial=True)
        check_comparable(train_info, info, cfg.data)
        stored_views = train_info.views  # the pairs the run was trained on
    rows = info.rows
    if rows.size < 20:
        raise UserError(f"{test_store} has only {rows.size} finished images; evaluation needs at least 20")
    fit_n = min(n_fit, rows.size // 3)
    rows = rows[: fit_n + min(n_score, rows.size - fit_n)]
    enc = encode_store(run, info, rows, device=str(pick_device(device)))
    y, names = enc["latents"], info.latent_names
    cols = columns(names, info.latent_groups)
    style = resolve_style(cfg.views, info.scm, stored_views, da_style)
    col_marks = marks(cols, style.latents)
    report: dict[str, Any] = {"run": str(run_dir), "test_store": test_store, "views": cfg.views,
                              "objective": cfg.objective, "n_fit": fit_n, "n_score": len(rows) - fit_n,
                              "style_latents": sorted(style.latents), "da_style": style.da_map,
                              "da_unmapped": style.unmapped, "columns": titles(cols, "classes" in enc),
                              "column_latents": {c.title: list(c.latents) for c in cols},
                              "column_marks": col_marks, "layers": {}}
    table = {}
    # further layers the objective names; an object-centric model's slots and slot masks (3-D) are no layer: the
    # object metrics read them
    layers = ["output", "inner", *(k for k in enc if k not in ("output", "inner", "rows", "latents", "classes")
                                   and enc[k].ndim == 2)]
    for layer in layers:
        z = enc[layer]
        zf, zs, yf, ys = z[:fit_n], z[fit_n:], y[:fit_n], y[fit_n:]
        # too few fit samples for a layer's width (linear: dims + 2) or a constant latent: NaN, named with the reason
        lin = r2_or_undefined(zf, yf, zs, ys, kind="linear")
        ker = r2_or_undefined(zf, yf, zs, ys, kind="kernel") if kernel else lin
        acc = None
        if "classes" in enc:
            acc = linear_probe_accuracy(zf, enc["classes"][:fit_n], zs, enc["classes"][fit_n:])
        row = table_row(ker.scores, names, cols, acc)  # a column's mean leaves its undefined (NaN) latents out
        # MCC under the name of what it is: cl-ica's at equal widths, of the content block for a narrower layer, the
        # best-K matching (not cl-ica's MCC) for a wider one up to 512 dims; the old key stays, None unless cl-ica's
        corr = report_mcc(yf, zf, ys, zs, names, [n for n in names if n not in style.latents], wider=z.shape[1] <= 512)
        table[f"{layer} ({z.shape[1]}-d)"] = row
        report["layers"][layer] = {
            "dim": int(z.shape[1]), "r2_method": ker.method, "class_accuracy": acc,
            "r2_kernel": dict(zip(names, ker.scores.round(4).tolist(), strict=True)),
            "r2_linear": dict(zip(names, lin.scores.round(4).tolist(), strict=True)),
            "r2_undefined": {"kernel": {names[j]: why for j, why in ker.undefined.items()},
                             "linear": {names[j]: why for j, why in lin.undefined.items()}},
            "mcc_pearson_out_of_sample": corr.value if corr.name == "mcc" else None,
            **({f"{corr.name}_pearson_out_of_sample": corr.value} if corr.name not in (None, "mcc") else {}),
            **({"mcc_note": corr.note} if corr.note else {}),
            "uniformity": round(uniformity(zs), 4),  # Wang & Isola's log potential; paper 002 reports exp of it
            "table": row,
        }
    if metrics:
        z = enc["output"]
        data = ScoringData(y[:fit_n], z[:fit_n], y[fit_n:], z[fit_n:], store=info, encoded=enc)
        report["metrics"] = score(run, data, metrics)
    if OBJECTIVES.get(cfg.objective).view_maker == "learned_crop":
        report["channel"] = summarise_run(run, info, rows[fit_n:], str(pick_device(device)), figure)
    method = report["layers"]["output"]["r2_method"]
    note = f"R^2: {method}; (S) style = changed by {cfg.views}, (C) content, (C/S) partly style; bold: >= 0.5"
    if style.unmapped:
        note += (f"\nDA recipes that change no latent of this store (their columns count as content): "
                 f"{', '.join(style.unmapped)}")
    report["markdown"] = markdown(table, col_marks, note=note)
    for name, values in report.get("metrics", {}).items():
        report["markdown"] += f"\n{name} (output layer): " + ", ".join(
            f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items()
            if not isinstance(v, list))  # the temporal metric's matrix and assignment stay in the JSON
    return report


def check_comparable(train: Any, test: Any, train_path: str) -> None:
    """A run scores on a test store whose latents mean what its training store's meant: the same latent names (in
    order) and groups, classes and image size. The scene's name is not compared: a store imported from a published
    file and one rendered here hold the same factors under different scene names."""
    for what, a, b in (("latents", train.latent_names, test.latent_names),
                       ("latent groups", train.latent_groups, test.latent_groups),
                       ("classes", train.class_names, test.class_names)):
        if a != b:
            raise UserError(f"{test.path} has {what} {_listed(b)} but the run was trained on {_listed(a)} "
                            f"({train_path}); evaluate on a store of the same latents")
    if train.image_size != test.image_size:
        raise UserError(f"{test.path} has {test.image_size} px images, the run was trained on {train.image_size} px")


def _listed(value: Any) -> str:
    """A list or mapping of names for a message, short enough for one line."""
    if isinstance(value, dict):
        value = [f"{k}: {'+'.join(v)}" for k, v in value.items()]
    if not value:
        return "none"
    text = ", ".join(map(str, value))
    return text if len(text) <= 160 else text[:157] + "..."

