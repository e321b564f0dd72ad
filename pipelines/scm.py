"""``ident3d scm``: list, show and plot structural causal models."""

from __future__ import annotations

import argparse
from pathlib import Path

import networkx as nx
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ident3d.causal import SCM, DynamicSCM, builtin_names, load_any, parse_spec, read_spec_text
from ident3d.pipelines.files import check_output, write_atomic
from ident3d.pipelines.scm_dynamic import describe_dynamic, plot_unrolled


def describe(scm: SCM) -> Table:
    """A table of nodes: parents, group, range and mechanism."""
    t = Table(title=escape(f"{scm.name}: {scm.spec.get('description', '')}"), title_justify="left")
    for col in ("node", "parents", "group", "range", "mechanism"):
        t.add_column(col)
    for name in scm.order:
        node = scm.nodes[name]
        rng = f"[{node.range[0]:g}, {node.range[1]:g}]" if node.range else "-"
        label = f"{name} (class)" if name == scm.class_node else name
        cells = (label, ", ".join(node.parents) or "-", node.group or "-", rng, node.mechanism.describe())
        t.add_row(*map(escape, cells))
    return t


def plot_graph(scm: SCM, out: Path) -> Path:
    """Draw the DAG in layers (topological generations), coloured by group, to a PNG/PDF/SVG."""
    import matplotlib  # only for `ident3d scm plot`

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = scm.graph.copy()
    for layer, nodes in enumerate(nx.topological_generations(g)):
        for n in nodes:
            g.nodes[n]["layer"] = layer
    pos = nx.multipartite_layout(g, subset_key="layer", align="horizontal", scale=2.0)
    pos = {n: (x, -y) for n, (x, y) in pos.items()}
    groups = sorted({g.nodes[n]["group"] or "-" for n in g})
    cmap = plt.get_cmap("tab10")
    colour = {grp: cmap(i % 10) for i, grp in enumerate(groups)}
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(g)), 5))
    nx.draw_networkx_edges(g, pos, ax=ax, arrows=True, arrowsize=14, node_size=1600,
                           edge_color="#555555")
    nx.draw_networkx_nodes(g, pos, ax=ax, node_size=1600,
                           node_color=[colour[g.nodes[n]["group"] or "-"] for n in g])
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=8)
    for grp in groups:
        ax.scatter([], [], color=colour[grp], label=grp, s=80)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), title="group", frameon=False)
    ax.set_title(f"{scm.name}: causal graph (parents above children)")
    ax.axis("off")
    fig.tight_layout()
    write_atomic(out, lambda p: fig.savefig(p, dpi=120, format=out.suffix[1:]))
    plt.close(fig)
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scm", help="list, show or plot structural causal models",
                       description="Inspect SCMs: the built-ins or your own spec files (YAML).")
    cmds = p.add_subparsers(dest="scm_command", required=True, metavar="{list,show,plot}")
    ls = cmds.add_parser("list", help="list the built-in SCMs", description="List built-in SCMs.")
    ls.set_defaults(run=run_list)
    show = cmds.add_parser(
        "show", help="print nodes, parents, groups and mechanisms",
        description="Print an SCM's nodes with parents, groups, ranges and mechanisms, and its "
                    "change sets. --yaml prints the spec file instead, to copy and edit.",
        epilog="example: ident3d scm show causal3dident --yaml > my_scm.yaml")
    show.add_argument("scm", metavar="NAME|PATH", help="built-in SCM name or spec file")
    show.add_argument("--yaml", action="store_true", help="print the spec as YAML (to copy)")
    show.set_defaults(run=run_show)
    plot = cmds.add_parser("plot", help="draw the DAG to an image file",
                           description="Draw an SCM's causal graph (PNG, PDF or SVG).",
                           epilog="example: ident3d scm plot causal3dident --out graph.png")
    plot.add_argument("scm", metavar="NAME|PATH", help="built-in SCM name or spec file")
    plot.add_argument("--out", required=True, help="output image (.png, .pdf or .svg)")
    plot.add_argument("--overwrite", action="store_true", help="replace an existing file")
    plot.set_defaults(run=run_plot)


def run_list(args: argparse.Namespace) -> int:
    width = max(16, *map(len, builtin_names()))
    for name in builtin_names():
        print(f"{name:{width}s} {load_any(name).spec.get('description', '')}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    if args.yaml:
        text = read_spec_text(args.scm)
        load_any(parse_spec(text, args.scm))  # only print specs that are valid
        print(text, end="")
        return 0
    scm = load_any(args.scm)
    console = Console(width=140)
    if isinstance(scm, DynamicSCM):
        console.print(describe_dynamic(scm))
        return 0
    console.print(describe(scm))
    for name, members in scm.change_sets.items():
        console.print(f"change set [bold]{name}[/bold]: {', '.join(members)}")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    out = check_output(args.out, (".png", ".pdf", ".svg"), args.overwrite)
    scm = load_any(args.scm)
    plot_unrolled(scm, out) if isinstance(scm, DynamicSCM) else plot_graph(scm, out)
    print(f"wrote {out}")
    return 0
