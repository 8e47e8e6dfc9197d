"""``ops migrate`` on payments operations of the layout before one write per step (the items the
old-layout tests write by hand): each ends in today's layout, and the new handlers then complete it,
charged and invoiced exactly once; a redelivered event processed before the migration stays a duplicate.

The passes run as ``python -m ops migrate`` runs them (``ops.migrate.run_pass``), on the world's tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from local.fakes.invoice_api import InvoiceApiFake
from local.fakes.legacy_payments import LegacyPaymentsFake
from ops.migrate import PAYMENTS_API, PAYMENTS_PUBLISHER
from relay import entity_events
from tests.builders import failed_ids
from tests.handlers.migration import WorldApp
from tests.handlers.migration import migrate as run_migration
from tests.handlers.payments.builders import deliver
from tests.handlers.payments.pipeline import IDEMPOTENCY_TABLE, OPERATIONS_TABLE, REGION, Infrastructure, Pump
from tests.handlers.payments.test_payments_old_layout import (
    DUE_ATTRIBUTES,
    DUE_INDEX,
    LEGACY_DEADLINE_ATTRIBUTES,
    LEGACY_INDEX,
    OLD_SILENCE,
    index_entries,
    iso,
    item,
    run_payment_worker,
    write_old_marker,
    write_old_operation,
)


def migrate(infra: Infrastructure, *, dry_run: bool = False) -> dict[str, dict[str, int]]:
    tables = {("payments", "operations"): OPERATIONS_TABLE, ("payments", "idempotency"): IDEMPOTENCY_TABLE}
    app = WorldApp("dev", REGION, tables=tables)
    environments = {PAYMENTS_PUBLISHER: infra.env(), PAYMENTS_API: infra.env()}
    return run_migration(app, "payments", environments, dry_run=dry_run)


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
    assert not LEGACY_DEADLINE_ATTRIBUTES & set(migrated) and DUE_ATTRIBUTES <= set(migrated)
    assert index_entries(infra, LEGACY_INDEX) == set() and index_entries(infra, DUE_INDEX) == {old.key}
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
