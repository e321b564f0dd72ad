"""After a GPU window, here: file what run.py wrote (the device tool's files_at folder) under results/gpu/, one folder
per job (``DATE_JOB``, ``DATE_JOB_2`` for a second window that day) with that job's results.json and tables, and add
its row to the table in results/gpu/README.md.

    python benchmarks/gpu/record.py /work/.device/.../gpu
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HEADER = "| date | job | device | numbers | wall | ident3d | folder |"
EMPTY = "no GPU window yet"


class RecordError(Exception):
    """A folder this cannot file, said in one line."""


def job_summary(job: str, entry: dict[str, Any]) -> str:
    """A job's numbers in one table cell: img/s per store and pipeline, or each experiment's status and cells."""
    numbers = entry.get("numbers") or {}
    if entry.get("status") != "ok" and not numbers:
        return f"{entry.get('status')}: {entry.get('error', '')}".strip(": ")
    if job == "throughput":
        enc = numbers.get("encoder")
        return "; ".join(f"{s['resolution']} px " + ", ".join(f"{short(name)} {by[enc]:,.0f}" for name, by in
                                                               s["img_per_s"].items() if enc in by) + f" img/s ({enc})"
                         for s in numbers.get("stores", {}).values())
    return "; ".join(f"{stem}: {r['status']}, {r['cells']} cells, {r['seconds']:.0f} s" for stem, r in numbers.items())


def short(pipeline: str) -> str:
    """A throughput pipeline's short name: DA, LT or baseline."""
    return "baseline" if pipeline.startswith("torchvision") else pipeline.split(" ")[1]


def new_folder(results_dir: Path, date: str, job: str) -> Path:
    """``DATE_JOB``, or ``DATE_JOB_N`` for the first N that is free."""
    folder, n = results_dir / f"{date}_{job}", 2
    while folder.exists():
        folder, n = results_dir / f"{date}_{job}_{n}", n + 1
    return folder


def add_row(readme: Path, row: str) -> None:
    """Append ``row`` to the README's table (the placeholder row goes once a window is recorded)."""
    lines = readme.read_text().splitlines()
    if HEADER not in lines:
        raise RecordError(f"{readme} has no table starting {HEADER!r}")
    start = lines.index(HEADER) + 2
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    table = [line for line in lines[start:end] if EMPTY not in line] + [row]
    readme.write_text("\n".join([*lines[:start], *table, *lines[end:]]) + "\n")


def record(files: Path, results_dir: Path, only: list[str] | None = None) -> list[Path]:
    """File every job of ``files/results.json`` (or those in ``only``, e.g. an experiment cut off by the budget and
    finished by the next call is filed from that call) under ``results_dir`` and add its README row; returns the
    folders."""
    try:
        results = json.loads((files / "results.json").read_text())
        jobs, date = results["jobs"], results["started"][:10]
    except (OSError, ValueError, KeyError) as exc:
        raise RecordError(f"{files}: no readable results.json of run.py ({exc})") from None
    if only:
        missing = sorted(set(only) - set(jobs))
        if missing:
            raise RecordError(f"{files}/results.json has no job {', '.join(missing)} (it has: {', '.join(jobs)})")
        jobs = {job: entry for job, entry in jobs.items() if job in only}
    if not jobs:
        raise RecordError(f"{files}/results.json has no finished job")
    folders = []
    for job, entry in jobs.items():
        folder = new_folder(results_dir, date, job)
        folder.mkdir(parents=True)
        own = {k: v for k, v in results.items() if k != "jobs"} | {"jobs": {job: entry}}
        (folder / "results.json").write_text(json.dumps(own, indent=1) + "\n")
        for extra in sorted(files.glob(f"{job}_*")):
            shutil.copy(extra, folder / extra.name)
        link = folder.relative_to(results_dir).as_posix()
        add_row(results_dir / "README.md", f"| {date} | {job} | {entry['device_name']} | {job_summary(job, entry)} | "
                f"{entry.get('wall_s', 0):.0f} s | {entry['ident3d_commit'][:10]} | [{link}]({link}/results.json) |")
        folders.append(folder)
    return folders


def main(argv: list[str] | None = None) -> int:
    """Command line; a bad input is one line and exit 2."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", type=Path, help="the folder holding run.py's results.json (the device call's --out)")
    ap.add_argument("--results-dir", type=Path, default=ROOT / "results" / "gpu", help="default: results/gpu")
    ap.add_argument("--job", action="append", help="file only this job (repeatable; default: every job)")
    args = ap.parse_args(argv)
    try:
        folders = record(args.files, args.results_dir, args.job)
    except RecordError as exc:
        print(f"record.py: error: {exc}", file=sys.stderr)
        return 2
    for folder in folders:
        print(f"filed {folder}")
    print(f"added {len(folders)} row(s) to {args.results_dir / 'README.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
