"""docs/your-first-flow.md cannot drift from the example: every code block in it is a named snippet
(``<!-- snippet: NAME -->`` on the line before its fence) whose lines appear, in order and at one
indentation, in one of the example's files; and its relative links lead to files and headings that exist
(the rule tests/unit/test_docs_links.py applies to every page). A block without a language is a diagram,
not code."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.test_docs_links import broken, links

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "your-first-flow.md"
EXAMPLE = ROOT / "examples" / "your-first-flow"
MARKER = re.compile(r"^<!-- snippet: ([a-z0-9-]+) -->$")
GENERATED = {"cdk.out", ".sandbox", "__pycache__", ".mypy_cache"}


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence
    language: str
    name: str | None
    lines: tuple[str, ...]


def blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, with the snippet name marked on the line before it."""
    found: list[Block] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        opening = re.match(r"^(```+)(.*)$", lines[index])
        if opening is None:
            index += 1
            continue
        fence, language = opening.group(1), opening.group(2).strip()
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == fence)
        marker = MARKER.match(lines[index - 1]) if index else None
        name = marker.group(1) if marker else None
        found.append(Block(index + 1, language, name, tuple(lines[index + 1 : end])))
        index = end + 1
    return found


def appears(snippet: tuple[str, ...], source: list[str]) -> bool:
    """Whether ``snippet``'s lines are consecutive lines of ``source``, each with the same indentation
    in front (blank lines blank)."""
    first = snippet[0]
    for start, line in enumerate(source):
        if not line.endswith(first) or line.strip() != first.strip():
            continue
        indent = line[: len(line) - len(first)]
        window = source[start : start + len(snippet)]
        if len(window) == len(snippet) and all(
            got == (indent + want if want else "") or (not want and not got.strip())
            for got, want in zip(window, snippet, strict=True)
        ):
            return True
    return False


def sources() -> dict[Path, list[str]]:
    return {
        path: path.read_text(encoding="utf-8").split("\n")
        for path in sorted(EXAMPLE.rglob("*"))
        if path.is_file()
        and path.suffix in (".py", ".json")
        and not GENERATED & set(path.relative_to(EXAMPLE).parts)
    }


def snippets() -> list[Block]:
    return [block for block in blocks(DOC.read_text(encoding="utf-8")) if block.name]


def test_every_code_block_of_the_doc_is_a_named_snippet() -> None:
    found = blocks(DOC.read_text(encoding="utf-8"))
    unnamed = [f"line {b.line} ({b.language})" for b in found if b.language and not b.name]
    assert unnamed == [], f"code blocks without a <!-- snippet: NAME --> marker: {unnamed}"
    names = [b.name for b in found if b.name]
    assert len(names) == len(set(names)) >= 8, names


@pytest.mark.parametrize("block", snippets(), ids=lambda b: b.name)
def test_the_snippet_is_in_the_example_verbatim(block: Block) -> None:
    where = [
        path.relative_to(ROOT).as_posix() for path, lines in sources().items() if appears(block.lines, lines)
    ]
    assert where, (
        f"snippet {block.name} (docs/your-first-flow.md:{block.line}) is in none of the example's files"
    )


def test_the_doc_links_lead_to_existing_files_and_headings() -> None:
    assert len(links(DOC)) >= 5
    assert broken(DOC) == []


def test_a_snippet_with_a_changed_line_or_another_indentation_is_not_found() -> None:
    source = ["class A:", "    def f(self):", "        x = 1", "", "        return x"]
    assert appears(("def f(self):", "    x = 1", "", "    return x"), source)
    assert not appears(("def f(self):", "    x = 2", "", "    return x"), source)
    assert not appears(("def f(self):", "x = 1"), source)
    assert not appears(("        return x", "y"), source)


def test_a_marker_names_only_the_block_right_after_it() -> None:
    text = (
        "<!-- snippet: one -->\n```python\na = 1\n```\n\n"
        "<!-- snippet: two -->\n\n```bash\nls\n```\n"
        "```\ndiagram\n```"
    )
    assert [(b.name, b.language, b.lines) for b in blocks(text)] == [
        ("one", "python", ("a = 1",)),
        (None, "bash", ("ls",)),
        (None, "", ("diagram",)),
    ]
