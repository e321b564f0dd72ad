"""Every ``results/**/README.md`` (``results/archive/`` left out: its READMEs quote removed scripts as they were run)
names only commands, configs and files that exist. The rules, per README:

- **Commands.** Each ``ident3d WORD`` in code (fenced or indented blocks, backslash continuations joined, and inline
  code) names a subcommand of the CLI, and each ``--option`` after it on that command (up to ``&&``, ``;``, ``|`` or
  ``#``) is one of that subcommand's options (or of its own subcommands, as ``ident3d scm show``).
- **Scripts and configs.** Each ``benchmarks/....py`` and ``configs/....yaml`` path, anywhere in the text, exists in
  the checkout. A removed file is named as a git object, ``REV:path`` (``f3771cb:benchmarks/temporal_images.py``):
  the revision must be a commit hash, and where this clone has it, the file must be in it.
- **Results.** Each ``results/...`` path, anywhere in the text (a command's ``--out`` too), exists: results are in git.
- **Links.** Each Markdown link to a relative target exists (relative to the README; ``#anchors`` dropped).
- **Files named in inline code.** A single token that ends in a results or code extension (``.md .json .jsonl .csv
  .png .txt .yaml .yml .py .pt``) or in ``/`` (a folder) must exist. A token with a ``/`` exists relative to the
  README's folder, one of its subfolders ("each folder holds ``figures/``") or one of its parent folders up to the
  checkout's root; a bare file name exists in the README's folder or its subfolders, in a parent folder, or as a
  file of the checkout outside ``results/`` (code, configs, scenes: ``crl_tac.py``, ``paper001.yaml``). Globs
  (``engine/table.*``) and braces (``table.{md,json}``) must match something.
- **What is not checked**, and why: outputs that are not in git (a token or path starting with ``runs/``,
  ``stores/``, ``/tmp/``, ``$`` or holding ``.zarr``); placeholders (a word of two or more capitals: ``STORE``,
  ``cells/ROW/seed_S/``, ``DATE_JOB``, ``NN.png``); the files every run directory holds, which git ignores
  (``metrics.jsonl``, ``metrics.csv``, ``config.json``, ``checkpoint.pt``); bare extensions (``.csv`` in
  "``table.md``, ``.csv``"), abbreviations with ``...``, and inline code that is link text (its link is checked).
"""

from __future__ import annotations

import itertools
import re
import shlex
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
READMES = sorted(p for p in RESULTS.rglob("README.md") if p.relative_to(RESULTS).parts[0] != "archive")
EXTENSIONS = (".md", ".json", ".jsonl", ".csv", ".png", ".txt", ".yaml", ".yml", ".py", ".pt")
RUN_FILES = {"metrics.jsonl", "metrics.csv", "config.json", "checkpoint.pt"}  # in every run directory (git-ignored)
NOT_IN_GIT = ("runs/", "stores/", "/tmp/", "$")
PLACEHOLDER = re.compile(r"(?<![A-Za-z])[A-Z]{2,}")
GIT_OBJECT = re.compile(r"(?<![\w/])([0-9a-f]{7,40}):((?:benchmarks|configs|training|results)/[\w./-]+)")
CHECKOUT_PATH = re.compile(r"(?<![\w./:$-])((?:benchmarks/[\w./-]+?\.py|configs/[\w./-]+?\.ya?ml))(?![\w.])")
RESULTS_PATH = re.compile(r"(?<![\w./:$-])(results/[\w./{},*-]*)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
LINK_TEXT_CODE = re.compile(r"\[`[^`\n]+`\]\(")


def code_blocks(text: str) -> list[str]:
    """Every fenced block's text and every indented (4-space) block after a blank line."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    outside = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    blocks += ["\n".join(line[4:] for line in m.group(0).splitlines())
               for m in re.finditer(r"(?:(?<=\n\n)|\A)(?: {4}[^\n]*\n?)+", outside)]
    return blocks


def inline_code(text: str) -> list[str]:
    """Inline code spans outside code blocks, except those that are a link's text."""
    outside = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    outside = LINK_TEXT_CODE.sub("[(", outside)
    return re.findall(r"`([^`\n]+)`", outside)


def commands(text: str) -> list[str]:
    """``ident3d ...`` command lines in code, continuations joined, cut at a shell separator or comment."""
    lines = [line for block in code_blocks(text) for line in block.replace("\\\n", " ").splitlines()]
    lines += [span for span in inline_code(text) if "ident3d " in span]
    out = []
    for line in lines:
        for m in re.finditer(r"(?:^|(?<=[\s;&|(]))ident3d\s+(?=[a-z])", line):
            rest = re.split(r"\s(?:&&|\|\|?|;|#)\s|\s#", line[m.end():] + " ")[0]
            out.append(rest.strip())
    return out


@cache
def cli_options() -> dict[str, set[str]]:
    """Each subcommand of ``ident3d`` and every option string of its parser (nested subcommands' included)."""
    import argparse

    from ident3d.pipelines.cli import build_parser

    def options(parser: argparse.ArgumentParser) -> set[str]:
        out = set()
        for action in parser._actions:
            out.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    out |= options(sub)
        return out

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: options(parser) for name, parser in sub.choices.items()}


def command_problems(text: str) -> list[str]:
    """Commands that name no subcommand, or an option their subcommand does not have."""
    known, bad = cli_options(), []
    for cmd in commands(text):
        try:
            words = shlex.split(cmd)
        except ValueError:
            words = cmd.split()
        if words[0] not in known:
            bad.append(f"ident3d {words[0]}: no such subcommand")
            continue
        for word in words[1:]:
            option = word.split("=", 1)[0]
            if option.startswith("--") and option not in known[words[0]]:
                bad.append(f"ident3d {words[0]}: no option {option}")
    return bad


def expand(token: str) -> list[str]:
    """Brace alternatives of a path, ``table.{md,json}`` -> ``table.md``, ``table.json``."""
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    return [x for alt in m.group(1).split(",") for x in expand(token[:m.start()] + alt + token[m.end():])]


def exists(base: Path, token: str) -> bool:
    """Whether ``token`` (braces and globs allowed) names something under ``base``."""
    for path in expand(token.rstrip("/") or "."):
        if any(c in path for c in "*?["):
            if next(iter(base.glob(path)), None) is None:
                return False
        elif not (base / path).exists():
            return False
    return True


@cache
def checkout_names() -> frozenset[str]:
    """File names of the checkout's tracked files outside results/ (code, configs, scenes, docs)."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True).stdout
    return frozenset(Path(f).name for f in files.splitlines() if not f.startswith("results/"))


def skipped(token: str) -> bool:
    """Tokens the file rule does not check: outputs not in git, placeholders, run files, fragments."""
    return (token.startswith(NOT_IN_GIT) or ".zarr" in token or bool(PLACEHOLDER.search(token)) or "..." in token
            or token in RUN_FILES or re.fullmatch(r"\.\w+", token) is not None)


def file_found(readme: Path, token: str) -> bool:
    """The inline-code file rule (see the module docstring)."""
    here = readme.parent
    folders = [here, *(p for p in here.rglob("*") if p.is_dir())]
    parents = list(here.parents)[: len(here.relative_to(ROOT).parts)]
    if "/" in token.rstrip("/"):
        return any(exists(base, token) for base in folders + parents)
    if token.endswith("/"):
        return any(exists(base, token) for base in folders + parents)
    return (any(exists(base, token) for base in folders + parents)
            or all(name in checkout_names() for name in expand(token)))


def file_problems(readme: Path, text: str) -> list[str]:
    bad = []
    for span in inline_code(text):
        token = span.strip()
        if " " in token or not (token.endswith(EXTENSIONS) or token.endswith("/") or re.search(r"\.\*$", token)):
            continue
        if GIT_OBJECT.fullmatch(token) or skipped(token):
            continue
        if not file_found(readme, token):
            bad.append(f"`{token}` names no file")
    return bad


def path_problems(text: str) -> list[str]:
    """Scripts, configs and results paths anywhere in the text that are not in the checkout."""
    bad = []
    historical = {m.group(2) for m in GIT_OBJECT.finditer(text)}
    for m in CHECKOUT_PATH.finditer(text):
        path = m.group(1)
        if path not in historical and not (ROOT / path).resolve().is_file():
            bad.append(f"{path} does not exist (name a removed file as REV:{path})")
    for m in RESULTS_PATH.finditer(text):
        token = m.group(1).rstrip(".,")
        if not skipped(token) and not exists(ROOT, token):
            bad.append(f"{token} does not exist")
    return bad


@cache
def has_commit(rev: str) -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"],
                          capture_output=True).returncode == 0


def git_object_problems(text: str) -> list[str]:
    """``REV:path`` names a file of that commit, where this clone has the commit."""
    return [f"{rev}:{path} is not in commit {rev}" for rev, path in GIT_OBJECT.findall(text)
            if has_commit(rev) and subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}:{path}"],
                                                  capture_output=True).returncode != 0]


def link_problems(readme: Path, text: str) -> list[str]:
    bad = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (readme.parent / target.split("#")[0]).exists():
            bad.append(f"link to {target}: no such file")
    return bad


@pytest.mark.parametrize("readme", READMES, ids=[str(p.parent.relative_to(RESULTS)) for p in READMES])
def test_readme_names_only_what_exists(readme):
    text = readme.read_text()
    bad = (command_problems(text) + path_problems(text) + git_object_problems(text) + link_problems(readme, text)
           + file_problems(readme, text))
    assert bad == [], f"{readme.relative_to(ROOT)}:\n" + "\n".join(bad)


def test_the_rules_catch_what_they_are_for(tmp_path):
    """Each rule fails on a made-up README naming what does not exist, and passes the forms it allows."""
    readme = RESULTS / "demo" / "README.md"  # any real folder: the rules read files around it
    assert command_problems("```bash\nident3d rendr --n 1\n```") == ["ident3d rendr: no such subcommand"]
    assert command_problems("`ident3d train --data S --no-such-flag`") == ["ident3d train: no option --no-such-flag"]
    assert command_problems("```\nident3d render --n 8 \\\n    --out runs/x.zarr && ident3d show runs/x.zarr\n```") == []
    assert command_problems("    ident3d scm show causal3dident\n") == []
    assert path_problems("python benchmarks/no_such_script.py") != []
    assert path_problems("`f3771cb:benchmarks/temporal_images.py` and configs/da_vs_lt_small.yaml") == []
    assert path_problems("--out results/no_such_folder/x.json") != []
    assert path_problems("--out results/gpu/DATE_JOB/ and runs/x") == []
    assert link_problems(readme, "[x](no_such.md) [y](../demo/README.md#top) [z](https://example.org)") == [
        "link to no_such.md: no such file"]
    assert file_problems(readme, "`no_such_table.md`, `table.md`, `table.{md,json}`, `STORE`, `.csv`") == [
        "`no_such_table.md` names no file"]
    assert file_problems(readme, "`crl_tac.py` `metrics.jsonl` `runs/demo/` `[`gone.md`](x)`") == []
    if has_commit("f3771cb"):
        assert git_object_problems("`f3771cb:benchmarks/no_such.py`") != []


def test_every_readme_is_checked_and_the_archive_is_not():
    assert len(READMES) >= 15 and all("archive" not in p.parts for p in READMES)
    assert (RESULTS / "archive" / "README.md").is_file()
    assert list(itertools.chain.from_iterable(commands(p.read_text()) for p in READMES))  # the walk finds commands
