"""The goldens of every committed config's cells (issue 43 §3): each cell's training and scoring keys, as the engine
derives them (``ident3d.pipelines.experiment_cmd.cell_keys``), equal the ones recorded in ``goldens/cell_keys.json``.
A change to how configs are read or cells are keyed that would re-key a cell (and so retrain it, or re-score it)
fails here; a deliberate one regenerates the file with ``python tests/test_cell_keys.py --write`` and says why in
its commit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "goldens" / "cell_keys.json"


def all_keys() -> dict[str, dict[str, dict[str, str]]]:
    """config path (relative to the repository) -> its cells' keys."""
    from ident3d.pipelines.experiment_cmd import cell_keys

    return {str(p.relative_to(ROOT)): cell_keys(p) for p in sorted((ROOT / "configs").rglob("*.yaml"))}


def test_every_configs_cells_keep_their_keys():
    want = json.loads(GOLDEN.read_text())
    got = all_keys()
    assert sorted(got) == sorted(want), "a config was added or removed: regenerate goldens/cell_keys.json"
    changed = [f"{config}: {cell}" for config, cells in want.items() for cell, keys in cells.items()
               if got[config].get(cell) != keys]
    assert not changed and all(sorted(got[c]) == sorted(want[c]) for c in want), changed[:5]


def test_a_changed_setting_changes_its_cells_keys():
    """The negative control: an override that changes training re-keys every cell; one that changes scoring only
    keeps the training keys and changes the scoring keys."""
    from ident3d.pipelines.experiment_cmd import cell_keys

    config = ROOT / "configs/synthetic/paper000.yaml"
    base, lr, fit = (cell_keys(config, o) for o in ((), ("train.lr=0.5",), ("evaluate.fit=999",)))
    assert all(lr[c]["training"] != base[c]["training"] for c in base)
    assert all(fit[c]["training"] == base[c]["training"] and fit[c]["scoring"] != base[c]["scoring"] for c in base)


if __name__ == "__main__" and "--write" in sys.argv:
    GOLDEN.write_text(json.dumps(all_keys(), indent=1, sort_keys=True) + "\n")
