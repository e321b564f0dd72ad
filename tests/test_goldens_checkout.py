"""benchmarks/goldens.py runs the checkout it is given (``--checkout``), not the installed one (issue 43 §4): a copy
of this checkout gives this checkout's recorded digest, and a copy with a one-byte change to the scene a render uses (its
exposure, 0.0 -> 1.0) gives another render digest, which ``--compare`` reports (exit 1, ``differ: render``). The
old way, a checkout on PYTHONPATH, is refused in one line: it would run the installed checkout's subpackages.

Cost: two ``--tiny`` runs (the render job: one CLI process rendering 64 images of 16 px), about 8 s each on one
idle core; where the goldens were recorded, the unchanged copy's digest is the recorded one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import benchmark

ROOT = Path(__file__).resolve().parents[1]
SCENE = Path("render", "scenes", "causal3dident.yaml")  # the scene of goldens' render job
ONE_BYTE = ("\nexposure: 0.0\n", "\nexposure: 1.0\n")


def copy_checkout(goldens, to: Path) -> Path:
    """What an install of the checkout reads (pyproject.toml and the folders of its package-dir), copied to ``to``."""
    to.mkdir()
    shutil.copy(ROOT / "pyproject.toml", to / "pyproject.toml")
    for folder in goldens.package_dirs(ROOT).values():
        shutil.copytree(folder, to / folder.relative_to(ROOT), ignore=shutil.ignore_patterns("__pycache__"))
    return to


def test_goldens_runs_the_checkout_it_is_given_and_sees_a_one_byte_change(tmp_path, capsys):
    goldens = benchmark("goldens")
    same = copy_checkout(goldens, tmp_path / "same")
    changed = copy_checkout(goldens, tmp_path / "changed")
    before = (changed / SCENE).read_bytes()
    assert before.count(ONE_BYTE[0].encode()) == 1, f"{SCENE} no longer sets exposure 0.0: pick another byte"
    (changed / SCENE).write_bytes(before.replace(*(s.encode() for s in ONE_BYTE)))
    after = (changed / SCENE).read_bytes()
    assert len(after) == len(before) and sum(a != b for a, b in zip(after, before, strict=True)) == 1

    def run(name: str, checkout: Path, compare: Path | None = None) -> tuple[int, dict, str]:
        """goldens.py --tiny (the render job) on ``checkout``, compared with the digests in ``compare``."""
        out, work = tmp_path / f"{name}.json", tmp_path / f"work_{name}"
        args = ["--tiny", "--out", str(out), "--work", str(work), "--checkout", str(checkout)]
        code = goldens.main(args + (["--compare", str(compare)] if compare else []))
        return code, json.loads(out.read_text()), capsys.readouterr().out

    code, copy, printed = run("same", same)
    assert code == 0 and list(copy) == ["render"] and f"the code of {same}" in printed
    recorded = json.loads((ROOT / "results" / "goldens_issue22.json").read_text())
    if goldens.machine() == recorded["machine"]:  # where this checkout's digests are the recorded ones (test_goldens)
        assert copy["render"] == recorded["now"]["digests"]["render"]
    code, edited, printed = run("changed", changed, compare=tmp_path / "same.json")
    assert code == 1 and edited["render"] != copy["render"] and "differ: render" in printed
    root = tmp_path / "work_changed" / "import_root" / "ident3d"  # the import root the jobs ran with
    assert (root / "render").resolve() == changed / "render" and (root / "__init__.py").resolve().parent == changed / "ident3d"


def test_a_checkout_on_pythonpath_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    goldens = benchmark("goldens")
    other = copy_checkout(goldens, tmp_path / "other")
    monkeypatch.setenv("PYTHONPATH", str(other))
    with pytest.raises(SystemExit) as exc:
        goldens.main(["--out", str(tmp_path / "g.json"), "--work", str(tmp_path / "work")])
    assert exc.value.code == 2 and f"pass --checkout {other}" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()
