"""MkDocs hook of the documentation site (``mkdocs.yml``): the home page is README.md, the pages may link the
results they quote (``../results/...``), and the API page lists the public API that ``ident3d/__init__.py`` declares.

- Home: README.md becomes ``index.md``, its links rewritten from the repository's root to the site's.
- Results: every file under ``results/`` joins the site under its own path, so a page's link to
  ``../results/NAME/README.md`` (right on GitHub too) is checked by ``mkdocs build --strict`` and rendered.
- API: ``<!-- public-api -->`` on ``api.md`` becomes one ``::: MODULE.NAME`` per public name of ``ident3d.PUBLIC``
  (and one per module of ``ident3d/``), read by mkdocstrings. Griffe reads the sources statically; it cannot follow
  pyproject's ``package-dir`` (``ident3d.render`` is the folder ``render/``), so it reads a temporary tree in which
  ``ident3d/`` holds links to the repository's folders.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files, InclusionLevel

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_API = "<!-- public-api -->"
README_LINK = re.compile(r"(\]\()(docs/|results/)")


@event_priority(100)  # before mkdocstrings' own on_config, which may start the handler
def on_config(config: Any) -> Any:
    """Point mkdocstrings' Python handler at a tree where ``ident3d.render`` is ``render/`` (see the docstring)."""
    import ident3d

    tree = Path(tempfile.mkdtemp(prefix="ident3d_api_"))
    (tree / "ident3d").mkdir()
    for path in (ROOT / "ident3d").glob("*.py"):
        (tree / "ident3d" / path.name).symlink_to(path)
    for name in ident3d.SUBPACKAGES:
        (tree / "ident3d" / name).symlink_to(ROOT / name, target_is_directory=True)
    config["_ident3d_api_tree"] = tree
    handlers = config["plugins"]["mkdocstrings"].config["handlers"]
    handlers.setdefault("python", {})["paths"] = [str(tree)]
    return config


def on_post_build(config: Any) -> None:
    """Remove the temporary tree of links."""
    tree = config.get("_ident3d_api_tree")
    if tree is not None:
        shutil.rmtree(tree, ignore_errors=True)


def on_files(files: Files, config: Any) -> Files:
    """The home page made from README.md, and every file under results/ (not in the navigation)."""
    home = README_LINK.sub(lambda m: m.group(1) + ("" if m.group(2) == "docs/" else "../results/"),
                           (ROOT / "README.md").read_text())
    files.append(File.generated(config, "index.md", content=home))
    for path in sorted(p for p in (ROOT / "results").rglob("*") if p.is_file()):
        rel = path.relative_to(ROOT).as_posix()
        dest = File(rel, None, config["site_dir"], config["use_directory_urls"]).dest_uri
        files.append(File(f"../{rel}", config["docs_dir"], config["site_dir"], config["use_directory_urls"],
                          dest_uri=dest, inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """The API page's marker replaced by one mkdocstrings entry per public name and module of ``ident3d``."""
    if PUBLIC_API not in markdown:
        return markdown
    return markdown.replace(PUBLIC_API, "\n\n".join(public_entries()))


def public_entries() -> list[str]:
    """``::: ident3d.render.api.render_store`` and its kin: each public name where it is defined (a public module as
    itself), then each other module of the ``ident3d`` folder besides ``__init__``."""
    import ident3d

    names = [module if module == f"ident3d.{name}" else f"{module}.{name}" for name, module in ident3d.PUBLIC.items()]
    modules = [f"ident3d.{p.stem}" for p in sorted((ROOT / "ident3d").glob("*.py")) if p.stem != "__init__"]
    return [f"::: {target}" for target in dict.fromkeys(names + modules)]
