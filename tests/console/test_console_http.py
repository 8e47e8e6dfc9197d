"""The console's HTTP endpoints refuse what they must with a 4xx and a clear error, change nothing when they
do, and serve every asset themselves on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest

from emulator.server import client
from local.sandbox import Sandbox
from ops.console.server import Console
from tests.e2e.test_payments_e2e import queue_url

pytestmark = pytest.mark.e2e

DLQ = "payments-payment-requests-dlq"


def request(
    console: Console,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", console.port, timeout=60)
    sent = {"Content-Type": "application/json", **(headers or {})}
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    connection.request(method, path, body=data, headers=sent)
    response = connection.getresponse()
    payload = response.read()
    kind = response.getheader("Content-Type") or ""
    document = json.loads(payload) if kind.startswith("application/json") else {"text": payload.decode()}
    connection.close()
    return response.status, document, {k.lower(): v for k, v in response.getheaders()}


def dlq_state(sb: Sandbox) -> tuple[str, str]:
    attrs = client("sqs", sb.endpoint).get_queue_attributes(
        QueueUrl=queue_url(sb, DLQ), AttributeNames=["All"]
    )["Attributes"]
    return attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]


def test_the_console_listens_on_loopback_only(console: Console) -> None:
    assert console.server.server_address[0] == "127.0.0.1"
    assert console.url.startswith("http://127.0.0.1:")


def test_the_page_and_its_assets_are_served_by_the_console_with_a_same_origin_policy(
    console: Console,
) -> None:
    status, page, headers = request(console, "GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in headers["content-security-policy"]
    for asset in ("/static/app.js", "/static/app.css"):
        assert f'"{asset}"' in page["text"]
        status, served, _ = request(console, "GET", asset)
        assert status == 200 and served["text"]
    assert "http://" not in page["text"] and "https://" not in page["text"]  # no CDN


@pytest.mark.parametrize(
    ("method", "path", "status", "words"),
    [
        ("GET", "/api/nothing-here", 404, "no such page"),
        ("GET", "/static/../pyproject.toml", 404, "no such"),
        ("GET", "/api/operations/not%20an%20id", 400, "operation id"),
        ("GET", "/api/operations/00000000-0000-0000-0000-000000000000", 404, "no operation"),
        ("GET", "/api/orders/ord-nobody", 404, "no order"),
        ("GET", "/api/operations?limit=lots", 400, "limit"),
        ("GET", "/api/operations?q=%3Cscript%3E", 400, "q:"),
        ("GET", "/api/queues/no-such-dlq/parked", 404, "no DLQ matches"),
        ("GET", "/api/redrive/jobs/nope", 404, "no redrive job"),
        ("DELETE", "/api/queues", 405, "not allowed"),
        ("GET", "/api/redrive/dry-run", 405, "allowed: POST"),
    ],
)
def test_a_bad_request_is_a_4xx_with_the_reason(
    console: Console, method: str, path: str, status: int, words: str
) -> None:
    got, document, _ = request(console, method, path)
    assert got == status, document
    assert words in document["error"]


def test_a_redrive_needs_a_reason_a_known_dlq_and_the_dry_runs_confirm_and_a_refusal_changes_nothing(
    sandbox: Sandbox, console: Console, audit_file: Path
) -> None:
    before = dlq_state(sandbox)
    audited = audit_file.read_text() if audit_file.exists() else ""
    refused = [
        (request(console, "POST", "/api/redrive/dry-run", {"dlq": DLQ}), 400, "reason"),
        (request(console, "POST", "/api/redrive/dry-run", {"dlq": DLQ, "reason": "  "}), 400, "reason"),
        (request(console, "POST", "/api/redrive/dry-run", {"reason": "fixed"}), 400, "dlq"),
        (request(console, "POST", "/api/redrive/dry-run", {"dlq": "nope", "reason": "x"}), 404, "no DLQ"),
        (request(console, "POST", "/api/redrive", {"dlq": DLQ, "reason": "fixed"}), 409, "dry run"),
        (
            request(console, "POST", "/api/redrive", {"dlq": DLQ, "reason": "fixed", "confirm": "forged"}),
            409,
            "dry run",
        ),
        (
            request(console, "POST", "/api/redrive", {"dlq": DLQ, "reason": "x", "first": 0, "confirm": "t"}),
            400,
            "first",
        ),
        (request(console, "POST", "/api/redrive", raw=b"{not json"), 400, "not JSON"),
        (request(console, "POST", "/api/redrive", raw=b"[1, 2]"), 400, "JSON object"),
        (
            request(
                console, "POST", "/api/redrive/dry-run", {"dlq": DLQ}, headers={"Content-Type": "text/plain"}
            ),
            415,
            "JSON",
        ),
        (
            request(
                console,
                "POST",
                "/api/redrive/dry-run",
                {"dlq": DLQ, "reason": "x"},
                headers={"Origin": "https://evil.example"},
            ),
            403,
            "refused",
        ),
        (request(console, "GET", "/api/queues", headers={"Host": "evil.example:80"}), 421, "Host"),
        (request(console, "POST", "/api/redrive/jobs/nope/abort", {}), 404, "no redrive job"),
        (request(console, "POST", "/api/replay/dry-run", {"operationId": "op-x"}), 400, "reason"),
        (request(console, "POST", "/api/replay/dry-run", {"reason": "fixed"}), 400, "operationId"),
        (
            request(
                console, "POST", "/api/replay/dry-run", {"operationId": "op-x", "reason": "x", "force": "yes"}
            ),
            400,
            "force",
        ),
        (
            request(console, "POST", "/api/replay/dry-run", {"operationId": "op-nobody", "reason": "fixed"}),
            404,
            "no operation op-nobody",
        ),
        (request(console, "POST", "/api/replay", {"operationId": "op-x", "reason": "fixed"}), 409, "dry run"),
    ]
    for (status, document, _), expected, words in refused:
        assert status == expected, document
        assert words in document["error"], document
    assert dlq_state(sandbox) == before
    assert (audit_file.read_text() if audit_file.exists() else "") == audited


def test_a_confirm_is_for_the_dlq_and_reason_of_its_dry_run_only(
    sandbox: Sandbox, console: Console, audit_file: Path
) -> None:
    status, dry, _ = request(console, "POST", "/api/redrive/dry-run", {"dlq": DLQ, "reason": "checked"})
    assert status == 200 and dry["confirm"], dry
    assert dry["counts"]["wouldMove"] == int(dlq_state(sandbox)[0])
    other = {"dlq": DLQ, "reason": "another reason", "confirm": dry["confirm"]}
    status, document, _ = request(console, "POST", "/api/redrive", other)
    assert status == 409 and "another DLQ or reason" in document["error"]
    last = json.loads(audit_file.read_text().splitlines()[-1])
    assert (last["dryRun"], last["outcome"], last["reason"]) == (True, "dry-run", "checked")


def test_a_read_only_console_refuses_every_redrive_and_receives_nothing(
    sandbox: Sandbox, read_only_console: Console, audit_file: Path
) -> None:
    before = dlq_state(sandbox)
    audited = audit_file.read_text() if audit_file.exists() else ""
    status, info, _ = request(read_only_console, "GET", "/api/info")
    assert status == 200 and info["redriveAllowed"] is False
    for path in ("/api/redrive/dry-run", "/api/redrive", "/api/replay/dry-run", "/api/replay"):
        body = {"dlq": DLQ, "operationId": "op-x", "reason": "fixed"}
        status, document, _ = request(read_only_console, "POST", path, body)
        assert status == 403 and "--allow-redrive" in document["error"]
    status, queues, _ = request(read_only_console, "GET", "/api/queues")
    assert status == 200 and any(q["short"] == DLQ for q in queues["dlqs"])
    assert dlq_state(sandbox) == before
    assert (audit_file.read_text() if audit_file.exists() else "") == audited
