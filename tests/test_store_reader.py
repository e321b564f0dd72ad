"""One store reader (issue 43 §4): code outside ``store/`` opens a store's Zarr group only through ``store/``
(``open_store``, ``store_info``, ``StoreView``, or ``store_group`` for a store already checked), never with
``zarr.open_group`` / ``zarr.open`` itself. Tests may open stores directly to look inside them."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("causal", "render", "ingest", "training", "evaluation", "pipelines", "jobs", "ident3d", "examples",
        "benchmarks")
OPENS = re.compile(r"\bzarr\.(open_group|open|open_array|group)\(")


def openers(roots=CODE) -> list[str]:
    """``path:line`` of every direct Zarr open in the project's code outside ``store/``."""
    found = []
    for top in roots:
        for path in sorted((ROOT / top).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if OPENS.search(line.split("#")[0]):
                    found.append(f"{path.relative_to(ROOT)}:{n}")
    return found


def test_no_code_outside_store_opens_a_zarr_group_itself():
    assert openers() == []


def test_the_scan_finds_an_open():
    """The negative control: the scan sees a direct open where there is one (store/ itself has them)."""
    assert openers(("store",))
