"""The documented code a receiver copies is run here: the notice verification snippet (one call of the
Standard Webhooks library, in docs/payments.md "Completion notices") accepts what the kernel signs
(relay.signing) and refuses a tampered body, a wrong key and a replay. A snippet is found by its marker
wherever it lives, the README or docs/*.md, and must be there exactly once."""

from __future__ import annotations

import base64
import re
import time
from pathlib import Path
from typing import Any

import pytest

from relay.signing import sign

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def snippet(name: str) -> dict[str, Any]:
    marked = rf"<!-- snippet: {name} -->\n```python\n(.*?)```"
    found = [
        (page, block)
        for page in PAGES
        for block in re.findall(marked, page.read_text(encoding="utf-8"), re.S)
    ]
    where = [page.relative_to(ROOT).as_posix() for page, _ in found]
    assert len(found) == 1, (
        f"python snippet marked {name}: expected once in README.md or docs/, found in {where}"
    )
    ((_, block),) = found
    namespace: dict[str, Any] = {}
    exec(compile(block, f"{where[0]}:{name}", "exec"), namespace)  # noqa: S102 - our own docs
    return namespace


@pytest.fixture(scope="module")
def verify() -> Any:
    return snippet("verify-notice")["verify_relay_notice"]


BODY = b'{"operationId":"op-1","status":"COMPLETED"}'
KEY = "whsec_" + base64.b64encode(b"k3y-of-at-least-twenty-four-bytes").decode()
OTHER = "whsec_" + base64.b64encode(b"another-key-of-twenty-four-bytes").decode()
MSG = "op-1:notice"


def test_the_readme_verifier_accepts_what_relay_signs(verify: Any) -> None:
    assert verify(KEY, BODY, sign(KEY, MSG, BODY)) == {"operationId": "op-1", "status": "COMPLETED"}


def test_the_readme_verifier_takes_the_stored_value_with_the_whsec_prefix(verify: Any) -> None:
    stored = "A1b2C3d4" * 8  # what CloudFormation generates: 64 letters and digits
    assert verify("whsec_" + stored, BODY, sign(stored, MSG, BODY)) is not None


def test_the_readme_verifier_refuses_a_tampered_body_a_wrong_key_and_a_replay(verify: Any) -> None:
    headers = sign(KEY, MSG, BODY)
    assert verify(KEY, BODY.replace(b"COMPLETED", b"FAILED"), headers) is None
    assert verify(OTHER, BODY, headers) is None
    assert verify(KEY, BODY, sign(KEY, MSG, BODY, now=time.time() - 301)) is None
    assert verify(KEY, BODY, {**headers, "webhook-signature": "v1=abc"}) is None
    assert verify(KEY, BODY, {}) is None


def test_the_readme_verifier_accepts_a_notice_signed_by_the_old_and_the_new_key(verify: Any) -> None:
    both = sign(f"{OTHER} {KEY}", MSG, BODY)
    assert verify(OTHER, BODY, both) is not None
    assert verify(KEY, BODY, both) is not None
