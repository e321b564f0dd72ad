"""``ident3d scm show/plot`` for dynamic SCMs: the node table with lag parents and interventions, and the
two-slice (t-1 -> t) unrolled graph."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
from rich.markup import escape
from rich.table import Table

from ident3d.causal import DynamicSCM
from ident3d.pipelines.files import write_atomic


def describe_dynamic(model: DynamicSCM) -> Table:
    """A table of nodes: same-step and previous-step parents, group, range, mechanisms and intervention model."""
    t = Table(title=escape(f"{model.name} (dynamic): {model.spec.get('description', '')}"), title_justify="left")
    for col in ("node", "parents", "lag parents (t-1)", "group", "range", "mechanism", "step 0", "intervention"):
        t.add_column(col, overflow="fold")
    for name in model.order:
        node = model.nodes[name]
        rng = f"[{node.range[0]:g}, {node.range[1]:g}]" if node.range else "-"
        inter = node.intervention
        target = f" (target {inter.target})" if inter and inter.target != name else ""
        cells = (name, ", ".join(node.parents) or "-", ", ".join(node.lag_parents) or "-", node.group or "-", rng,
                 node.mechanism.describe(), node.initial.describe(),
                 inter.describe() + target if inter else "none")
        t.add_row(*map(escape, cells))
    return t


def plot_unrolled(model: DynamicSCM, out: Path) -> Path:
    """Draw the two-slice graph: slice t-1 on the left, slice t on the right, lag edges across, same-step edges
    curved within a slice; coloured by group, to a PNG/PDF/SVG."""
    import matplotlib  # only for `ident3d scm plot`

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = model.unrolled()
    row = {name: i for i, name in enumerate(model.order)}
    pos = {n: (3.0 * d["step"], -float(row[d["node"]])) for n, d in g.nodes(data=True)}
    groups = sorted({d["group"] or "-" for _, d in g.nodes(data=True)})
    cmap = plt.get_cmap("tab10")
    colour = {grp: cmap(i % 10) for i, grp in enumerate(groups)}
    fig, ax = plt.subplots(figsize=(9, max(4, 0.7 * len(model.order) + 1)))
    lag = [(a, b) for a, b, d in g.edges(data=True) if d["kind"] == "lag"]
    instant = [(a, b) for a, b, d in g.edges(data=True) if d["kind"] == "instant"]
    nx.draw_networkx_edges(g, pos, edgelist=lag, ax=ax, arrows=True, arrowsize=12, node_size=1400,
                           edge_color="#555555")
    nx.draw_networkx_edges(g, pos, edgelist=instant, ax=ax, arrows=True, arrowsize=12, node_size=1400,
                           edge_color="#c0392b", connectionstyle="arc3,rad=0.4")
    nx.draw_networkx_nodes(g, pos, ax=ax, node_size=1400,
                           node_color=[colour[d["group"] or "-"] for _, d in g.nodes(data=True)])
    nx.draw_networkx_labels(g, pos, labels={n: d["node"] for n, d in g.nodes(data=True)}, ax=ax, font_size=7)
    for grp in groups:
        ax.scatter([], [], color=colour[grp], label=grp, s=80)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), title="group", frameon=False)
    ax.set_title(f"{model.name}: step t-1 (left) -> step t (right); previous-step edges grey, same-step red")
    ax.axis("off")
    fig.tight_layout()
    write_atomic(out, lambda p: fig.savefig(p, dpi=120, format=out.suffix[1:]))
    plt.close(fig)
    return out
