"""Items of the layout before one write per step, written by hand for the migration tests
(``test_payments_migration.py``) exactly as the code before the one-write layout wrote
them (``git show HEAD:functions/payments/store.py``, ``intake.py``, ``relay/request_keys.py``,
``relay/outbox.py``): the operation with its request claim-checked in S3 (``requestRef``), its steps as
maps, no ``seen`` map and no ``ev``, in the older deadline index (``deadlineShard``/``deadlineAt``);
its events as outbox rows ``OUTBOX#<eventType>#<eventId>``; client keys ``request-key#<key>`` and
processed-event markers ``event#<eventId>`` in the idempotency table. Then the NEW handlers, stream
publisher and sweeper (moto with the stack's tables, the fakes of the legacy payment system and the
invoice API on 127.0.0.1) take over after ``ops migrate``, and the tests assert on what they stored and
called.
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

from relay.ddb import deserialize_item, serialize_item
from relay.envelope import ClaimCheckRef, Envelope, canonical_payload_sha256, new_envelope
from tests.builders import ACCOUNT, FakeContext
from tests.handlers.payments.builders import (
    payment_request,
)
from tests.handlers.payments.conftest import use_queue
from tests.handlers.payments.pipeline import (
    BUCKET,
    IDEMPOTENCY_TABLE,
    OPERATIONS_TABLE,
    Infrastructure,
)

OLD_DEADLINE_ATTRIBUTES = {"deadlineShard", "deadlineAt"}
DUE_ATTRIBUTES = {"dueShard", "dueAt"}
OLD_INDEX = ("by-deadline", "deadlineShard")
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
    status, at) to ``status``/``version``; in the older deadline index until ``deadline`` (by default
    one silence after acceptance). ``outbox``: "unpublished" (in the older deadline index until its
    grace passes), or None (published and expired long ago)."""
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
    for n in range(deadlines.DEFAULT_SHARDS):  # the old index had 4 of them
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
