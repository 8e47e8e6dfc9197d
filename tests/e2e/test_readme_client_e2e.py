"""The documented client examples (docs/sandbox.md, "Calling the API") run as written against the
sandbox, signed with the client's keys as they would be on AWS: the Python block (botocore's SigV4Auth)
and the curl commands. They are read wherever they live, the README or docs/*.md."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from emulator import callers
from local.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documentation() -> str:
    """Every page a user reads: the README and docs/*.md."""
    return "\n".join(page.read_text(encoding="utf-8") for page in PAGES)


def curl_version() -> tuple[int, ...]:
    curl = shutil.which("curl") or "curl"
    out = subprocess.run([curl, "--version"], capture_output=True, text=True, check=True).stdout
    return tuple(int(part) for part in out.split()[1].split(".")[:2])


def _client_env(sandbox: Sandbox) -> dict[str, str]:
    client = sandbox.callers[callers.CLIENT]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {
        **env,
        "AWS_ACCESS_KEY_ID": client.access_key_id,
        "AWS_SECRET_ACCESS_KEY": client.secret_access_key,
        "AWS_REGION": "us-east-1",
        "API": sandbox.api_url,
    }


def _python_example() -> str:
    blocks = re.findall(r"```python\n(# relay-client-example\n.*?)```", documentation(), re.DOTALL)
    assert len(blocks) == 1, f"the python block marked relay-client-example is documented {len(blocks)} times"
    return blocks[0]


def test_the_readme_python_client_signs_with_botocore_and_its_payment_is_accepted(sandbox: Sandbox, tmp_path):
    script = tmp_path / "client.py"
    script.write_text(_python_example())
    env = {**_client_env(sandbox), "IDEMPOTENCY_KEY": f"readme-{uuid.uuid4().hex}"}
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first.startswith("202 ")
    assert second in {
        "PENDING",
        "PAYMENT_PROCESSING",
        "PAYMENT_COMPLETED",
        "POST_PROCESSING",
        "INVOICE_PENDING",
    } | {"COMPLETED"}


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_readme_curl_commands_sign_and_the_unsigned_one_is_refused(sandbox: Sandbox):
    # The documented definition of SIGV4, then its GET of an operation, signed and unsigned.
    script = (
        'SIGV4=(--aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:execute-api" '
        '--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY")\n'
        'curl -s -o /dev/null -w "%{http_code}\\n" "${SIGV4[@]}" "$API/operations/no-such-operation"\n'
        'curl -s -w "\\n%{http_code}\\n" "$API/operations/no-such-operation"\n'
        # The documented scores query, its `:` percent-encoded (curl 7.x signs a query as written; AWS, and
        # the sandbox, encode it again before they check), then the same query with `:` bare: refused.
        'curl -s -o /dev/null -w "%{http_code}\\n" "${SIGV4[@]}" '
        '"$API/agents/agent-readme/scores?from=2026-11-29T10%3A00%3A00Z&to=2026-11-29T10%3A00%3A00Z"\n'
        'curl -s -o /dev/null -w "%{http_code}\\n" "${SIGV4[@]}" '
        '"$API/agents/agent-readme/scores?from=2026-11-29T10:00:00Z&to=2026-11-29T10:00:00Z"\n'
    )
    documented = documentation()
    assert 'SIGV4=(--aws-sigv4 "aws:amz:${AWS_REGION:-us-east-1}:execute-api" --user' in documented
    result = subprocess.run(
        [shutil.which("bash") or "/bin/bash", "-c", script],
        capture_output=True,
        text=True,
        env=_client_env(sandbox),
        timeout=60,
        check=False,
    )
    assert 'curl "${SIGV4[@]}" "$API/agents/<agentId>/scores?from=2026-11-29T10%3A00%3A00Z&to=' in documented
    signed, unsigned_body, unsigned_status, scores, bare = result.stdout.splitlines()
    assert scores == "200"  # an agent with no snapshots yet: an empty list
    if curl_version() < (8,):  # curl 7 signs the bare `:` as written, which AWS refuses (later curls vary)
        assert bare == "403"
    assert signed == "404"  # through IAM to the function: an unknown operation
    assert (unsigned_status, unsigned_body) == ("403", '{"message":"Missing Authentication Token"}')
