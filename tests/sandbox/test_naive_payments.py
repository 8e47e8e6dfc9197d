"""The naive payment pipeline (``bench/naive_payments.py``), the variant ``bench/cost.py`` compares the app
with: real boto3 calls and real Powertools idempotency and batch processing under moto, every request
counted and billed as the app's meter bills it. Its figures are only worth comparing if it really
makes the requests a careful naive implementation makes -- and no more -- so these say how many."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.naive_payments import (
    IDEMPOTENCY_TABLE,
    NaiveMeasured,
    NaivePipeline,
    drive,
    measure_naive,
    naive_environment,
)

N = 3
STEPS = ("payment-worker", "post-processor", "invoice-worker")
PRICES = json.loads((Path(__file__).resolve().parents[2] / "bench" / "prices.json").read_text())["prices"]


@pytest.fixture(scope="module")
def measured() -> NaiveMeasured:
    return measure_naive(N)


def _by(m: NaiveMeasured, caller: str, service: str, action: str) -> float:
    """Requests per payment of one caller (empty receives apart)."""
    return sum(
        float(r["requests"] - r["empty"]) / m.operations
        for r in m.requests
        if r["caller"] == caller and r["service"] == service and r["action"] == action
    )


def test_every_payment_is_completed_charged_once_and_invoiced_once(measured: NaiveMeasured) -> None:
    assert measured.statuses == {"COMPLETED": N}
    assert measured.legacy_charges == N
    assert measured.invoices_issued == N


def test_a_payment_makes_the_requests_of_one_publish_per_event_and_no_batching(
    measured: NaiveMeasured,
) -> None:
    counts = measured.counts()
    # PaymentRequested, PaymentCompleted, InvoiceRequested, OperationCompleted: one Publish each.
    assert counts["sns:Publish"] == 4
    assert counts["sns:Deliver to SQS"] == 3  # OperationCompleted has no queue here
    # Batch size 1: one receive and one delete per step message, both the mapping's (glue).
    for step in STEPS:
        assert _by(measured, f"glue:esm ({step})", "sqs", "ReceiveMessage") == 1
        assert _by(measured, f"glue:esm ({step})", "sqs", "DeleteMessage") == 1
        assert measured.invocations[step] == N
    assert counts["sqs:ReceiveMessage"] == 3 and counts["sqs:DeleteMessage"] == 3
    assert counts["sqs:ReceiveMessage (empty, idle polling)"] > 0
    assert measured.invocations["api"] == 2 * N  # POST and GET
    assert measured.http_requests == 2 * N
    # The request, the legacy result and the invoice input live in the operation item below the app's
    # claim-check threshold, as the app keeps them: nothing goes through S3.
    assert "s3:PutObject" not in counts and "s3:GetObject" not in counts
    assert counts["dynamodb:GetItem"] == 4  # each step's read of the operation, and the GET


def test_powertools_writes_twice_per_idempotent_call_beside_the_business_write(
    measured: NaiveMeasured,
) -> None:
    # Powertools: a conditional PutItem IN_PROGRESS, then an UpdateItem COMPLETED, on every new record.
    assert _by(measured, "api", "dynamodb", "PutItem") == 2  # its record + the operation's PutItem
    assert _by(measured, "api", "dynamodb", "UpdateItem") == 1  # its record completed
    for step in STEPS:
        assert _by(measured, step, "dynamodb", "PutItem") == 1  # its record
        assert _by(measured, step, "dynamodb", "UpdateItem") == 2  # its record + the operation's step
    counts = measured.counts()
    assert counts["dynamodb:PutItem"] + counts["dynamodb:UpdateItem"] == 2 * 4 + 4


def test_billed_units_are_priced_keys_and_never_below_the_requests(measured: NaiveMeasured) -> None:
    units = measured.units()
    assert set(units) <= set(PRICES)
    counts = measured.counts()
    writes = counts["dynamodb:PutItem"] + counts["dynamodb:UpdateItem"]
    assert units["dynamodb.wru"] >= writes
    assert units["dynamodb.rru"] >= counts["dynamodb:GetItem"]
    assert units["sns.publish"] >= counts["sns:Publish"]
    assert units["sqs.request"] >= counts["sqs:ReceiveMessage"] + counts["sqs:DeleteMessage"]
    assert "s3.put" not in units and "s3.get" not in units
    assert units["lambda.request"] == 5  # 2 API + 3 steps
    assert units["apigateway.http_request"] == 2


def test_without_operation_completed_the_invoice_step_publishes_nothing() -> None:
    m = measure_naive(1, publish_completed=False)
    assert m.statuses == {"COMPLETED": 1}
    assert m.counts()["sns:Publish"] == 3
    assert _by(m, "invoice-worker", "sns", "Publish") == 0


def test_idempotency_is_measured_on_even_where_disabled_and_the_environment_is_given_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "true")
    saved = dict(os.environ)
    m = measure_naive(1)
    assert _by(m, "payment-worker", "dynamodb", "PutItem") == 1  # Powertools' record was written
    assert dict(os.environ) == saved


def test_a_redelivered_payment_request_gets_the_saved_result_and_costs_one_put_of_the_record() -> None:
    with naive_environment():
        pipeline = NaivePipeline()
        (operation_id,) = drive(pipeline, 1)
        before = {(r["caller"], r["action"]): r["requests"] - r["empty"] for r in pipeline.meter.snapshot()}
        invocations = dict(pipeline.invocations)
        (original,) = pipeline.received["payment-requests"]
        pipeline.redeliver("payment-requests", original)  # the same message, as SQS may deliver it again
        pipeline.pump()
        after = {(r["caller"], r["action"]): r["requests"] - r["empty"] for r in pipeline.meter.snapshot()}
        delta = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
        operation = pipeline.get_operation(operation_id)
        records = pipeline.session.client("dynamodb").scan(TableName=IDEMPOTENCY_TABLE)["Items"]

    assert len(pipeline.received["payment-requests"]) == 2  # it was delivered and handled again
    # Powertools' conditional PutItem fails and hands back the saved record (ALL_OLD): no GetItem, no
    # second charge, no write, no Publish -- the mapping's receive and delete, one invocation.
    assert delta == {
        ("glue:esm (payment-worker)", "ReceiveMessage"): 1,
        ("glue:esm (payment-worker)", "DeleteMessage"): 1,
        ("payment-worker", "PutItem"): 1,
    }
    assert pipeline.invocations["payment-worker"] - invocations["payment-worker"] == 1
    assert pipeline.legacy.calls == 1
    assert operation is not None and operation["status"] == "COMPLETED"
    assert operation["version"] == "4"  # created, then one update per step: none applied twice
    assert len(records) == 4 and {r["status"]["S"] for r in records} == {"COMPLETED"}
    # Each function's records carry its own name, as AWS_LAMBDA_FUNCTION_NAME prefixes them on Lambda.
    assert {r["id"]["S"].split(".", 1)[0] for r in records} == {"api", *STEPS}


def test_a_request_above_the_claim_check_threshold_goes_through_s3_as_the_apps_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.naive_payments as naive

    monkeypatch.setattr(naive, "THRESHOLD_BYTES", 64)
    counts = measure_naive(1).counts()
    # The request, the legacy result, the invoice input; read back 1 + 2 + 1 times by the steps.
    assert counts["s3:PutObject"] == 3
    assert counts["s3:GetObject"] == 4
