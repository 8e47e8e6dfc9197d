"""Each checked-in OpenAPI document against the sandbox, with schemathesis: every generated request
gets a documented answer and never a 5xx, a request valid under the document is never rejected, an
invalid one never accepted; plus what schemathesis does not send: undocumented methods (API Gateway's
404) and bodies that are not JSON, over real HTTP.

Every request is SigV4-signed as the sandbox's client (the routes are AWS_IAM, but POST /score-snapshots,
whose API-key authorizer ignores the signature): schemathesis hands the `requests` auth to `requests`,
which signs the prepared request, over the exact bytes sent.

The run is seeded (RELAY_SCHEMATHESIS_SEED picks another seed to explore; the stateful phase still follows
the ids the server hands out) and prints, per API, the number of generated cases and the count of each
status code.
"""

from __future__ import annotations

import collections
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis import engine
from schemathesis.engine import events

from emulator.server import client
from local.sandbox import Sandbox
from tests.e2e import api

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("payments", "orders", "scores", "loyalty")
MIN_CASES = 300
# Per operation and phase, enough for MIN_CASES per API: the scores API has two operations and no
# links between them, the loyalty API one (payments and orders add stateful sequences, so ~700 cases
# each at 60).
MAX_EXAMPLES = {"payments": 60, "orders": 60, "scores": 150, "loyalty": 300}

# positive_data_acceptance: a schema-valid request may still meet state it conflicts with. Schemathesis
# counts 404 (no such operation/order) and 409 (an order that can no longer be cancelled; an hour
# that has not come) as such; 422 here is only ever an Idempotency-Key reused with another body,
# which generated requests do (their keys are short and repeat): state, not the request's shape.
ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]


def api_key(sb: Sandbox) -> str:
    arn = next(arn for logical, arn in sb.topology.secrets.items() if "SnapshotApiKey" in logical)
    return str(client("secretsmanager", sb.endpoint).get_secret_value(SecretId=arn)["SecretString"])


def document(service: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / "functions" / service / "openapi.json").read_text())
    return loaded


@dataclass
class Run:
    cases: int = 0
    statuses: collections.Counter[int | str] = field(default_factory=collections.Counter)
    failures: dict[tuple[str, str, str], str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def line(self, service: str) -> str:
        counts = ", ".join(f"{status}: {n}" for status, n in sorted(self.statuses.items(), key=str))
        return f"schemathesis {service}: {self.cases} cases; status codes {{{counts}}}"


def run_schemathesis(sb: Sandbox, service: str) -> Run:
    seed = int(os.environ.get("RELAY_SCHEMATHESIS_SEED", "20261129"))
    config = schemathesis.Config.from_dict(
        {
            "base-url": sb.api_url,
            # The scores API's POST /score-snapshots sits behind the API-key authorizer.
            "headers": {"x-api-key": api_key(sb)} if service == "scores" else {},
            "seed": seed,
            "continue-on-failure": True,
            "request-timeout": 30,
            "generation": {"mode": "all", "max-examples": MAX_EXAMPLES[service], "database": "none"},
            "checks": {
                # Schemathesis wants 405 for a method the document does not list; API Gateway answers
                # 404 {"message":"Not Found"} for a route that does not exist, whatever the method
                # (checked below, test_an_undocumented_method_is_404_not_found).
                "unsupported_method": {"enabled": False},
                "allow_header_conformance": {"enabled": False},
                "positive_data_acceptance": {"expected-statuses": ACCEPTED},
            },
        }
    )
    schema = schemathesis.openapi.from_dict(document(service), config=config)
    # Schemathesis passes it as `auth=` to `requests`, which calls it on the prepared request (body encoded).
    schema.auth.set_from_requests(sb.client_auth())
    run = Run()
    for event in engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished | events.FuzzScenarioFinished):
            recorder = event.recorder
            for interaction in recorder.interactions.values():
                run.cases += 1
                run.statuses[interaction.response.status_code if interaction.response else "no answer"] += 1
            for checks in recorder.checks.values():
                for check in checks:
                    if check.failure_info is None:
                        continue
                    failure = check.failure_info.failure
                    key = (str(failure.operation), check.name, str(failure.title))
                    sample = check.failure_info.code_sample
                    run.failures.setdefault(key, f"{failure.message}\n    {sample[:1500]}")
        elif isinstance(event, events.NonFatalError):
            run.errors.append(f"{event.label}: {event.value!r}")
        elif isinstance(event, events.FatalError):
            run.errors.append(f"fatal: {event.exception!r}")
    return run


@pytest.mark.parametrize("service", SERVICES)
def test_generated_requests_get_documented_answers_never_5xx_and_valid_ones_are_accepted(
    sandbox: Sandbox, service: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_schemathesis(sandbox, service)
    with capsys.disabled():
        print(f"\n{run.line(service)}")

    assert not run.errors, run.errors
    assert run.cases >= MIN_CASES, run.line(service)
    server_errors = {s: n for s, n in run.statuses.items() if not isinstance(s, int) or s >= 500}
    report = "\n".join(
        f"- {op} [{check}] {title}: {detail}" for (op, check, title), detail in run.failures.items()
    )
    assert not run.failures and not server_errors, f"{run.line(service)}\n{report}"


# What schemathesis does not send ----------------------------------------------------------------

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "TRACE", "FOO")


def undocumented(service: str) -> list[tuple[str, str]]:
    calls = []
    for path, operations in document(service)["paths"].items():
        concrete = path.replace("{operationId}", "op-1").replace("{orderId}", "order-1")
        concrete = concrete.replace("{agentId}", "agent-1")
        calls.extend((method, concrete) for method in METHODS if method.lower() not in operations)
    return calls


@pytest.mark.parametrize("service", SERVICES)
def test_an_undocumented_method_is_404_not_found_like_api_gateway(sandbox: Sandbox, service: str) -> None:
    answers = {(method, path): api.call(sandbox, method, path) for method, path in undocumented(service)}

    # At least the 8 other methods of a one-route API (loyalty: GET /customers/{id}/points).
    assert len(answers) >= 8
    wrong = {
        call: (r.status_code, r.content)
        for call, r in answers.items()
        if (r.status_code, r.content) != (404, b"" if call[0] == "HEAD" else b'{"message":"Not Found"}')
    }
    assert not wrong, wrong


def hostile(sb: Sandbox) -> list[tuple[str, bytes, dict[str, str]]]:
    json_type = {"content-type": "application/json"}
    return [
        ("not UTF-8", b'{"a": "\xff\xfe"}', json_type),
        ("not JSON", b"{oops", json_type),
        ("100,000 nested [", b"[" * 100_000, json_type),
        ("NaN", b'{"a": NaN}', json_type),
        ("binary, delivered base64-encoded", b"\x00\x01\xff", {"content-type": "application/octet-stream"}),
        ("no content type, delivered base64-encoded", b'{"a": 1}', {}),
        ("a form", b"a=1", {"content-type": "application/x-www-form-urlencoded"}),
        ("multipart without a boundary", b"--x--", {"content-type": "multipart/form-data"}),
        ("over 10 MB", b" " * (10 * 1024 * 1024 + 1), json_type),
    ]


@pytest.mark.parametrize("path", ["/payments", "/orders", "/orders/order-1/cancel", "/score-snapshots"])
def test_a_body_that_is_not_json_is_4xx_on_every_post_route(sandbox: Sandbox, path: str) -> None:
    headers = {"x-api-key": api_key(sandbox)} if path == "/score-snapshots" else {}
    answers = {
        name: api.post(sandbox, path, data=body, headers={**headers, **extra}, timeout=60)
        for name, body, extra in hostile(sandbox)
    }

    statuses = {name: r.status_code for name, r in answers.items()}
    assert all(400 <= s < 500 for s in statuses.values()), statuses
    if path != "/orders/order-1/cancel":  # which needs no body: its empty JSON object is read as one
        assert statuses["no content type, delivered base64-encoded"] == 400  # {"a": 1} is not a request
