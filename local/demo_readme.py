"""The README's sample of ``make demo``'s output, taken from a real run's transcript.

Every ``make demo`` writes what it printed to ``.sandbox/demo-output.txt`` (``TRANSCRIPT``).
``python -m local readme-sample`` puts that run's verdict into README.md between the two
``demo-output`` markers, shortened the same way each time (``sample``): the progress lines and the
start-up banner left out, and the lists of one line per order, per SKU, per snapshot cut to
``KEEP_LISTED`` lines and an ellipsis. ``tests/demo/test_demo_output.py`` runs the demo and checks
that the README's sample has the lines that run printed (labels and checks, figures aside), so the
sample cannot describe an older demo.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPT = ROOT / ".sandbox" / "demo-output.txt"
README = ROOT / "README.md"
BEGIN = "<!-- demo-output: begin (python -m local readme-sample) -->"
END = "<!-- demo-output: end -->"
KEEP_LISTED = 4
# The first line of the verdict: what comes before it is start-up and progress.
FIRST = "  operations accepted (202)"
# Lists with one line per thing (an order, a SKU, an agent): kept short in the sample.
LISTS = ("  stock movements per order", "  stock per SKU (seeded → available + reserved)")


def sample(transcript: str) -> str:
    lines = transcript.replace("\r", "\n").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(FIRST)), None)
    if start is None:
        raise ValueError(f"not a demo transcript: no line starting {FIRST.strip()!r}")
    kept: list[str] = []
    listing: int | None = None
    for line in lines[start:]:
        if line.startswith("  [") and "s]" in line[:12]:  # a progress line
            continue
        if listing is not None:
            if line.startswith("    "):
                listing += 1
                if listing == KEEP_LISTED + 1:
                    kept.append("    …")
                if listing > KEEP_LISTED:
                    continue
            else:
                listing = None
        if line.rstrip() in LISTS:
            listing = 0
        kept.append(line.rstrip())
        if line.startswith(("demo PASSED", "demo FAILED")):
            break
    return "\n".join(kept).strip("\n") + "\n"


def labels(text: str) -> list[str]:
    """The lines of a sample with their figures taken out: what must match between two runs."""
    found = []
    for line in sample(text).splitlines():
        text = line.strip()
        # "  label   figure" rows keep their label; a check ("PASS  name") and a heading keep it all.
        plain = text.startswith(("PASS ", "FAIL ")) or not line.startswith("  ")
        label = text if plain else re.split(r"\s{2,}", text, maxsplit=1)[0]
        label = re.sub(r"\b[0-9a-f]*\d[0-9a-f]*\b", lambda m: "<id>" if len(m[0]) >= 6 else m[0], label)
        label = re.sub(r"\d[\d,.]*", "<n>", label)
        if label and label != "…" and not line.startswith("    "):
            found.append(label)
    return found


def readme_sample(readme: str) -> str:
    if BEGIN not in readme or END not in readme:
        raise ValueError(f"README.md has no {BEGIN!r} … {END!r} block")
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    return block.strip().removeprefix("```").removesuffix("```").strip("\n") + "\n"


def write_readme(transcript: Path = TRANSCRIPT, readme: Path = README) -> None:
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"README.md has no {BEGIN!r} … {END!r} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    block = f"{BEGIN}\n```\n{sample(transcript.read_text(encoding='utf-8'))}```\n{END}"
    readme.write_text(head + block + tail, encoding="utf-8")
