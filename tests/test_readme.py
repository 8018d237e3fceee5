"""The README keeps its promises: at most 200 lines, every link into the docs resolves (file and heading), and
every code block marked runnable runs verbatim as a new user would run it.

A runnable block is a ```bash fence right after an HTML comment `<!-- runnable; expect: A | B -->`: it is run
with `bash -e -c BLOCK` (so any failing line fails it) in a fresh directory laid out as the README says (the
repository root with the released records in `../shared/data/`; the third story's files in `my_project/`
beside the clone, outside it, and its block run from the folder holding `my_project/`),
with the venv's `bin/` first on PATH and an empty HOME, and must exit 0 and print every expected string.
Blocks that run real campaigns are not marked; the README says so beside them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.released import RELEASED, needs_released

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
VENV_BIN = Path(sys.executable).parent  # the interpreter's own bin/ (not resolved: a venv's python is a symlink)
GUIDES = ("cli", "statistics", "cluster", "records", "benchmarks")  # the reference guides issue 23 asks for

RUNNABLE = re.compile(r"<!-- runnable(?:; expect: (?P<expect>.*?))? -->\n```bash\n(?P<body>.*?)```", re.S)
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def runnable_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(block, expected strings) of every block marked runnable, in README order."""
    return [(m["body"], [e.strip() for e in (m["expect"] or "").split("|") if e.strip()])
            for m in RUNNABLE.finditer(text)]


def story_files(text: str) -> dict[str, str]:
    """The files the README asks the reader to create: python/yaml blocks whose first line is `# <path>`."""
    return {body.splitlines()[0][2:].strip(): body for lang, body in FENCE.findall(text)
            if lang in ("python", "yaml") and body.startswith("# ")}


def missing(output: str, expected: list[str]) -> list[str]:
    return [e for e in expected if e not in output]


def user_dir(root: Path, text: str) -> Path:
    """A fresh directory as the README's reader has it: the repository root (every top-level entry of the repo
    linked, nothing of a previous run), the released records beside it in ../shared/data, and my_project/ beside
    it (a project outside the repository). Returns the clone."""
    clone = root / "windtunnel"
    clone.mkdir()
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and entry.name not in ("work", "results") \
                and not entry.name.endswith(".egg-info"):
            (clone / entry.name).symlink_to(entry)
    (root / "shared" / "data").mkdir(parents=True)
    (root / "shared" / "data" / RELEASED.name).symlink_to(RELEASED)
    for rel, body in story_files(text).items():
        path = root / "my_project" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return clone


def block_cwd(block: str, clone: Path) -> Path:
    """The clone, or for a block that starts by entering a folder beside the clone (`cd my_project`), the folder
    holding it."""
    first = block.splitlines()[0]
    return clone.parent if first.startswith("cd ") and (clone.parent / first[3:].strip()).is_dir() else clone


def run_block(block: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WINDTUNNEL_", "XDG_", "VIRTUAL_ENV", "PYTHONPATH", "RAY_"))}
    env.update(PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", HOME=str(home), COLUMNS="120")
    return subprocess.run(["bash", "-e", "-c", block], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    heads = re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def broken_links(doc: Path) -> list[str]:
    bad = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # a URL, not a file of ours
        rel, _, anchor = target.partition("#")
        path = (doc.parent / rel).resolve() if rel else doc
        if not path.exists():
            bad.append(f"{doc.name}: {target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            bad.append(f"{doc.name}: {target} (no such heading)")
    return bad


def test_readme_is_at_most_200_lines() -> None:
    assert len(README.read_text().splitlines()) <= 200


def test_every_link_in_the_readme_and_the_guides_resolves() -> None:
    docs = [README, *sorted((REPO / "docs" / "guide").glob("*.md"))]
    assert not [b for d in docs for b in broken_links(d)]


def test_the_readme_links_every_reference_guide() -> None:
    text = README.read_text()
    assert all(f"docs/guide/{g}.md" in text and (REPO / "docs" / "guide" / f"{g}.md").is_file() for g in GUIDES)


def test_the_link_checker_sees_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n[ok](a.md#title) [gone](b.md) [nohead](a.md#other) [web](https://x.y)\n")
    assert broken_links(tmp_path / "a.md") == ["a.md: b.md (no such file)", "a.md: a.md#other (no such heading)"]


def test_each_story_has_a_runnable_block_with_expectations() -> None:
    text = README.read_text()
    blocks = runnable_blocks(text)
    assert len(blocks) >= 3 and all(expected for _, expected in blocks)
    stories = re.split(r"^## Story \d", text, flags=re.M)[1:4]
    assert len(stories) == 3 and all(runnable_blocks(s) for s in stories)
    assert set(story_files(text)) == {"my_policies.py", "policy/brevity.yaml", "my_campaign.yaml"}


@needs_released
def test_a_broken_runnable_line_fails_its_block(tmp_path: Path) -> None:
    """A failing command anywhere in a block fails it (bash -e), as the user would see it fail: the first
    runnable block with its first records path pointed at a missing file stops there, exit 2. Costs one CLI
    start (about 3 CPU-seconds)."""
    text = README.read_text()
    block, _ = runnable_blocks(text)[0]
    broken = block.replace("released_runs_171.csv", "released_runs_999.csv", 1)
    assert broken != block
    (tmp_path / "home").mkdir()
    clone = user_dir(tmp_path, text)
    p = run_block(broken, block_cwd(broken, clone), tmp_path / "home")
    assert p.returncode == 2 and "released_runs_999.csv" in p.stdout + p.stderr


@pytest.mark.slow
@needs_released
@pytest.mark.parametrize("index", range(len(runnable_blocks(README.read_text()))))
def test_runnable_readme_block_runs_verbatim(index: int, tmp_path: Path) -> None:
    """Each runnable block, verbatim, in a fresh directory with an empty HOME: exit 0 and the output the README
    promises. Costs about 45 CPU-seconds for the four blocks (story 1 ~19 s: demo --records, tables twice,
    compare, report; story 2 ~11 s; the paper plan ~5 s; story 3 ~8 s), each command mostly importing the
    stack; proves a reader can paste them."""
    text = README.read_text()
    block, expected = runnable_blocks(text)[index]
    home = tmp_path / "home"
    home.mkdir()
    clone = user_dir(tmp_path, text)
    p = run_block(block, block_cwd(block, clone), home)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"{block}\n--- exit {p.returncode}\n{out[-4000:]}"
    assert not missing(out, expected), f"{block}\n--- missing {missing(out, expected)}\n{out[-4000:]}"
