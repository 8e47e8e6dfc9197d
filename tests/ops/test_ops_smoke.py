"""``python -m ops smoke``'s parts that need no running sandbox: the SigV4 signing of its HTTP calls, the
sandbox's URL mapping, the one-paragraph errors (exit 2) of a stage it cannot reach, and the queue check
on the templates provisioned into moto (it passes, and names what is missing). The whole suite runs
against the e2e session's sandbox in tests/e2e/test_smoke_e2e.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from moto import mock_aws

from emulator.server import free_port
from ops.__main__ import main
from ops.app import App
from ops.smoke import STACKS, Deployed, SignedHttp, Suite, Target, sandbox_route
from tests.handlers.stack_world import assembly, provision

REGION = "us-east-1"


# -- signing -----------------------------------------------------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.received.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers.items()), "body": body}
        )
        payload = b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _record

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    _Recorder.received = []
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", _Recorder.received
    finally:
        server.shutdown()
        server.server_close()


def signature_of(received: dict[str, Any], base_url: str, credentials: Credentials) -> tuple[str, str]:
    """(the signature the request carries, the one its method, path, signed headers and body give)."""
    authorization = received["headers"]["Authorization"]
    fields = dict(part.strip().split("=", 1) for part in authorization.split(" ", 1)[1].split(","))
    signed = fields["SignedHeaders"].split(";")
    headers = {k: v for k, v in received["headers"].items() if k.lower() in signed}
    request = AWSRequest(
        method=received["method"], url=base_url + received["path"], data=received["body"], headers=headers
    )
    request.context["timestamp"] = received["headers"]["X-Amz-Date"]
    auth = SigV4Auth(credentials, "execute-api", REGION)
    expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
    return fields["Signature"], expected


def test_each_call_is_sigv4_signed_for_execute_api_over_the_exact_request_payload_included(
    recorder: tuple[str, list[dict[str, Any]]],
) -> None:
    base_url, received = recorder
    credentials = Credentials("AKIDSMOKETEST", "secret", "session-token")
    http = SignedHttp(credentials, REGION)

    answer = http.call(
        "POST", f"{base_url}/payments?x=1", body={"amount": "1.00"}, headers={"Idempotency-Key": "smoke-k"}
    )

    assert answer.status == 200 and answer.json() == {"ok": True}
    (request,) = received
    authorization = request["headers"]["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDSMOKETEST/")
    assert f"/{REGION}/execute-api/aws4_request" in authorization
    signed = authorization.split("SignedHeaders=", 1)[1].split(",", 1)[0].split(";")
    assert {"host", "x-amz-date", "x-amz-security-token", "idempotency-key", "content-type"} <= set(signed)
    assert request["body"] == b'{"amount":"1.00"}'
    carried, computed = signature_of(request, base_url, credentials)
    assert carried == computed
    # The payload is part of what is signed: the same request with another body does not verify.
    tampered = {**request, "body": b'{"amount":"9.00"}'}
    assert signature_of(tampered, base_url, credentials)[1] != carried


def test_an_execute_api_url_is_called_on_the_sandboxs_one_port_with_the_same_path() -> None:
    route = sandbox_route("http://127.0.0.1:8000/")

    assert route("https://ab12cd34ef.execute-api.us-east-1.amazonaws.com") == "http://127.0.0.1:8000"
    assert (
        route("https://ab12cd34ef.execute-api.us-east-1.amazonaws.com/orders/o-1?x=1")
        == "http://127.0.0.1:8000/orders/o-1?x=1"
    )
    assert route("https://hooks.example.com/relay") == "https://hooks.example.com/relay"


# -- a stage it cannot reach: one paragraph, exit 2 ----------------------------------------------------------


def test_no_credentials_is_one_paragraph_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    code = main(["smoke", "--stage", "dev", "--region", REGION])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: cannot reach stage 'dev': no AWS credentials.")
    assert "make smoke STAGE=local" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_endpoint_that_does_not_answer_is_one_paragraph_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    down = f"http://127.0.0.1:{free_port()}"

    code = main(["smoke", "--endpoint-url", down, "--api-url", f"http://127.0.0.1:{free_port()}"])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: cannot reach stage 'dev': the sandbox at {down} does not answer")
    assert err.count("\n") == 1 and "Traceback" not in err


# -- the queue check, on the templates provisioned into moto -------------------------------------------------


@pytest.fixture
def payments_suite() -> Iterator[Suite]:
    """The payments stack (and core) from the templates, seen as ops sees the sandbox; the other stacks
    are missing (their failure is the stacks check's, not the queue check's)."""
    with mock_aws():
        world = provision("payments")
        app = App("dev", REGION, templates=assembly())
        described = {d.name.removeprefix("relay-dev-"): d.to_json() for d in world.topology.stacks}
        deployed = Deployed(
            stage="dev",
            region=REGION,
            stacks=described,
            missing=tuple(s for s in STACKS if s not in described),
        )
        credentials = Credentials("testing", "testing")
        yield Suite(Target(app=app, http=SignedHttp(credentials, REGION)), deployed, tag="smoke-test")


def test_every_queue_of_the_templates_has_its_dlq_and_alarms(payments_suite: Suite) -> None:
    (check,) = payments_suite.queues()

    assert check.ok, check.detail
    assert check.detail.startswith("5 work queues (5 named by the stacks' outputs)")


def test_a_work_queue_whose_dlq_is_gone_fails_the_queue_check_by_name(payments_suite: Suite) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    sqs.delete_queue(
        QueueUrl=sqs.get_queue_url(QueueName="relay-dev-payments-payment-requests-dlq")["QueueUrl"]
    )

    (check,) = payments_suite.queues()

    assert not check.ok
    assert (
        "payments-payment-requests: its DLQ relay-dev-payments-payment-requests-dlq does not exist"
        in check.detail
    )


def test_a_queue_the_outputs_name_but_that_is_gone_fails_the_queue_check(payments_suite: Suite) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName="relay-dev-payments-notices")["QueueUrl"])

    (check,) = payments_suite.queues()

    assert not check.ok
    assert "relay-dev-payments-notices (named by relay-dev-payments's outputs) does not exist" in check.detail


def test_a_missing_output_says_which_stack_lacks_it_and_to_redeploy(payments_suite: Suite) -> None:
    stacks = dict(payments_suite.deployed.stacks)
    stacks["payments"] = {**stacks["payments"], "Outputs": []}
    deployed = Deployed("dev", REGION, stacks, payments_suite.deployed.missing)

    assert "relay-dev-payments.PaymentsApiUrl" in deployed.missing_outputs()
    with pytest.raises(Exception, match=r"relay-dev-payments has no output PaymentsApiUrl .* make deploy"):
        deployed.output("payments", "PaymentsApiUrl")
    assert json.dumps(payments_suite.deployed.outputs("payments")).count("execute-api") == 1
