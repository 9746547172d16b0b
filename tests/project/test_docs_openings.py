"""Every page of docs/ opens with what it answers, and its links to other pages resolve.

Why: a reader who lands on a page from a search or a link must know at once whether it is the
page they need. So the first paragraph under a page's ``# `` title begins with the marker
``Answers:``, names the question the page answers (a ``?``), and says for whom in a sentence
that begins ``For`` (docs/index.md documents the rule). Each thing is explained on one page and
the others link to it, so a link to a missing page or heading is a broken explanation: every
relative link between the Markdown pages, anchor included, must resolve.

Pure file reading: no project import, no model.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

DOCS = REPO_ROOT / "docs"
MARKER = "Answers:"
PAGES = sorted(DOCS.glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def first_paragraph(text: str) -> tuple[str, str]:
    """The title line and the first paragraph after it (lines up to the next blank line)."""
    lines = text.splitlines()
    title, rest = lines[0], lines[1:]
    while rest and not rest[0].strip():
        rest = rest[1:]
    paragraph = []
    for line in rest:
        if not line.strip():
            break
        paragraph.append(line.strip())
    return title, " ".join(paragraph)


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but ``-`` dropped, spaces to ``-``."""
    found = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        heading = line.lstrip("#").strip().lower()
        found.add(re.sub(r"[^\w\- ]", "", heading).replace(" ", "-"))
    return found


def test_there_are_pages() -> None:
    assert len(PAGES) > 10, PAGES


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_each_page_opens_with_what_it_answers_and_for_whom(page: Path) -> None:
    title, paragraph = first_paragraph(page.read_text(encoding="utf-8"))
    assert title.startswith("# "), f"{page.name}: the first line is not a '# ' title: {title!r}"
    assert paragraph.startswith(MARKER), (
        f"{page.name}: the paragraph under the title must begin with {MARKER!r} (the question "
        f"the page answers and for whom; docs/index.md), not {paragraph[:80]!r}")
    assert "?" in paragraph, f"{page.name}: the opening names no question: {paragraph!r}"
    assert re.search(r"(^|[.?;] )For ", paragraph), (
        f"{page.name}: the opening says for whom in a sentence beginning 'For': {paragraph!r}")


def test_the_index_documents_the_marker() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    assert f'"{MARKER}"' in index and "tests/project/test_docs_openings.py" in index


@pytest.mark.parametrize("page", [*PAGES, REPO_ROOT / "README.md"], ids=lambda p: p.name)
def test_links_to_markdown_pages_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        if path and not path.endswith(".md"):
            continue
        linked = (page.parent / path).resolve() if path else page
        if not linked.is_file():
            broken.append(target)
        elif anchor and anchor not in anchors(linked):
            broken.append(target)
    assert not broken, f"{page.name}: links that do not resolve: {broken}"
