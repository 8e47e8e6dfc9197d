"""The README's code a receiver copies is run here: the notice verification snippet accepts what the
kernel signs (relay.signing) and refuses a tampered body, a wrong key and a replay."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from relay.signing import sign

README = Path(__file__).resolve().parents[2] / "README.md"


def snippet(name: str) -> dict[str, Any]:
    text = README.read_text(encoding="utf-8")
    found = re.search(rf"<!-- snippet: {name} -->\n```python\n(.*?)```", text, re.S)
    assert found, f"README has no python snippet marked {name}"
    namespace: dict[str, Any] = {}
    exec(compile(found.group(1), f"README:{name}", "exec"), namespace)  # noqa: S102 - our own README
    return namespace


@pytest.fixture(scope="module")
def verify() -> Any:
    return snippet("verify-notice")["verify_relay_notice"]


BODY = b'{"operationId":"op-1","status":"COMPLETED"}'


def test_the_readme_verifier_accepts_what_relay_signs(verify: Any) -> None:
    assert verify("k3y", BODY, sign("k3y", BODY)) is True


def test_the_readme_verifier_refuses_a_tampered_body_a_wrong_key_and_a_replay(verify: Any) -> None:
    header = sign("k3y", BODY)
    assert verify("k3y", BODY.replace(b"COMPLETED", b"FAILED"), header) is False
    assert verify("other", BODY, header) is False
    assert verify("k3y", BODY, sign("k3y", BODY, now=time.time() - 301)) is False
    assert verify("k3y", BODY, "v1=abc") is False


def test_the_readme_verifier_accepts_a_header_carrying_the_old_and_the_new_key(verify: Any) -> None:
    now = time.time()
    old, new = sign("old", BODY, now=now).split(","), sign("new", BODY, now=now).split(",")
    assert old[0] == new[0]  # the same t=
    both = ",".join([new[0], old[1], new[1]])
    assert verify("new", BODY, both) is True
    assert verify("old", BODY, both) is True
