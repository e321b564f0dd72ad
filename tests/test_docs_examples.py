"""Every example in README.md and docs/*.md runs: each ```bash, ```yaml and ```python block and each indented
``ident3d ...`` command of a list item, at tiny sizes (``TINY``, ``DEFAULTS``), in order.

What counts as an example, and how it runs:

- ```bash blocks and indented command blocks (lines indented 4+ spaces that start with ``ident3d ``, with their
  ``\\`` continuation lines): each ``ident3d`` line runs in this process (``helpers.run_cli``), shell comments
  stripped, and must exit 0 (or the code a trailing ``# exit code N`` comment names) without a traceback. Any
  other shell line (``pip install``, ``python script.py``, ``cd``, a pipe) makes the block not runnable.
  ``compare`` and ``scaling`` (``CONFIG_CHECKED``) are checked, not trained: their sizes live in their configs.
- ```yaml blocks must parse and are validated by their shape: an SCM spec (``nodes:``) by ``ident3d scm show``, a
  scene (``camera:``) by ``ident3d.render.scene.load_scene``, an experiment config by its command's ``load_config``.
- ```python blocks are executed in the working folder.
- ```text blocks (output) and blocks without a language (diagrams) are not examples; inline `ident3d ...` in
  prose and tables are syntax summaries and are not run either.

Markers, on the line(s) just before a block (blank lines and other ``<!-- ... -->`` lines may sit in between):
``<!-- not run: REASON -->`` skips it (``pytest -ra`` lists it with its reason; a REASON starting with ``BUG:``
is a defect to fix), ``<!-- file: NAME -->`` writes the block to NAME in the working folder for the examples
that follow. A block that cannot run and has no marker fails ``test_every_example_runs_or_is_marked``.

All documents share one working folder and run in reading order (README.md, then the docs pages in the order
README.md names them, then the rest), so a page may use what an earlier page made: sections can move from
README.md into docs/ pages. The folder stands in for the repository's root: a copy of ``configs/`` (examples name
the repository's configs) and an empty ``docs/`` (the gallery commands write there); absolute ``/tmp/...`` paths
are moved into it, so no example writes outside it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import shlex
import shutil
import subprocess
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]


def reading_order() -> tuple[Path, ...]:
    """README.md, then the docs pages in the order README.md first names them, then the other pages by name."""
    readme, pages = ROOT / "README.md", sorted((ROOT / "docs").glob("*.md"))
    named = [ROOT / "docs" / n for n in dict.fromkeys(re.findall(r"docs/([\w.-]+\.md)", readme.read_text()))]
    linked = [p for p in named if p in pages]
    return (readme, *linked, *(p for p in pages if p not in linked))


DOCS = reading_order()


def at_most(cap: int) -> Callable[[list[str]], list[str]]:
    """A size rule: the value, lowered to ``cap``."""
    return lambda values: [str(min(int(values[0].replace("_", "")), cap))]


def exactly(value: int) -> Callable[[list[str]], list[str]]:
    """A size rule: ``value`` whatever was written."""
    return lambda values: [str(value)]


def first(values: list[str]) -> list[str]:
    """A size rule for a list flag (``--seeds 0 1 2``): its first value only."""
    return values[:1]


# Tiny sizes. Each size flag (``--batch-size``) or Python keyword (``batch_size=``, ``"batch_size":``) of an example
# is rewritten by its rule before the example runs, so every example takes seconds.
TINY: dict[str, Callable[[list[str]], list[str]]] = {
    "n": at_most(24),             # images / samples
    "resolution": exactly(16),    # px
    "samples": exactly(1),        # Cycles samples per pixel
    "steps": exactly(2),          # training steps
    "batch_size": exactly(8),
    "sequences": at_most(12),     # sequences of a sequence store
    "length": at_most(5),         # frames per sequence (12 x 5 frames: MIG scores on at least 40)
    "workers": exactly(1),        # no Dask cluster to start
    "num_workers": exactly(0),    # no loader processes
    "fit": at_most(16),           # images evaluate fits on
    "score": at_most(48),         # images evaluate scores on
    "max_images": at_most(64),    # images a probe uses
    "seeds": first,               # one seed of a grid
}


def first_row(argv: list[str], work: Path) -> str:
    """The first row of a synthetic command's config: paper 000's kernel R^2 on 5,000 points takes ~4 s a row."""
    from ident3d.causal.yamlnum import load_yaml

    return load_yaml((work / argv[argv.index("--config") + 1]).read_text())["rows"][0]["name"]


# Size flags added to a command that lacks them (not with --list or --help): a value or a function of the command.
DEFAULTS: dict[str, dict[str, str | Callable[[list[str], Path], str]]] = {
    "render": {"--resolution": "16", "--samples": "1"},
    "train": {"--steps": "2", "--batch-size": "8"},
    "synthetic": {"--steps": "2", "--seeds": "0", "--rows": first_row},
    "evaluate": {"--fit": "16", "--score": "48"},
    "probe": {"--max-images": "64"},
}
# Commands whose sizes live in their config (a grid trains minutes to hours): the command line is parsed and the
# config checked by the command's own ``load_config`` (what the command does first), nothing is trained.
CONFIG_CHECKED = {"compare", "scaling"}

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*(not run|file):\s*(.*?)\s*-->\s*$")
COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
LANGS = {"bash": "bash", "sh": "bash", "shell": "bash", "yaml": "yaml", "yml": "yaml", "python": "python", "py": "python"}
NOT_EXAMPLES = {"", "text"}
EXIT_CODE = re.compile(r"#.*\bexit code (\d+)")
SHELL_SYNTAX = re.compile(r"[|;&<>`$]")


@dataclass(frozen=True)
class Block:
    """One example of a document: where it is, its language, its lines and its markers."""

    doc: str
    line: int
    lang: str
    body: tuple[tuple[int, str], ...]
    skip: str | None = None
    file: str | None = None

    @property
    def where(self) -> str:
        """``README.md:104``: the document and the block's first line."""
        return f"{self.doc}:{self.line}"

    @property
    def text(self) -> str:
        """The block's text, indentation of an indented block removed."""
        indent = min((len(t) - len(t.lstrip()) for _, t in self.body if t.strip()), default=0)
        return "".join(t[indent:] + "\n" for _, t in self.body)


def markers(lines: list[str], start: int) -> dict[str, str]:
    """The markers on the lines just before line index ``start`` (blank and comment lines between are fine)."""
    found: dict[str, str] = {}
    i = start - 1
    while i >= 0 and (not lines[i].strip() or COMMENT.match(lines[i])):
        m = MARKER.match(lines[i])
        if m:
            found.setdefault(m.group(1), m.group(2))
        i -= 1
    return found


def parse_doc(path: Path, name: str | None = None) -> list[Block]:
    """Every fenced block of an example language (plus any unknown one) and every indented command block."""
    lines = path.read_text().splitlines()
    name = name or str(path.relative_to(ROOT))
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(m.group(2))), len(lines))
            lang = m.group(3).lower()
            if lang not in NOT_EXAMPLES:
                body = tuple((j + 1, lines[j]) for j in range(i + 1, end))
                blocks.append(new_block(name, i, LANGS.get(lang, lang), body, lines))
            i = end + 1
        elif is_indented_command(lines[i]):
            j = i + 1
            while j < len(lines) and (is_indented_command(lines[j]) or lines[j - 1].rstrip().endswith("\\")):
                j += 1
            blocks.append(new_block(name, i, "bash", tuple((k + 1, lines[k]) for k in range(i, j)), lines))
            i = j
        else:
            i += 1
    return blocks


def is_indented_command(line: str) -> bool:
    """An ``ident3d`` command indented as code inside a list item."""
    return len(line) - len(line.lstrip(" ")) >= 4 and line.lstrip().startswith("ident3d ")


def new_block(doc: str, start: int, lang: str, body: tuple[tuple[int, str], ...], lines: list[str]) -> Block:
    """A ``Block`` starting at line index ``start``, with the markers before it."""
    found = markers(lines, start)
    return Block(doc, start + 1, lang, body, found.get("not run"), found.get("file"))


def dangling_markers(path: Path, name: str, blocks: list[Block]) -> list[str]:
    """Markers that belong to no block (a block moved away from its marker)."""
    lines, starts = path.read_text().splitlines(), {b.line - 1 for b in blocks}
    found = []
    for i, t in enumerate(lines):
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or COMMENT.match(lines[j])):
            j += 1
        if MARKER.match(t) and j not in starts:
            found.append(f"{name}:{i + 1}: marker `{t.strip()}` is not just before an example")
    return found


def commands(b: Block) -> list[tuple[int, str]]:
    """The block's logical shell lines (continuations joined) with their first line numbers."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for n, t in b.body:
        start, text = pending or (n, "")
        text += " " + t.strip()
        pending = (start, text[:-1]) if text.endswith("\\") else None
        if pending is None and shlex.split(text, comments=True):
            out.append((start, text.strip()))
    return out


def problem(b: Block) -> tuple[int, str] | None:
    """Why the block cannot run in the suite (the line and the reason), or None."""
    if b.lang not in RUNNERS:
        return b.line, f"a ```{b.lang} block has no runnable form"
    for n, text in commands(b) if b.lang == "bash" else ():
        code = text.split(" #")[0]
        if not code.startswith("ident3d "):
            return n, f"`{code}` is not an ident3d command"
        if SHELL_SYNTAX.search(code):
            return n, f"`{code}` needs a shell"
    return None


def unrunnable(path: Path, name: str | None = None) -> list[str]:
    """The document's examples that cannot run and carry no marker, and its markers that mark nothing."""
    name = name or str(path.relative_to(ROOT))
    blocks = parse_doc(path, name)
    found = [f"{name}:{p[0]}: {p[1]}; make it runnable or mark it `<!-- not run: REASON -->`"
             for b in blocks if b.skip is None and (p := problem(b))]
    return found + dangling_markers(path, name, blocks)


def tiny(argv: list[str], work: Path) -> list[str]:
    """The command line at tiny sizes: ``TINY`` rules applied, ``DEFAULTS`` added, ``/tmp/...`` made relative."""
    out, i = [], 0
    while i < len(argv):
        flag, _, inline = argv[i].partition("=")
        rule = TINY.get(flag[2:].replace("-", "_")) if flag.startswith("--") else None
        if rule is None:
            out.append(argv[i][1:] if argv[i].startswith("/tmp/") else argv[i])
            i += 1
            continue
        j = i + 1
        while not inline and j < len(argv) and not argv[j].startswith("--"):
            j += 1
        out += [flag, *rule([inline] if inline else argv[i + 1:j])]
        i = j
    if not {"--list", "--help"} & set(out):
        for flag, value in DEFAULTS.get(out[0], {}).items():
            if flag not in out:
                out += [flag, value if isinstance(value, str) else value(out, work)]
    return out


def tiny_python(code: str) -> str:
    """Python at tiny sizes: integer keywords and dict entries named in ``TINY`` rewritten by their rules."""
    pattern = re.compile(r"""(\b(%s)\s*=\s*|["'](%s)["']\s*:\s*)(\d[\d_]*)\b""" % (("|".join(TINY),) * 2))
    return pattern.sub(lambda m: m.group(1) + TINY[m.group(2) or m.group(3)]([m.group(4)])[0], code)


def fail(b: Block, line: int, what: str, result: subprocess.CompletedProcess | None = None) -> None:
    """Fail the test naming the document, the line and the example."""
    detail = ""
    if result is not None:
        detail = f"\nexit code {result.returncode}; stderr:\n{result.stderr[-3000:]}\nstdout:\n{result.stdout[-1500:]}"
    pytest.fail(f"{b.doc}:{line}: {what}{detail}", pytrace=False)


def run_bash(b: Block, work: Path, log: list[str]) -> None:
    """Every ident3d line of the block, at tiny sizes, in ``work``."""
    for n, text in commands(b):
        argv = tiny(shlex.split(text, comments=True)[1:], work)
        expected = int(m.group(1)) if (m := EXIT_CODE.search(text)) else 0
        t0 = time.perf_counter()
        result = check_config_of(argv, work) if argv[0] in CONFIG_CHECKED else run_cli(*argv, cwd=work)
        log.append(f"{b.doc}:{n}: {time.perf_counter() - t0:5.1f} s  ident3d {shlex.join(argv)}")
        if result.returncode != expected or "Traceback" in result.stderr:
            fail(b, n, f"`{text}` (run as `ident3d {shlex.join(argv)}`) failed", result)


def check_config_of(argv: list[str], work: Path) -> subprocess.CompletedProcess:
    """A grid command (``CONFIG_CHECKED``) checked, not run: its flags parsed and its config loaded."""
    from ident3d.causal.errors import UserError
    from ident3d.pipelines.cli import build_parser

    err = io.StringIO()
    code = 0
    with contextlib.chdir(work), contextlib.redirect_stderr(err):
        try:
            args = build_parser(argv[:1]).parse_args(argv)
            importlib.import_module(f"ident3d.pipelines.kinds.{argv[0]}").load_config(args.config)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except UserError as exc:
            print(f"ident3d {argv[0]}: error: {exc}", file=err)
            code = 2
    return subprocess.CompletedProcess(argv, code, "", err.getvalue())


def run_python(b: Block, work: Path, log: list[str]) -> None:
    """The block executed in ``work`` at tiny sizes; an exception fails the test with its traceback."""
    out = io.StringIO()
    t0 = time.perf_counter()
    try:
        with contextlib.chdir(work), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(compile(tiny_python(b.text), b.where, "exec"), {"__name__": "__docs_example__"})  # noqa: S102
    except Exception as exc:  # noqa: BLE001 - any error of the example fails it
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == b.where]
        fail(b, b.line + (lines[-1] if lines else 0),
             f"the python block failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    log.append(f"{b.where}: {time.perf_counter() - t0:5.1f} s  python block")


def yaml_kind(data: object) -> str | None:
    """What a YAML example is, by its shape: scm, scene, caption spec, compare, synthetic or scaling (None:
    unknown)."""
    if not isinstance(data, dict):
        return None
    for key, kind in (("points", "scaling"), ("stores", "compare"), ("rows", "synthetic"), ("nodes", "scm"),
                      ("camera", "scene"), ("templates", "captions")):
        if key in data:
            return kind
    return None


def check_yaml(b: Block, work: Path, log: list[str]) -> None:
    """The YAML block parsed and validated for real by its shape (written to its ``file:`` name, if any)."""
    from ident3d.causal.yamlnum import load_yaml

    try:
        kind = yaml_kind(load_yaml(b.text))
    except Exception as exc:  # noqa: BLE001 - yaml.YAMLError and its kin
        fail(b, b.line, f"the YAML does not parse: {exc}")
    if kind is None:
        fail(b, b.line, "the YAML is neither an SCM spec, a scene, a caption spec nor an experiment config")
    path = work / (b.file or f"example_{b.line}.yaml")
    if b.file is None:  # run_blocks wrote a file: block already
        path.write_text(b.text)
    t0 = time.perf_counter()
    if kind == "scm":
        result = run_cli("scm", "show", path, cwd=work)
    elif kind == "scene":
        result = scene_checked(path)
    elif kind == "captions":
        result = captions_checked(path)
    else:
        result = check_config_of([kind, "--config", str(path), "--out", "out"], work)
    log.append(f"{b.where}: {time.perf_counter() - t0:5.1f} s  {kind} YAML checked")
    if result.returncode != 0 or "Traceback" in result.stderr:
        fail(b, b.line, f"the {kind} YAML is not valid", result)


def scene_checked(path: Path) -> subprocess.CompletedProcess:
    """A scene file loaded and validated by ``ident3d.render.scene.load_scene``: exit code 2 and its one line if invalid."""
    from ident3d.render.scene import SceneError, load_scene

    try:
        load_scene(path)
    except SceneError as exc:
        return subprocess.CompletedProcess([str(path)], 2, "", str(exc))
    return subprocess.CompletedProcess([str(path)], 0, "", "")


def captions_checked(path: Path) -> subprocess.CompletedProcess:
    """A caption spec validated against the causal3dident SCM and scene (the docs' examples word its latents)."""
    from ident3d.causal import load_scm
    from ident3d.causal.errors import UserError
    from ident3d.render.captions import load_caption_spec
    from ident3d.render.scene import load_scene
    from ident3d.render.text_plan import latent_infos

    try:
        load_caption_spec(path, latent_infos(load_scm("causal3dident"), load_scene("causal3dident")))
    except UserError as exc:
        return subprocess.CompletedProcess([str(path)], 2, "", str(exc))
    return subprocess.CompletedProcess([str(path)], 0, "", "")


RUNNERS = {"bash": run_bash, "python": run_python, "yaml": check_yaml}


def run_blocks(blocks: list[Block], work: Path, log: list[str]) -> None:
    """Run the runnable blocks in order in ``work`` (a ``file:`` block written there first), times into ``log``."""
    for b in blocks:
        if b.skip is not None:
            continue
        if b.file is not None:
            (work / b.file).parent.mkdir(parents=True, exist_ok=True)
            (work / b.file).write_text(b.text)
        RUNNERS[b.lang](b, work, log)


def new_workspace(work: Path) -> Path:
    """A working folder standing in for the repository's root: a copy of configs/ and an empty docs/."""
    shutil.copytree(ROOT / "configs", work / "configs")
    (work / "docs").mkdir()
    return work


@dataclass
class Workspace:
    """The one working folder of the documents' examples, and the documents already run in it."""

    path: Path
    done: set[Path]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """Shared by every document, so a page may use what an earlier page (in reading order) made."""
    return Workspace(new_workspace(tmp_path_factory.mktemp("docs_examples")), set())


def test_every_example_runs_or_is_marked() -> None:
    """A block the suite cannot run must say why, so no example silently goes untested."""
    assert [p for doc in DOCS for p in unrunnable(doc)] == []


@pytest.mark.parametrize("b", [b for doc in DOCS for b in parse_doc(doc) if b.skip is not None],
                         ids=lambda b: b.where)
def test_marked_example_is_reported(b: Block) -> None:
    """Each example marked ``not run`` shows up in ``pytest -ra`` with its reason."""
    pytest.skip(f"{b.where}: not run: {b.skip}")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_examples_run(doc: Path, workspace: Workspace) -> None:
    """The document's runnable examples (after those of the pages before it, if not run yet), in order, at tiny
    sizes; the time of each is printed (``pytest -rP``). BLAS runs on one thread: on a loaded 2-core machine
    OpenBLAS's two spinning threads made paper 000's kernel R^2 (2,000 points) take 62 s instead of 3.7 s."""
    import scipy.linalg  # noqa: F401 - loads scipy's own OpenBLAS, so that the limit below reaches it too
    from threadpoolctl import threadpool_limits

    log: list[str] = []
    try:
        with threadpool_limits(1, user_api="blas"):
            for page in DOCS[:DOCS.index(doc) + 1]:
                if page not in workspace.done:
                    workspace.done.add(page)
                    run_blocks([b for b in parse_doc(page) if problem(b) is None], workspace.path, log)
    finally:
        print("\n".join(log))


def readme_block(contains: str) -> Block:
    """The first runnable example of the documents (in reading order) that contains ``contains``."""
    return next(b for doc in DOCS for b in parse_doc(doc) if contains in b.text and b.skip is None)


def broken_copy(tmp_path: Path, b: Block, old: str, new: str) -> Block:
    """A one-block document holding ``b`` with ``old`` replaced by ``new`` (its fence on line 3)."""
    assert old in b.text
    doc = tmp_path / "broken.md"
    doc.write_text(f"# broken\n\n```{b.lang}\n{b.text.replace(old, new)}```\n")
    [copy] = parse_doc(doc, "broken.md")
    return copy


@pytest.mark.parametrize(("contains", "old", "new", "message"), [
    ("ident3d render --sequences 500", "--length", "--lenght",
     r"broken\.md:4: `ident3d render --sequences 500 --lenght 8 .*\n.*\n.*unrecognized arguments: --lenght"),
    ("lag_parents: [x]", "lag_parents: [x]", "lag_parents: [z]", r"broken\.md:3: the scm YAML is not valid\n"),
    ("ident3d.render_store(", 'scene="causal3dident"', 'scene="nope"',
     r"broken\.md:5: the python block failed: SceneError: no scene 'nope'"),
], ids=["bash", "yaml", "python"])
def test_a_broken_example_fails_naming_its_line(tmp_path: Path, contains: str, old: str, new: str,
                                                message: str) -> None:
    """A copy of a documented example with one mistake fails the run, naming the document, the line and the example."""
    b = broken_copy(tmp_path, readme_block(contains), old, new)
    with pytest.raises(pytest.fail.Exception, match=message):
        run_blocks([b], new_workspace(tmp_path / "work"), [])


def test_an_unrunnable_example_without_a_marker_is_reported(tmp_path: Path) -> None:
    """A block the suite cannot run fails the check unless a marker says why; a marker must sit on a block."""
    doc = tmp_path / "doc.md"
    doc.write_text("```bash\npip install ident3d\n```\n\n<!-- not run: needs the network -->\n\n```bash\n"
                   "pip install ident3d\n```\n\n<!-- not run: marks nothing -->\nSome prose.\n\n```toml\n[x]\n```\n")
    assert unrunnable(doc, "doc.md") == [
        "doc.md:2: `pip install ident3d` is not an ident3d command; make it runnable or mark it "
        "`<!-- not run: REASON -->`",
        "doc.md:14: a ```toml block has no runnable form; make it runnable or mark it `<!-- not run: REASON -->`",
        "doc.md:11: marker `<!-- not run: marks nothing -->` is not just before an example"]
    assert [b.skip for b in parse_doc(doc, "doc.md")] == [None, "needs the network", None]


def test_an_example_may_name_its_exit_code(tmp_path: Path) -> None:
    """``# exit code N`` after a command is the code it must return (``ident3d check`` returns 2 on no store)."""
    doc = tmp_path / "doc.md"
    doc.write_text("```bash\nident3d check stores/none.zarr   # exit code 2: not a store\n"
                   "ident3d check stores/none.zarr\n```\n")
    with pytest.raises(pytest.fail.Exception, match=r"doc\.md:3: `ident3d check stores/none\.zarr` .*failed"):
        run_blocks(parse_doc(doc, "doc.md"), tmp_path, [])
