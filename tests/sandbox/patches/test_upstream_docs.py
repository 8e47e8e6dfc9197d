"""docs/upstream/: a write-up for every patch whose module says it is worth sending upstream, and for no
other; every link leads somewhere; and every reproduction, run as it is, fails on moto as installed and
passes with the emulator's patch (so the issue text shows the behaviour the patch changes)."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

from emulator.moto_patches import PATCH_MODULES
from tests.sandbox.patches.support import installed
from tests.unit.test_docs_links import broken, links

UPSTREAM = Path(__file__).resolve().parents[3] / "docs" / "upstream"
SENT = [m for m in PATCH_MODULES if re.search(r"\n\nUpstream: yes\.", m.__doc__ or "")]


def _name(module: ModuleType) -> str:
    return module.__name__.rsplit(".", 1)[1]


def _reproduction(module: ModuleType) -> str:
    text = (UPSTREAM / f"{_name(module)}.md").read_text(encoding="utf-8")
    section = text.partition("\n## Reproduction\n")[2].partition("\n## ")[0]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, re.M | re.S)
    assert len(blocks) == 1, "one script in the Reproduction section"
    return str(blocks[0])


def test_the_patches_sent_upstream_are_the_ones_written_up_and_listed() -> None:
    written = {p.stem for p in UPSTREAM.glob("*.md") if p.name != "README.md"}
    assert written == {_name(m) for m in SENT}
    listed = {target for _, target in links(UPSTREAM / "README.md")}
    assert written <= {Path(target).stem for target in listed if target.endswith(".md")}


@pytest.mark.parametrize("page", sorted(UPSTREAM.glob("*.md")), ids=lambda p: p.name)
def test_every_relative_link_leads_to_an_existing_file_and_heading(page: Path) -> None:
    assert links(page)
    assert broken(page) == []


@pytest.mark.parametrize("module", SENT, ids=_name)
def test_the_reproduction_fails_on_moto_and_passes_with_the_patch(module: ModuleType) -> None:
    code = compile(_reproduction(module), f"docs/upstream/{_name(module)}.md", "exec")
    # The script is the repository's own documentation, run as a maintainer would run it.
    with pytest.raises(AssertionError):
        exec(code, {"__name__": "__main__"})  # noqa: S102
    with installed(module.install):
        exec(code, {"__name__": "__main__"})  # noqa: S102
