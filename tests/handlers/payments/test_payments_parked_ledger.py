"""The parked ledger: every parking is recorded once, findable by entity, without receiving a DLQ;
and ``ops operation`` / ``ops replay`` read and re-drive through the services' own code."""

from __future__ import annotations

from typing import Any

import pytest

from local.fakes.legacy_payments import LegacyPaymentsFake
from tests.builders import FakeContext
from tests.handlers.payments.builders import (
    accepted_operation,
    deliver,
    failed_ids,
    lower_claim_check_threshold,
    payment_request,
    queued_event,
    set_item_attributes,
)
from tests.handlers.payments.pipeline import BUCKET, OPERATIONS_TABLE, Infrastructure, Pump


def run(event: dict[str, Any]) -> dict[str, Any]:
    from payments.handlers import payment_worker

    return payment_worker.handler(event, FakeContext())


def ledger_table(infra: Infrastructure) -> str:
    return {**infra.env(), **infra.consumer_env("payment-requests")}["RELAY_PARKED_LEDGER_TABLE"]


def world_app(infra: Infrastructure) -> Any:
    """``ops.app.App`` on this world: the tests' table names (``NAMES``) instead of the stage's."""
    from ops.app import App

    names = {("payments", "operations"): OPERATIONS_TABLE, ("core", "parked-ledger"): ledger_table(infra)}

    class WorldApp(App):
        def name(self, service: str, short: str) -> str:
            return names.get((service, short)) or super().name(service, short)

    return WorldApp(stage="dev", region="us-east-1", endpoint_url=None)


def ledger_entries(infra: Infrastructure, entity: str) -> list[dict[str, Any]]:
    from relay.ddb import deserialize_item

    table = ledger_table(infra)
    items = infra.ddb.query(
        TableName=table,
        IndexName="by-entity",
        KeyConditionExpression="entity = :e",
        ExpressionAttributeValues={":e": {"S": entity}},
    )["Items"]
    return [deserialize_item(i) for i in items]


def test_a_parked_message_is_recorded_once_in_the_ledger_with_its_reason_and_ids(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    operation_id = accepted_operation(payment_request())
    event = queued_event(infra, "payment-requests", expect=1)
    set_item_attributes(infra, operation_id, request='{"amount":"1.00"}')  # no longer its sha256

    assert failed_ids(run(event)) == []
    assert failed_ids(run(event)) == []  # the same delivery again: the ledger knows it, parked once

    assert len(infra.receive_all(infra.queues["payment-requests"].dlq_url)) == 1
    (entry,) = ledger_entries(infra, f"operationId#{operation_id}")
    assert entry["status"] == "PARKED" and entry["errorClass"] == "ClaimCheckMismatch"
    assert entry["eventType"] == "PaymentRequested" and entry["ids"]["operationId"] == operation_id
    assert entry["sourceQueue"].endswith("payment-requests") and entry["dlq"].endswith("payment-requests-dlq")
    assert entry["messageId"] == event["Records"][0]["messageId"] and entry["expiresAt"]


def test_a_message_that_is_no_envelope_is_recorded_without_ids(infra: Infrastructure) -> None:
    from relay.ddb import deserialize_item

    event = deliver(infra, "payment-requests", "{this is not an envelope")

    assert failed_ids(run(event)) == []
    table = ledger_table(infra)
    (entry,) = [deserialize_item(i) for i in infra.ddb.scan(TableName=table)["Items"]]
    assert entry["errorClass"] == "InvalidInput" and "entity" not in entry


def test_ops_operation_shows_state_deadline_outbox_and_parked_messages(
    infra: Infrastructure, legacy: LegacyPaymentsFake, monkeypatch: pytest.MonkeyPatch
) -> None:

    from ops.lookup import describe_operation

    lower_claim_check_threshold(monkeypatch, 256)
    operation_id = accepted_operation(payment_request(details={"note": "n" * 300}))
    event = queued_event(infra, "payment-requests", expect=1)
    key = infra.operation_item(operation_id)["requestRef"]["key"]  # type: ignore[index]
    infra.s3.put_object(Bucket=BUCKET, Key=key, Body=b"{}")
    run(event)

    view = describe_operation(world_app(infra), operation_id)

    assert view is not None and view["status"] == "PENDING"
    assert view["deadline"]["deadlineAt"] and view["claimChecks"]["requestRef"]["key"] == key
    # Its last event, held in the operation itself (one write per step: no outbox row).
    assert [row["eventType"] for row in view["outbox"]] == ["PaymentRequested"]
    (parked,) = view["parked"]
    assert parked["errorClass"] == "ClaimCheckMismatch"


def test_ops_replay_redrives_a_stranded_operation_which_then_completes_charged_once(
    infra: Infrastructure, legacy: LegacyPaymentsFake, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:

    from ops import lookup

    monkeypatch.setattr(lookup, "AUDIT_FILE", tmp_path / "audit.jsonl")
    operation_id = accepted_operation(payment_request())
    queued_event(infra, "payment-requests", expect=1)  # received, then lost
    app = world_app(infra)

    record = lookup.replay(app, operation_id, reason="message deleted by hand")

    assert record["replayed"] and record["reason"] == "message deleted by hand"
    assert "message deleted by hand" in (tmp_path / "audit.jsonl").read_text()
    Pump(infra).run()
    assert infra.operation_item(operation_id)["status"] == "COMPLETED"  # type: ignore[index]
    assert legacy.charges_by_operation() == {operation_id: 1}
    with pytest.raises(lookup.ReplayRefused, match="terminal"):
        lookup.replay(app, operation_id, reason="again")


def test_ops_deadlines_shows_the_stages_shards_and_where_each_operation_waits(
    infra: Infrastructure, capsys: pytest.CaptureFixture[str]
) -> None:
    from ops import deadlines as ops_deadlines
    from relay import deadlines

    operation_id = accepted_operation(payment_request())
    app = world_app(infra)

    assert ops_deadlines.stage_shards(app) == (deadlines.DEFAULT_SHARDS, deadlines.DEFAULT_SHARDS)
    assert ops_deadlines.run(app, rebalance=True) == 0

    out = capsys.readouterr().out
    shard = deadlines.shard_of(operation_id, deadlines.DEFAULT_SHARDS)
    assert "nothing to rebalance" in out
    assert f"{shard} " in out and "64 shard(s) written, 64 read" in out
