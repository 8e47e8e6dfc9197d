"""Data written by the layout before one write per step is still read and completed after the deploy.

Every test starts from items written by hand exactly as the code before the one-write layout wrote
them (``git show HEAD:functions/payments/store.py``, ``intake.py``, ``relay/request_keys.py``,
``relay/outbox.py``): the operation with its request claim-checked in S3 (``requestRef``), its steps as
maps, no ``seen`` map and no ``ev``, in the legacy deadline index (``deadlineShard``/``deadlineAt``);
its events as outbox rows ``OUTBOX#<eventType>#<eventId>``; client keys ``request-key#<key>`` and
processed-event markers ``event#<eventId>`` in the idempotency table. Then the NEW handlers, stream
publisher and sweeper (moto with the stack's tables, the fakes of the legacy payment system and the
invoice API on 127.0.0.1) take over, and the tests assert on what they stored and called.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from local.fakes.invoice_api import InvoiceApiFake
from local.fakes.legacy_payments import LegacyPaymentsFake
from relay.envelope import ClaimCheckRef, Envelope, canonical_payload_sha256, new_envelope
from relay.idempotency import deserialize_item, serialize_item
from tests.builders import ACCOUNT, FakeContext, failed_ids
from tests.handlers.payments.builders import (
    body_of,
    deliver,
    get_operation,
    payment_request,
    post_payment,
)
from tests.handlers.payments.conftest import use_queue
from tests.handlers.payments.pipeline import (
    BUCKET,
    IDEMPOTENCY_TABLE,
    OPERATIONS_TABLE,
    Infrastructure,
    Pump,
    lambda_sqs_event,
)

LEGACY_DEADLINE_ATTRIBUTES = {"deadlineShard", "deadlineAt"}
DUE_ATTRIBUTES = {"dueShard", "dueAt"}
LEGACY_INDEX = ("by-deadline", "deadlineShard")
DUE_INDEX = ("due", "dueShard")
# What the code before wrote: an operation's first deadline one silence after acceptance, an outbox
# row's publish grace, a request key kept as long as the longest-kept operation.
OLD_SILENCE = timedelta(seconds=900)
OLD_OUTBOX_GRACE = timedelta(seconds=300)
OLD_KEY_TTL = timedelta(days=90)
CALLER = f"arn:aws:iam::{ACCOUNT}:user/tester"


# -------------------------------------------------------------------------------------------------
# the layout before, written by hand
# -------------------------------------------------------------------------------------------------


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def old_shard(item_id: str) -> str:
    """``relay.deadlines.shard_of`` as it was: sha256 of the id, 4 shards."""
    return f"open#{int(hashlib.sha256(item_id.encode()).hexdigest()[:8], 16) % 4}"


@dataclass(frozen=True)
class OldOperation:
    operation_id: str
    body: dict[str, Any]  # the client's JSON body
    document: dict[str, Any]  # the request as the code before stored it in S3
    ref: dict[str, Any]  # requestRef
    requested: Envelope  # its PaymentRequested (claim check of the request)

    @property
    def pk(self) -> str:
        return f"OPERATION#{self.operation_id}"

    @property
    def key(self) -> tuple[str, str]:
        return (self.pk, "OPERATION")

    @property
    def row_key(self) -> tuple[str, str]:
        return (self.pk, f"OUTBOX#{self.requested.event_type}#{self.requested.event_id}")


def put_old_request(infra: Infrastructure, operation_id: str, document: dict[str, Any]) -> dict[str, Any]:
    """``relay.claim_check.put_json`` to ``payments/<id>/request.json``, as the intake did."""
    data = json.dumps(document, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode("utf-8")
    digest = hashlib.sha256(data).digest()
    key = f"payments/{operation_id}/request.json"
    infra.s3.put_object(
        Bucket=BUCKET,
        Key=key,
        Body=data,
        ContentType="application/json",
        ChecksumSHA256=base64.b64encode(digest).decode("ascii"),
        Metadata={"sha256": digest.hex()},
    )
    return {"bucket": BUCKET, "key": key, "sha256": digest.hex(), "size": len(data)}


def write_old_operation(
    infra: Infrastructure,
    *,
    accepted: datetime,
    status: str = "PENDING",
    version: int = 1,
    later_steps: tuple[tuple[str, str, datetime], ...] = (),
    deadline: datetime | None = None,
    outbox: str | None = "unpublished",
    **attributes: Any,
) -> OldOperation:
    """An operation as the code before left it: accepted at ``accepted`` (one transaction: the item,
    its PaymentRequested outbox row, the request in S3), then moved on by ``later_steps`` (step,
    status, at) to ``status``/``version``; in the legacy index until ``deadline`` (by default one
    silence after acceptance). ``outbox``: "unpublished" (in the legacy index until its grace
    passes), or None (published and expired long ago)."""
    from payments.models import PaymentRequest

    operation_id = str(uuid.uuid4())
    body = payment_request()
    document = PaymentRequest.model_validate(body).to_document()
    ref = put_old_request(infra, operation_id, document)
    correlation_id = f"corr-{uuid.uuid4().hex[:8]}"
    ids = {"operationId": operation_id, "paymentId": body["paymentId"], "orderId": body["orderId"]}
    requested = new_envelope(
        "PaymentRequested",
        identity=[operation_id, "payment-requested"],
        ids=ids,
        claim_check=ClaimCheckRef(**ref),
        correlation_id=correlation_id,
        occurred_at=accepted,
    )
    steps = [{"step": "request", "status": "ACCEPTED", "at": iso(accepted)}]
    steps += [{"step": step, "status": s, "at": iso(at)} for step, s, at in later_steps]
    last = later_steps[-1][2] if later_steps else accepted
    item = {
        "pk": f"OPERATION#{operation_id}",
        "sk": "OPERATION",
        "kind": "operation",
        "operationId": operation_id,
        "status": status,
        "version": version,
        "paymentId": body["paymentId"],
        "orderId": body["orderId"],
        "correlationId": correlation_id,
        "requestRef": ref,
        "createdAt": iso(accepted),
        "updatedAt": iso(last),
        "steps": steps,
        "stateSince": iso(last),
        "deadlineShard": old_shard(operation_id),
        "deadlineAt": epoch(deadline or accepted + OLD_SILENCE),
        **attributes,
    }
    infra.ddb.put_item(TableName=OPERATIONS_TABLE, Item=serialize_item(item))
    if outbox == "unpublished":
        infra.ddb.put_item(
            TableName=OPERATIONS_TABLE,
            Item=serialize_item(
                {
                    "pk": f"OPERATION#{operation_id}",
                    "sk": f"OUTBOX#{requested.event_type}#{requested.event_id}",
                    "kind": "outbox",
                    "eventId": requested.event_id,
                    "eventType": requested.event_type,
                    "correlationId": requested.correlation_id,
                    "envelope": requested.to_json(),
                    "createdAt": iso(accepted),
                    "deadlineShard": old_shard(requested.event_id),
                    "deadlineAt": epoch(accepted + OLD_OUTBOX_GRACE),
                }
            ),
        )
    return OldOperation(operation_id, body, document, ref, requested)


def write_old_request_key(infra: Infrastructure, key: str, old: OldOperation, *, at: datetime) -> None:
    """The request-key item the layout before committed with the operation's creation."""
    from relay.request_keys import request_sha256

    infra.ddb.put_item(
        TableName=IDEMPOTENCY_TABLE,
        Item=serialize_item(
            {
                "id": f"request-key#{key}",
                "kind": "request-key",
                "operationId": old.operation_id,
                "requestSha256": request_sha256(old.document),
                "createdAt": iso(at),
                "expiresAt": epoch(at + OLD_KEY_TTL),
            }
        ),
    )


def write_old_marker(infra: Infrastructure, envelope: Envelope, *, at: datetime) -> None:
    """``relay.idempotency.commit_once``'s processed-event marker."""
    infra.ddb.put_item(
        TableName=IDEMPOTENCY_TABLE,
        Item=serialize_item(
            {
                "id": f"event#{envelope.event_id}",
                "kind": "processed-event",
                "eventId": envelope.event_id,
                "eventType": envelope.event_type,
                "payloadSha256": canonical_payload_sha256(envelope),
                "processedAt": iso(at),
                "expiresAt": epoch(at + timedelta(days=7)),
            }
        ),
    )


# -------------------------------------------------------------------------------------------------
# inspection
# -------------------------------------------------------------------------------------------------


def item(infra: Infrastructure, operation_id: str) -> dict[str, Any]:
    found = infra.operation_item(operation_id)
    assert found is not None
    return found


def index_entries(infra: Infrastructure, index: tuple[str, str]) -> set[tuple[str, str]]:
    """The (pk, sk) of every item in a deadline index, whatever its deadline and shard."""
    from relay import deadlines

    name, shard_attribute = index
    found: set[tuple[str, str]] = set()
    for n in range(max(deadlines.DEFAULT_SHARDS, deadlines.LEGACY_SHARDS)):
        page = infra.ddb.query(
            TableName=OPERATIONS_TABLE,
            IndexName=name,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": shard_attribute},
            ExpressionAttributeValues={":s": {"S": f"open#{n}"}},
        )
        found |= {(i["pk"]["S"], i["sk"]["S"]) for i in page["Items"]}
    return found


def table(infra: Infrastructure, name: str) -> list[dict[str, Any]]:
    items = [deserialize_item(i) for i in infra.ddb.scan(TableName=name)["Items"]]
    return sorted(items, key=lambda i: json.dumps(i, sort_keys=True, default=str))


def types_of(events: list[Envelope]) -> list[str]:
    return sorted(e.event_type for e in events)


def message_envelope(message: dict[str, Any]) -> dict[str, Any]:
    """The envelope an SNS-delivered SQS message carries."""
    return dict(json.loads(json.loads(message["Body"])["Message"]))


def assert_no_parked_messages(infra: Infrastructure) -> None:
    for queue in infra.queues.values():
        assert infra.receive_all(queue.dlq_url) == [], f"parked on {queue.name}"


def steps(infra: Infrastructure, operation_id: str) -> list[tuple[str, str]]:
    operation = infra.operation(operation_id)
    assert operation is not None
    return [(s.step, s.status) for s in operation.steps]


def run_payment_worker(event: dict[str, Any]) -> dict[str, Any]:
    from payments.handlers import payment_worker

    return payment_worker.handler(event, FakeContext())


def sweep(infra: Infrastructure, monkeypatch: pytest.MonkeyPatch, *, at: datetime) -> Any:
    """One sweep as the sweeper function runs it, at ``at``."""
    from payments.settings import SWEEPER
    from payments.sweeper import sweep as run_sweep
    from payments.wiring import wiring

    from relay.wiring import reset_all

    use_queue(monkeypatch, infra, "sweeps")
    reset_all()
    cause = new_envelope("SweepDue", identity=["sweep", iso(at)], ids={}, payload={}, correlation_id="sweep")
    return run_sweep(wiring.checked(SWEEPER)(), cause, now=at)


# -------------------------------------------------------------------------------------------------
# 1. an accepted operation with its outbox row still unpublished
# -------------------------------------------------------------------------------------------------


def test_an_operation_accepted_before_the_one_write_layout_completes_after_the_deploy(
    infra: Infrastructure, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake
) -> None:
    old = write_old_operation(infra, accepted=datetime.now(UTC) - timedelta(seconds=30))
    assert index_entries(infra, LEGACY_INDEX) == {old.key, old.row_key}
    assert index_entries(infra, DUE_INDEX) == set()
    pump = Pump(infra)  # delivers every SQS batch twice

    # The stream publisher publishes the outbox row's INSERT and marks the row.
    pump.publish_outbox()

    (row,) = infra.outbox_rows(old.operation_id)
    assert row["publishedAt"] and row["expiresAt"] and not LEGACY_DEADLINE_ATTRIBUTES & set(row)
    assert index_entries(infra, LEGACY_INDEX) == {old.key}, "the published row left the legacy index"

    # The payment worker reads the request from the old claim check and charges.
    assert pump.drain_queue("payment-requests") == 1
    charged = item(infra, old.operation_id)
    assert charged["status"] == "PAYMENT_COMPLETED" and charged["version"] == 3 and charged["paymentRef"]
    assert set(charged["seen"]) == {old.requested.event_id}, "it records what it processed from now on"
    assert not LEGACY_DEADLINE_ATTRIBUTES & set(charged) and DUE_ATTRIBUTES <= set(charged)
    assert index_entries(infra, LEGACY_INDEX) == set()
    assert index_entries(infra, DUE_INDEX) == {old.key}
    submitted = legacy.payment(f"{old.operation_id}:payment")
    assert submitted is not None and submitted["amount"] == old.document["amount"]
    assert submitted["paymentId"] == old.body["paymentId"]

    # Post-processing and the invoice step; the last event is published and the operation settles.
    pump.run()

    done = item(infra, old.operation_id)
    assert done["status"] == "COMPLETED" and done["invoiceId"] and done["expiresAt"]
    assert legacy.charges_by_operation() == {old.operation_id: 1}
    assert invoice_api.invoices_by_operation() == {old.operation_id: 1}
    assert steps(infra, old.operation_id) == [
        ("request", "ACCEPTED"),
        ("payment", "STARTED"),
        ("payment", "COMPLETED"),
        ("post-processing", "STARTED"),
        ("invoice", "REQUESTED"),
        ("invoice", "COMPLETED"),
    ]
    assert types_of(infra.produced_events(old.operation_id)) == [
        "InvoiceRequested",
        "OperationCompleted",
        "PaymentCompleted",
        "PaymentRequested",
    ]
    assert not (LEGACY_DEADLINE_ATTRIBUTES | DUE_ATTRIBUTES) & set(done), "ended and published: settled"
    assert index_entries(infra, DUE_INDEX) == set() and index_entries(infra, LEGACY_INDEX) == set()
    assert_no_parked_messages(infra)
    view = body_of(get_operation(old.operation_id))
    assert view["status"] == "COMPLETED"
    assert view["results"]["request"] == f"s3://{BUCKET}/payments/{old.operation_id}/request.json"


# -------------------------------------------------------------------------------------------------
# 2. a client's retry of a request keyed before the deploy
# -------------------------------------------------------------------------------------------------


def test_a_retry_of_a_request_keyed_before_the_one_write_layout_is_answered_with_the_old_operation(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payments.intake import Accepted, IdempotencyKeyMismatch, accept_payment
    from payments.models import PaymentRequest
    from payments.wiring import wiring

    accepted = datetime.now(UTC) - timedelta(minutes=2)
    started = accepted + timedelta(seconds=1)
    old = write_old_operation(
        infra,
        accepted=accepted,
        status="PAYMENT_PROCESSING",
        version=2,
        later_steps=(("payment", "STARTED", started),),
        deadline=started + OLD_SILENCE,
        outbox=None,
        attempts=0,
    )
    write_old_request_key(infra, "order-42-payment", old, at=accepted)
    before = (table(infra, OPERATIONS_TABLE), table(infra, IDEMPOTENCY_TABLE), infra.s3_keys())
    wired = wiring()
    calls: list[str] = []
    for client in (wired.store.ddb, wired.s3):
        client.meta.events.register("before-call", lambda model, **_: calls.append(model.name))

    def accept(body: dict[str, Any]) -> Accepted:
        return accept_payment(
            PaymentRequest.model_validate(body),
            idempotency_key="order-42-payment",
            correlation_id="retry",
            store=wired.store,
            s3_client=wired.s3,
            bucket=BUCKET,
            caller=CALLER,
            legacy_request_keys=True,
            now=wired.clock(),
        )

    replay = accept(dict(old.body))
    with pytest.raises(IdempotencyKeyMismatch) as mismatch:
        accept({**old.body, "amount": "99.00"})

    # The old operation's id and its stored state (not the PENDING a missing item would answer).
    assert replay == Accepted(old.operation_id, "PAYMENT_PROCESSING", replayed=True)
    assert mismatch.value.entity_id == old.operation_id
    assert mismatch.value.stored_sha256 == old.ref["sha256"] != mismatch.value.received_sha256
    assert not {"PutItem", "UpdateItem", "TransactWriteItems", "PutObject"} & set(calls), calls
    assert (table(infra, OPERATIONS_TABLE), table(infra, IDEMPOTENCY_TABLE), infra.s3_keys()) == before

    # The same through the API, with the stage's setting read from the function's environment.
    monkeypatch.setenv("LEGACY_REQUEST_KEYS", "true")
    from relay.wiring import reset_all

    reset_all()
    retried = post_payment(dict(old.body), idempotency_key="order-42-payment")
    refused = post_payment({**old.body, "amount": "99.00"}, idempotency_key="order-42-payment")

    assert retried["statusCode"] == 202, retried
    assert body_of(retried) == {"operationId": old.operation_id, "status": "PAYMENT_PROCESSING"}
    assert refused["statusCode"] == 422 and body_of(refused)["error"] == "IdempotencyKeyMismatch"
    assert (table(infra, OPERATIONS_TABLE), table(infra, IDEMPOTENCY_TABLE), infra.s3_keys()) == before


# -------------------------------------------------------------------------------------------------
# 3. a redelivery of an event the code before processed
# -------------------------------------------------------------------------------------------------


def test_a_redelivered_event_with_a_marker_from_before_the_deploy_is_acknowledged_without_effect(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    """The code before answered "accepted, still processing" with a delayed status check and committed
    the PaymentRequested's marker with ``paymentAcceptedAt``: the operation is still PAYMENT_PROCESSING,
    a state the payment step runs from. A redelivered PaymentRequested (an SNS duplicate) must not
    submit again nor start a second chain of checks; the check itself, never processed, still runs."""
    from payments.store import operation_from_item

    now = datetime.now(UTC)
    accepted = now - timedelta(minutes=3)
    started = accepted + timedelta(seconds=1)
    next_at = now + timedelta(seconds=30)
    old = write_old_operation(
        infra,
        accepted=accepted,
        status="PAYMENT_PROCESSING",
        version=2,
        later_steps=(("payment", "STARTED", started),),
        deadline=next_at + OLD_SILENCE,
        outbox=None,
        attempts=0,
        paymentAcceptedAt=iso(started),
        nextAttemptAt=iso(next_at),
    )
    write_old_marker(infra, old.requested, at=started)
    before = item(infra, old.operation_id)
    assert operation_from_item(before).legacy, "read as an operation of the layout before"

    response = run_payment_worker(deliver(infra, "payment-requests", old.requested))

    assert failed_ids(response) == []
    assert legacy.calls() == [], "nothing submitted again"
    assert item(infra, old.operation_id) == before, "nothing written"
    assert infra.receive_all(infra.queues["payment-requests"].url) == [], "no second status check"
    assert_no_parked_messages(infra)

    # The old code's delayed check has no marker: it is processed, and charges once.
    check = new_envelope(
        "PaymentStatusCheckDue",
        identity=[old.operation_id, "payment-check-1"],
        ids=old.requested.ids,
        payload={"attempt": 1},
        correlation_id=old.requested.correlation_id,
        causation_id=old.requested.event_id,
    )
    assert failed_ids(run_payment_worker(deliver(infra, "payment-requests", check))) == []

    charged = item(infra, old.operation_id)
    assert charged["status"] == "PAYMENT_COMPLETED" and charged["version"] == 3
    assert set(charged["seen"]) == {check.event_id}
    assert not LEGACY_DEADLINE_ATTRIBUTES & set(charged) and DUE_ATTRIBUTES <= set(charged)
    assert legacy.charges_by_operation() == {old.operation_id: 1}


# -------------------------------------------------------------------------------------------------
# 4. the sweeper and the legacy index
# -------------------------------------------------------------------------------------------------


def test_the_sweeper_redrives_an_overdue_operation_found_in_the_legacy_index(
    infra: Infrastructure,
    legacy: LegacyPaymentsFake,
    invoice_api: InvoiceApiFake,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Accepted 20 minutes before, its PaymentRequested published then and its message lost: its
    legacy deadline (one silence after acceptance) passed 5 minutes ago, its budget is not spent."""
    now = datetime.now(UTC)
    old = write_old_operation(infra, accepted=now - timedelta(minutes=20), outbox=None)
    assert index_entries(infra, LEGACY_INDEX) == {old.key}

    report = sweep(infra, monkeypatch, at=now)

    assert report.overdue == 1 and report.redriven == 1
    assert report.republished == 0 and not report.given_up
    redriven = item(infra, old.operation_id)
    assert redriven["status"] == "PENDING" and redriven["version"] == 1 and redriven["redrives"] == 1
    assert not LEGACY_DEADLINE_ATTRIBUTES & set(redriven)
    assert redriven["dueAt"] == epoch(now + OLD_SILENCE), "looked at again one silence later"
    (event,) = infra.item_events(old.operation_id)
    assert event.event_type == "PaymentRedriveDue" and event.payload == {"redrive": 1, "status": "PENDING"}
    assert index_entries(infra, LEGACY_INDEX) == set() and index_entries(infra, DUE_INDEX) == {old.key}
    assert sweep(infra, monkeypatch, at=now).redriven == 0, "its deadline moved: not twice"

    Pump(infra).run()

    done = item(infra, old.operation_id)
    assert done["status"] == "COMPLETED"
    assert legacy.charges_by_operation() == {old.operation_id: 1}
    assert invoice_api.invoices_by_operation() == {old.operation_id: 1}
    assert types_of(infra.produced_events(old.operation_id)) == [
        "InvoiceRequested",
        "OperationCompleted",
        "PaymentCompleted",
        "PaymentRedriveDue",
    ]
    assert index_entries(infra, DUE_INDEX) == set() and index_entries(infra, LEGACY_INDEX) == set()
    assert_no_parked_messages(infra)


def test_the_sweeper_republishes_an_outbox_row_of_the_layout_before_still_unpublished_past_its_grace(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Accepted 6 minutes before; the stream batch of its outbox row failed (it went to the stream's
    DLQ): the row's grace (5 minutes) passed, the operation's own deadline (15 minutes) did not."""
    from relay.wiring import reset_all

    now = datetime.now(UTC)
    old = write_old_operation(infra, accepted=now - timedelta(minutes=6))
    assert index_entries(infra, LEGACY_INDEX) == {old.key, old.row_key}
    operation_before = item(infra, old.operation_id)

    report = sweep(infra, monkeypatch, at=now)

    assert report.republished == 1 and report.overdue == 0 and report.redriven == 0
    (row,) = infra.outbox_rows(old.operation_id)
    assert row["publishedAt"] and row["expiresAt"] and not LEGACY_DEADLINE_ATTRIBUTES & set(row)
    assert index_entries(infra, LEGACY_INDEX) == {old.key}, "the row left it, the operation did not"
    assert item(infra, old.operation_id) == operation_before, "the operation is not overdue: untouched"
    queue = infra.queues["payment-requests"]
    (message,) = infra.receive_all(queue.url)
    published = message_envelope(message)
    assert published["eventId"] == old.requested.event_id
    assert published["claimCheck"]["key"] == f"payments/{old.operation_id}/request.json"
    assert sweep(infra, monkeypatch, at=now).republished == 0, "marked: re-published once"

    # The re-published event drives the payment step.
    use_queue(monkeypatch, infra, "payment-requests")
    reset_all()
    assert failed_ids(run_payment_worker(lambda_sqs_event([message], queue))) == []

    charged = item(infra, old.operation_id)
    assert charged["status"] == "PAYMENT_COMPLETED" and set(charged["seen"]) == {old.requested.event_id}
    assert legacy.charges_by_operation() == {old.operation_id: 1}
    assert index_entries(infra, LEGACY_INDEX) == set() and index_entries(infra, DUE_INDEX) == {old.key}
