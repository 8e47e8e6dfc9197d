"""The README is the map and docs/ the reference: every relative link between them leads somewhere.

A link `[text](path)` or `[text](path#anchor)` in README.md or docs/*.md must name a file that exists,
and its anchor a heading of that file, slugged as GitHub slugs it. Every file in docs/ is reachable
from the README. Links inside code (fenced blocks, `spans`) are text, not links; absolute URLs are not
checked here (no network in unit tests)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?!`)(?:(?!\n[ \t]*\n).)+?(?<!`)\1(?!`)", re.S)  # within a paragraph
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _blank(match: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def outside_fences(text: str) -> str:
    """The text with fenced code blocks blanked (line count kept)."""
    return FENCE.sub(_blank, text)


def prose(text: str) -> str:
    """The text outside fenced code blocks and code spans (blanked, line count kept)."""
    return CODE_SPAN.sub(_blank, outside_fences(text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup, lowercased, punctuation other than `-`
    and `_` dropped, each space a `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor; a repeated slug gets -1, -2, … as on GitHub."""
    seen: Counter[str] = Counter()
    found = set()
    for _, text in HEADING.findall(outside_fences(page.read_text(encoding="utf-8"))):
        base = slug(text)
        found.add(f"{base}-{seen[base]}" if seen[base] else base)
        seen[base] += 1
    return found


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link of a page."""
    text = prose(page.read_text(encoding="utf-8"))
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1))
        for m in LINK.finditer(text)
        if not EXTERNAL.match(m.group(1))
    ]


def broken(page: Path) -> list[str]:
    """What is wrong with each relative link of `page`, as `file:line: target: why`."""
    problems = []
    for line, target in links(page):
        path, _, anchor = target.partition("#")
        goal = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name}:{line}: {target}"
        if not goal.exists():
            problems.append(f"{where}: no such file {goal}")
        elif anchor and goal.suffix == ".md" and anchor not in anchors(goal):
            problems.append(f"{where}: {goal.name} has no heading with the anchor #{anchor}")
    return problems


def test_docs_exist_beside_the_readme() -> None:
    assert DOCS.is_dir() and len(pages()) > 5, "docs/ holds the reference the README links to"


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_an_existing_file_and_heading(page: Path) -> None:
    assert links(page), f"{page.name} links to no other page: a dead end for a reader (or a blind parser)"
    assert broken(page) == []


def test_every_doc_is_linked_from_the_readme() -> None:
    linked = {(README.parent / target.partition("#")[0]).resolve() for _, target in links(README)}
    unlinked = [doc.name for doc in sorted(DOCS.glob("*.md")) if doc.resolve() not in linked]
    assert unlinked == [], f"docs/ files the README does not link to: {unlinked}"


def test_the_slug_follows_github(tmp_path: Path) -> None:
    assert slug("The local sandbox (`local/`)") == "the-local-sandbox-local"
    assert slug("Payments at 100, 1,000 and 10,000 per second") == "payments-at-100-1000-and-10000-per-second"
    assert (
        slug("The suite's time (`make test`, `make test-profile`)")
        == "the-suites-time-make-test-make-test-profile"
    )
    assert slug("Step — one_write") == "step--one_write"
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Title\n\n```\n# not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {"title", "title-1"}


def test_a_broken_link_a_missing_anchor_and_a_link_in_code_are_told_apart(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A section\n", encoding="utf-8")
    page.write_text(
        "# Page\n\n"
        "[fine](other.md#a-section) and [self](#page) and [web](https://example.com/x.md)\n"
        "[gone](missing.md) and [no anchor](other.md#no-such-section)\n"
        "`[in a span](missing.md)`\n\n```\n[in a block](missing.md)\n```\n",
        encoding="utf-8",
    )
    problems = broken(page)
    assert len(problems) == 2, problems
    assert "missing.md: no such file" in problems[0]
    assert "has no heading with the anchor #no-such-section" in problems[1]
