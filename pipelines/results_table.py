"""One results table for every experiment kind: rows x columns -> mean, std and n over seeds, with the diverged
cells named, and one set of writers (markdown, CSV, JSON, heatmap). A kind gives its cells' values, its column
order, how a number is printed and its own per-row fields (synthetic: what the paper predicts and whether it was
met); compare, synthetic and scaling all tabulate through here."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ident3d.pipelines.files import write_atomic


@dataclass(frozen=True)
class Stat:
    """One table cell: mean and std over the seeds that have a finite value (std 0 for one), and their count n."""

    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        arr = np.asarray(values, dtype=float)
        arr = arr[np.isfinite(arr)]
        if arr.size == 0:
            return cls(math.nan, math.nan, 0)
        return cls(float(arr.mean()), float(arr.std()), int(arr.size))

    def as_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "n": self.n}


@dataclass
class ResultsTable:
    """The aggregated table: ``rows`` {row: {column: Stat}} in the config's order, the diverged cells
    {(row, seed): why}, the seeds asked for and each row's own fields (``extras``, written to JSON and CSV)."""

    name: str
    columns: list[str]
    rows: dict[str, dict[str, Stat]]
    seeds: list[int]
    diverged: dict[tuple[str, int], str] = field(default_factory=dict)
    extras: dict[str, dict[str, Any]] = field(default_factory=dict)

    def means(self) -> dict[str, dict[str, tuple[float, float]]]:
        """{row: {column: (mean, std)}}: what ceilings, side-by-sides and curves read."""
        return {r: {c: (s.mean, s.std) for c, s in stats.items()} for r, stats in self.rows.items()}

    def counts(self) -> dict[str, int]:
        """{row: seeds with a result} (the most any column of the row has)."""
        return {r: max((s.n for s in stats.values()), default=0) for r, stats in self.rows.items()}

    def as_json(self, **summary: Any) -> dict[str, Any]:
        """The table as JSON: the kind's ``summary`` fields first, then columns, seeds, rows and diverged cells."""
        return {**summary, "name": self.name, "columns": self.columns, "seeds": self.seeds,
                "rows": {r: {"stats": {c: s.as_json() for c, s in stats.items()}, **self.extras.get(r, {})}
                         for r, stats in self.rows.items()},
                "diverged": [{"row": r, "seed": s, "why": why} for (r, s), why in self.diverged.items()]}


def tabulate(name: str, rows: Sequence[str], seeds: Sequence[int],
             values: Mapping[tuple[str, int], Mapping[str, float]], columns: Sequence[str],
             diverged: Mapping[tuple[str, int], str] | None = None) -> ResultsTable:
    """Aggregate each (row, seed) cell's values over seeds; a row with no finished cell is left out (its diverged
    cells are named below the table), a column a cell lacks counts as missing for that seed."""
    diverged = dict(diverged or {})
    table: dict[str, dict[str, Stat]] = {}
    for row in rows:
        cells = [values[(row, s)] for s in seeds if (row, s) in values]
        if not cells:
            continue
        table[row] = {c: Stat.of([cell.get(c, math.nan) for cell in cells]) for c in columns}
    return ResultsTable(name, list(columns), table, list(seeds), diverged)


Format = Callable[[str, Stat], str]


def plain_format(digits: int = 3) -> Format:
    """Mean ± std with ``digits`` decimals (the mean alone for one seed; '-' for none)."""
    def fmt(column: str, s: Stat) -> str:
        if s.n == 0 or not math.isfinite(s.mean):
            return "-"
        return f"{s.mean:.{digits}f}" + (f" ± {s.std:.{digits}f}" if s.n > 1 else "")
    return fmt


def seeds_note(table: ResultsTable) -> str:
    """What the cells are: 'mean ± std over n = 3 seeds (0, 1, 2)', or 'n = 1 seed ...'."""
    ns = sorted(set(table.counts().values()) - {0})
    seeds = ", ".join(map(str, table.seeds))
    if ns == [1]:
        return f"n = 1 seed ({seeds}): single values, no spread"
    if len(ns) <= 1:
        return f"mean ± std over n = {ns[0] if ns else len(table.seeds)} seeds ({seeds})"
    return f"mean ± std over each row's seeds (column n; n = 1: a single value, no spread); seeds {seeds}"


def diverged_note(diverged: Mapping[tuple[str, int], str]) -> str:
    """The table's line naming the diverged cells (left out of the means; a re-run retries them)."""
    return ("Diverged (left out of the table; running the command again retries them): "
            + "; ".join(f"{n}, seed {s} ({why})" for (n, s), why in diverged.items()))


def markdown(table: ResultsTable, fmt: Format, first: str = "row",
             extra: Sequence[tuple[str, Callable[[str], str]]] = (), note: str = "") -> str:
    """The table as markdown: one line per row, ``fmt`` for each number, then the kind's ``extra`` columns
    (title, row -> text), an n column when rows have different numbers of seeds, the seeds and the ``note``, and
    the diverged cells."""
    counts = table.counts()
    uneven = len(set(counts.values())) > 1
    heads = [first, *table.columns, *(t for t, _ in extra), *(["n"] if uneven else [])]
    lines = ["| " + " | ".join(heads) + " |", "|---" * len(heads) + "|"]
    for name, stats in table.rows.items():
        cells = [name, *(fmt(c, stats[c]) for c in table.columns), *(f(name) for _, f in extra),
                 *([str(counts[name])] if uneven else [])]
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n\n" + "; ".join(x for x in (note, seeds_note(table)) if x)
    if table.diverged:
        text += "\n\n" + diverged_note(table.diverged)
    return text


def write_csv(table: ResultsTable, path: Path, extra: Sequence[str] = ()) -> None:
    """The table as CSV at ``path`` (give it to ``write_tables``, which makes it atomic): one line per row, mean,
    std and n of every column (std empty for a single seed) and the row's ``extra`` fields."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["row", *(f"{c} {k}" for c in table.columns for k in ("mean", "std", "n")), *extra])
        for name, stats in table.rows.items():
            cells = [x for c in table.columns for x in (
                f"{stats[c].mean:.6g}", f"{stats[c].std:.6g}" if stats[c].n > 1 else "", stats[c].n)]
            w.writerow([name, *cells, *(table.extras.get(name, {}).get(k) for k in extra)])


def heatmap(table: ResultsTable, path: Path, title: str, label: str = "value") -> None:
    """The means as a heatmap (rows x columns, each number printed), written atomically as PNG."""
    import matplotlib  # not for `ident3d KIND --help`

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, cols = list(table.rows), table.columns
    m = np.array([[table.rows[n][c].mean for c in cols] for n in names])
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(cols) + 2), 0.45 * len(names) + 1.8))
    im = ax.imshow(m, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    for i in range(len(names)):
        for j in range(len(cols)):
            ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=7, color="w" if m[i, j] < 0.6 else "k")
    fig.colorbar(im, ax=ax, label=label)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    write_atomic(path, lambda p: fig.savefig(p, dpi=120, format="png"))
    plt.close(fig)
