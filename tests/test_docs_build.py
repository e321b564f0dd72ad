"""The documentation site builds with warnings as errors, as CI builds it: ``mkdocs build --strict`` with the
repository's ``mkdocs.yml`` into a temporary folder. A link to a page, a result or an anchor that is not there, a
page missing from the navigation, or an API entry that names nothing fails the build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

import ident3d

ROOT = Path(__file__).resolve().parents[1]


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site`` (the theme's notice about its future silenced)."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def text_of(page: Path) -> str:
    """A built page's text, tags removed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text()))


def test_the_site_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = mkdocs_build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0, result.stderr[-4000:]
    home = (site / "index.html").read_text()
    assert "A short tour" in home and 'href="rendering/"' in home  # the README, its docs/ links made the site's
    api = text_of(site / "api" / "index.html")
    missing = [name for name in ident3d.PUBLIC if name not in api]
    assert missing == [], f"public names missing from the API page: {missing}"
    assert "ViewMaker" in api and "Objective" in api and "register_recipe" in api  # the extension points
    assert (site / "results" / "da_vs_lt_small" / "index.html").is_file()  # results the pages link are pages too
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    in_nav = {page for entry in nav for page in entry.values()}
    assert in_nav == {p.name for p in (ROOT / "docs").glob("*.md")} | {"index.md"}


def test_strict_settings_fail_on_a_broken_link_and_anchor(tmp_path: Path) -> None:
    """The site's own validation settings turn a link to a missing page and to a missing anchor into a failed
    build (on a one-page site with them, so the check takes a second)."""
    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [a page](missing.md) and [a section](#nowhere).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump({"site_name": "t", "docs_dir": str(docs), "validation": cfg["validation"]}))
    result = mkdocs_build(config, tmp_path / "site")
    assert result.returncode != 0
    assert "'missing.md'" in result.stderr and "'#nowhere'" in result.stderr
