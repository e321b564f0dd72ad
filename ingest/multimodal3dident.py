"""The published Multimodal3DIdent layout (Daunhawer et al., ICLR 2023): read into a captioned store, written from one.

One folder per split::

    images/NNNNNN.png       row index zero-padded to ceil(log10(rows)) digits
    latents_image.csv       object_shape, object_xpos, object_ypos, object_zpos, object_alpharot, object_betarot,
                            object_gammarot, object_color, spotlight_pos, spotlight_color, background_color
    latents_text.csv        object_shape, object_xpos, object_ypos, object_zpos, object_color_name,
                            object_color_index, text_phrasing
    text/text_raw.txt       one caption per line

The image latents are the multimodal3dident SCM's raw latents (``object_shape`` is the class), in its order; the text
latents are the built-in caption spec's (render/texts/multimodal3dident.yaml): the stated shape, x and y, the colour
name's index (its rank among the sorted names of the Tableau, CSS4 and XKCD palettes together, as published), the
palette the name comes from (the published files never record it: the name says it, as the three palettes share no
name) and the sentence form. ``object_zpos`` of the text is the image's (the caption never states it).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.causal.errors import UserError
from ident3d.ingest import published

FORMAT = "multimodal3dident"
EXPECTED = published.EXPECTED[FORMAT]
IMAGE_COLUMNS = ("object_shape", "object_xpos", "object_ypos", "object_zpos", "object_alpharot", "object_betarot",
                 "object_gammarot", "object_color", "spotlight_pos", "spotlight_color", "background_color")
TEXT_COLUMNS = ("object_shape", "object_xpos", "object_ypos", "object_zpos", "object_color_name",
                "object_color_index", "text_phrasing")
# each image column's node in the multimodal3dident SCM (the class first, then the latents in the SCM's order)
NODE_OF = {"object_shape": "class", "object_xpos": "pos_x", "object_ypos": "pos_y", "object_zpos": "pos_z",
           "object_alpharot": "rot_alpha", "object_betarot": "rot_beta", "object_gammarot": "rot_gamma",
           "object_color": "obj_hue", "spotlight_pos": "spot_angle", "spotlight_color": "spot_hue",
           "background_color": "bg_hue"}
# the text latents of the built-in caption spec, and the text column each comes from (the palette: from the name)
TEXT_FROM = {"shape": "object_shape", "x": "object_xpos", "y": "object_ypos", "colour": "object_color_index",
             "colour_palette": "object_color_name", "template": "text_phrasing"}
DISCRETE = ("object_shape", "object_xpos", "object_ypos", "object_color_index", "text_phrasing")
LEVELS = {"object_shape": 7, "object_xpos": 3, "object_ypos": 3}


# ----- reading -------------------------------------------------------------------------------------------------------
def read_table(path: Path, columns: tuple[str, ...]) -> dict[str, list[str]]:
    """A CSV file's columns (exactly ``columns``, in order) as text; a missing file, another header or a short row is
    one line naming the file."""
    if not path.is_file():
        raise UserError(f"{path} not found; a published {FORMAT} folder holds {EXPECTED}")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if not rows or tuple(c.strip() for c in rows[0]) != columns:
        head = ", ".join(rows[0]) if rows else "nothing"
        raise UserError(f"{path} has the columns {head}; a {FORMAT} file has {', '.join(columns)}")
    body = [r for r in rows[1:] if r]
    if not body:
        raise UserError(f"{path} has no rows")
    for i, row in enumerate(body):
        if len(row) != len(columns):
            raise UserError(f"{path}: row {i} has {len(row)} values for the {len(columns)} columns")
    return {c: [row[j] for row in body] for j, c in enumerate(columns)}


def numbers(table: dict[str, list[str]], column: str, path: Path) -> np.ndarray:
    """A column as float64; a value that is not a finite number, or a discrete column's value that is not a whole
    number in its levels, is one line naming the row."""
    values = np.empty(len(table[column]))
    for i, text in enumerate(table[column]):
        try:
            values[i] = float(text)
        except ValueError:
            raise UserError(f"{path}: {column} of row {i} is {text!r}, not a number") from None
    bad = ~np.isfinite(values)
    if column in DISCRETE:
        bad |= (values != np.round(values)) | (values < 0) | (values >= LEVELS.get(column, np.inf))
    if bad.any():
        want = f"a whole number in 0..{LEVELS[column] - 1}" if column in LEVELS else \
            "a whole number >= 0" if column in DISCRETE else "a finite number"
        first = int(np.flatnonzero(bad)[0])
        raise UserError(f"{path}: {column} of row {first} is {table[column][first]}, not {want}")
    return values


def read_captions(path: Path, n: int) -> np.ndarray:
    """``text/text_raw.txt``: one caption per line, ``n`` lines (a final newline or none), as an object array."""
    if not path.is_file():
        raise UserError(f"{path} not found; a published {FORMAT} folder holds {EXPECTED}")
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != n:
        raise UserError(f"{path} has {len(lines)} captions for the {n} rows of latents_image.csv; one per line")
    return np.array(lines, dtype=object)


def image_latents(root: Path, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``latents_image.csv`` as the SCM's (latents (N, D) float32 in ``names`` order, classes (N,) int64)."""
    path = root / "latents_image.csv"
    table = read_table(path, IMAGE_COLUMNS)
    by_node = {NODE_OF[c]: numbers(table, c, path) for c in IMAGE_COLUMNS}
    latents = np.stack([by_node[name] for name in names], axis=1).astype(np.float32)
    return latents, by_node["class"].astype(np.int64)


def text_latents(root: Path, n: int, names: list[str], palettes: list[dict[str, str]],
                 colour_names: list[str]) -> np.ndarray:
    """``latents_text.csv`` as the built-in caption spec's text latents (N, T) float32, columns ``names``; the colour
    index must name the row's colour name, and the name must be one of the palettes'."""
    path = root / "latents_text.csv"
    table = read_table(path, TEXT_COLUMNS)
    if len(table["object_shape"]) != n:
        raise UserError(f"{path} has {len(table['object_shape'])} rows for the {n} of latents_image.csv")
    index = numbers(table, "object_color_index", path).astype(np.int64)
    palette = np.empty(n)
    for i, (name, k) in enumerate(zip(table["object_color_name"], index, strict=True)):
        owners = [j for j, p in enumerate(palettes) if name in p]
        if not owners:
            raise UserError(f"{path}: object_color_name of row {i} is {name!r}, a name of none of the palettes "
                            "(Tableau, CSS4, XKCD)")
        if k >= len(colour_names) or colour_names[k] != name:
            raise UserError(f"{path}: row {i} names the colour {name!r} but its object_color_index {k} is "
                            f"{colour_names[k] if k < len(colour_names) else 'out of range'!r}")
        palette[i] = owners[0]
    columns = {"colour_palette": palette}
    out = np.empty((n, len(names)), np.float32)
    for j, name in enumerate(names):
        source = TEXT_FROM.get(name)
        if source is None:
            raise UserError(f"the built-in caption spec has a text latent {name!r} that the {FORMAT} layout does not "
                            "hold")
        out[:, j] = columns[name] if name in columns else numbers(table, source, path)
    return out


# ----- writing -------------------------------------------------------------------------------------------------------
def number_text(value: float, whole: bool) -> str:
    """A value as the CSV writes it: a whole number for discrete columns, else float32's shortest round trip."""
    return str(int(value)) if whole else str(np.float32(value))


def write_tables(folder: Path, latents: np.ndarray, classes: np.ndarray, names: list[str], text: np.ndarray,
                 text_values: np.ndarray, text_names: list[str], colour_names: list[str]) -> list[str]:
    """Write ``latents_image.csv``, ``latents_text.csv`` and ``text/text_raw.txt``; returns their names."""
    column = {name: latents[:, j] for j, name in enumerate(names)} | {"class": classes}
    stated = {name: text_values[:, j] for j, name in enumerate(text_names)}
    with (folder / "latents_image.csv").open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(IMAGE_COLUMNS)
        whole = [c in DISCRETE for c in IMAGE_COLUMNS]
        for i in range(len(latents)):
            out.writerow([number_text(column[NODE_OF[c]][i], w) for c, w in zip(IMAGE_COLUMNS, whole, strict=True)])
    with (folder / "latents_text.csv").open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(TEXT_COLUMNS)
        for i in range(len(latents)):
            k = int(stated["colour"][i])
            out.writerow([int(stated["shape"][i]), int(stated["x"][i]), int(stated["y"][i]),
                          number_text(column["pos_z"][i], False), colour_names[k], k, int(stated["template"][i])])
    (folder / "text").mkdir()
    (folder / "text" / "text_raw.txt").write_text("\n".join(str(t) for t in text), encoding="utf-8")
    return ["latents_image.csv", "latents_text.csv", "text/text_raw.txt"]


def layout_record(n: int) -> dict[str, Any]:
    """What an imported store records of the folder's layout."""
    return {"images": ["images"], "image_names": "row index zero-padded to ceil(log10(rows)) digits",
            "image_latents": "latents_image.csv", "text_latents": "latents_text.csv", "text": "text/text_raw.txt",
            "rows": [n]}


# ----- the built-in caption spec's palettes --------------------------------------------------------------------------
def colour_state() -> Any:
    """The colour entry of the built-in caption spec (its palettes, in order, and their sorted names)."""
    from ident3d.causal import load_scm
    from ident3d.render.captions import load_caption_spec
    from ident3d.render.scene import load_scene
    from ident3d.render.text_plan import latent_infos

    spec = load_caption_spec(FORMAT, latent_infos(load_scm(FORMAT), load_scene(FORMAT)))
    return spec, next(s for s in spec.states if s.kind == "colour")


# ----- the folder -> a store's source --------------------------------------------------------------------------------
def read_source(root: Path, split: str | None) -> published.PublishedSource:
    """Find and validate a published split: both latents files, the captions, one PNG per row, one image size.
    Nothing is decoded or written; every problem is one line naming the file."""
    from ident3d.causal import load_scm
    from ident3d.render.meshes import file_sha256

    scm = load_scm(FORMAT)
    latents, classes = image_latents(root, list(scm.names))
    spec, colour = colour_state()
    palettes = [dict(p.colours()) for p in colour.palettes]
    stated = text_latents(root, len(latents), list(spec.text_latent_names), palettes, list(colour.colour_names()))
    text = read_captions(root / "text" / "text_raw.txt", len(latents))
    files = published.png_names(root / "images", len(latents), root / "latents_image.csv")
    height, width = published.common_size(files)
    names = ("latents_image.csv", "latents_text.csv", "text/text_raw.txt")
    record = {"spec": None, "names": list(spec.text_latent_names),
              "source": f"the published {FORMAT} captions (their own sentence forms; text latents as "
                        f"render/texts/{FORMAT}.yaml names them)"}
    return published.PublishedSource(FORMAT, root, split, files, latents, classes, height, width,
                                     {name: file_sha256(root / name) for name in names}, layout_record(len(latents)),
                                     text, stated, record)
