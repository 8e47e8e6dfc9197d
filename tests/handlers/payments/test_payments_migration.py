"""``ops migrate`` on payments operations of the layout before one write per step (the items the
old-layout tests write by hand): each ends in today's layout, and the new handlers then complete it,
charged and invoiced exactly once; a redelivered event processed before the migration stays a duplicate.

The passes run as ``python -m ops migrate`` runs them (``ops.migrate.run_pass``), on the world's tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from local.fakes.invoice_api import InvoiceApiFake
from local.fakes.legacy_payments import LegacyPaymentsFake
from ops.migrate import PAYMENTS_API, PAYMENTS_PUBLISHER
from relay import entity_events
from tests.builders import failed_ids
from tests.handlers.migration import WorldApp
from tests.handlers.migration import migrate as run_migration
from tests.handlers.payments.builders import body_of, deliver, post_payment
from tests.handlers.payments.older_layout import (
    CALLER,
    DUE_ATTRIBUTES,
    DUE_INDEX,
    OLD_DEADLINE_ATTRIBUTES,
    OLD_INDEX,
    OLD_SILENCE,
    OldOperation,
    index_entries,
    iso,
    item,
    run_payment_worker,
    table,
    write_old_marker,
    write_old_operation,
    write_old_request_key,
)
from tests.handlers.payments.pipeline import (
    BUCKET,
    IDEMPOTENCY_TABLE,
    OPERATIONS_TABLE,
    REGION,
    Infrastructure,
    Pump,
)


def migrate(infra: Infrastructure, *, dry_run: bool = False) -> dict[str, dict[str, int]]:
    tables = {("payments", "operations"): OPERATIONS_TABLE, ("payments", "idempotency"): IDEMPOTENCY_TABLE}
    app = WorldApp("dev", REGION, tables=tables)
    environments = {PAYMENTS_PUBLISHER: infra.env(), PAYMENTS_API: infra.env()}
    return run_migration(app, "payments", environments, dry_run=dry_run)


def _submitted(
    infra: Infrastructure, accepted: datetime, started: datetime, deadline: datetime, **attributes: Any
) -> OldOperation:
    """An operation of the layout before, submitted to the partner and waiting on it."""
    return write_old_operation(
        infra,
        accepted=accepted,
        status="PAYMENT_PROCESSING",
        version=2,
        later_steps=(("payment", "STARTED", started),),
        deadline=deadline,
        outbox=None,
        attempts=0,
        **attributes,
    )


def test_an_operation_accepted_before_is_migrated_then_completed_once(
    infra: Infrastructure, legacy: LegacyPaymentsFake, invoice_api: InvoiceApiFake
) -> None:
    old = write_old_operation(infra, accepted=datetime.now(UTC) - timedelta(seconds=30))

    counts = migrate(infra)

    assert counts["payments operations without schemaVersion"].get("migrated") == 1
    assert counts["payments outbox rows"].get("published and deleted") == 1
    migrated = item(infra, old.operation_id)
    assert migrated[entity_events.SCHEMA_VERSION_ATTRIBUTE] == entity_events.SCHEMA_VERSION
    assert migrated[entity_events.SEEN_ATTRIBUTE] == {}
    assert all(isinstance(step, str) for step in migrated["steps"])
    assert not OLD_DEADLINE_ATTRIBUTES & set(migrated) and DUE_ATTRIBUTES <= set(migrated)
    assert index_entries(infra, OLD_INDEX) == set() and index_entries(infra, DUE_INDEX) == {old.key}
    assert infra.outbox_rows(old.operation_id) == []
    # The migration published the row's PaymentRequested; the pipeline takes it from there.
    Pump(infra).run()
    done = item(infra, old.operation_id)
    assert done["status"] == "COMPLETED"
    assert legacy.charges_by_operation() == {old.operation_id: 1}
    assert invoice_api.invoices_by_operation() == {old.operation_id: 1}


def test_the_marker_of_an_operation_waiting_for_its_payment_is_folded_so_a_redelivery_stays_a_duplicate(
    infra: Infrastructure, legacy: LegacyPaymentsFake
) -> None:
    now = datetime.now(UTC)
    accepted = now - timedelta(minutes=3)
    started = accepted + timedelta(seconds=1)
    next_at = now + timedelta(seconds=30)
    old = _submitted(
        infra,
        accepted,
        started,
        next_at + OLD_SILENCE,
        paymentAcceptedAt=iso(started),
        nextAttemptAt=iso(next_at),
    )
    write_old_marker(infra, old.requested, at=started)

    migrate(infra)

    migrated = item(infra, old.operation_id)
    assert set(migrated[entity_events.SEEN_ATTRIBUTE]) == {old.requested.event_id}
    response = run_payment_worker(deliver(infra, "payment-requests", old.requested))
    assert failed_ids(response) == []
    assert legacy.calls() == [], "nothing submitted again"
    assert item(infra, old.operation_id) == migrated, "nothing written"


def test_a_second_migration_finds_nothing_and_a_dry_run_writes_nothing(infra: Infrastructure) -> None:
    write_old_operation(infra, accepted=datetime.now(UTC) - timedelta(seconds=30))
    before = infra.ddb.scan(TableName=OPERATIONS_TABLE)["Items"]

    dry = migrate(infra, dry_run=True)

    assert dry["payments operations without schemaVersion"].get("would migrate") == 1
    assert dry["payments outbox rows"].get("would publish and delete") == 1
    assert infra.ddb.scan(TableName=OPERATIONS_TABLE)["Items"] == before
    migrate(infra)
    again = migrate(infra)
    assert all(set(counts) <= {"scanned"} for counts in again.values()), again


def test_a_retry_of_a_request_keyed_before_the_migration_is_answered_with_the_migrated_operation(
    infra: Infrastructure, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payments.intake import Accepted, IdempotencyKeyMismatch, accept_payment
    from payments.models import PaymentRequest
    from payments.wiring import wiring

    accepted = datetime.now(UTC) - timedelta(minutes=2)
    started = accepted + timedelta(seconds=1)
    old = _submitted(infra, accepted, started, started + OLD_SILENCE)
    write_old_request_key(infra, "order-42-payment", old, at=accepted)
    migrate(infra)  # the key is left to its TTL, and still answers a retry
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
            request_key_items=True,
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
    monkeypatch.setenv("REQUEST_KEY_ITEMS", "true")
    from relay.wiring import reset_all

    reset_all()
    retried = post_payment(dict(old.body), idempotency_key="order-42-payment")
    refused = post_payment({**old.body, "amount": "99.00"}, idempotency_key="order-42-payment")

    assert retried["statusCode"] == 202, retried
    assert body_of(retried) == {"operationId": old.operation_id, "status": "PAYMENT_PROCESSING"}
    assert refused["statusCode"] == 422 and body_of(refused)["error"] == "IdempotencyKeyMismatch"
    assert (table(infra, OPERATIONS_TABLE), table(infra, IDEMPOTENCY_TABLE), infra.s3_keys()) == before
