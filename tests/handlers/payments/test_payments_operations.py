"""The operation state machine: every transition, and its rejection when illegal or stale."""

from __future__ import annotations

import hashlib
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from relay.claim_check import Kept
from relay.envelope import Envelope, new_envelope
from tests.handlers.payments.builders import accepted_operation
from tests.handlers.payments.pipeline import OPERATIONS_TABLE, Infrastructure, Pump

from payments.operations import (  # isort: skip
    ALLOWED,
    AlreadyApplied,
    IllegalTransition,
    Operation,
    UNSUCCESSFUL,
    OperationError,
    Status,
    plan_transition,
)

# Every non-terminal state's deadline (seconds after entering it), as the settings give them.
DEADLINES = {status: 900 for status in Status if not status.terminal}

LEGAL = [(source, target) for source, targets in ALLOWED.items() for target in sorted(targets)]
ILLEGAL = [
    (source, target) for source, target in itertools.product(Status, Status) if target not in ALLOWED[source]
]


def operation_in(infra: Infrastructure, status: Status, version: int = 7) -> Operation:
    """A real operation (via the API), forced into ``status`` at ``version``."""
    from payments.wiring import wiring

    operation_id = accepted_operation()
    infra.ddb.update_item(
        TableName=OPERATIONS_TABLE,
        Key={"pk": {"S": f"OPERATION#{operation_id}"}, "sk": {"S": "OPERATION"}},
        UpdateExpression="SET #s = :s, #v = :v",
        ExpressionAttributeNames={"#s": "status", "#v": "version"},
        ExpressionAttributeValues={":s": {"S": str(status)}, ":v": {"N": str(version)}},
    )
    operation = wiring().store.get_operation(operation_id)
    assert operation is not None
    return operation


def apply(operation: Operation, target: Status, *, events: tuple[Envelope, ...] = ()) -> None:
    from payments.step_rules import LIFECYCLE
    from payments.wiring import wiring

    store = wiring().store
    error = OperationError("Test", "forced") if target in UNSUCCESSFUL else None
    plan = plan_transition(
        operation, target, now=datetime.now(UTC), error=error, ttl_days=5, deadlines=DEADLINES
    )
    store.apply_one(
        store.transition_write(plan, on_condition_failed=LIFECYCLE.on_stale(plan, frozenset()), events=events)
    )


def ended_event(operation: Operation, target: Status) -> Envelope:
    return new_envelope(
        "TransitionTested",
        identity=[operation.operation_id, str(target)],
        ids=operation.ids(),
        payload={"status": str(target)},
        correlation_id=operation.correlation_id,
    )


# A request as the operation keeps it (inline, its sha256 recorded).
REQUEST = Kept(sha256=hashlib.sha256(b"{}").hexdigest(), size=2, text="{}")


@pytest.mark.parametrize(("source", "target"), LEGAL, ids=[f"{s}->{t}" for s, t in LEGAL])
def test_every_legal_transition_is_applied_with_a_new_version_and_step(
    infra: Infrastructure, source: Status, target: Status
) -> None:
    from payments.wiring import wiring

    operation = operation_in(infra, source)
    event = ended_event(operation, target)

    apply(operation, target, events=(event,))

    after = wiring().store.get_operation(operation.operation_id)
    assert after is not None
    assert after.status is target
    assert after.version == operation.version + 1
    assert len(after.steps) == len(operation.steps) + 1
    assert after.updated_at == after.steps[-1].at
    assert (after.expires_at is not None) == target.terminal
    assert infra.item_events(operation.operation_id) == [event], "its event in the same write"
    # A transition leaves the deadline index alone (no index write per step) ...
    assert operation.deadline_at is not None and after.deadline_at == operation.deadline_at
    # ... and the operation leaves it once it ended and its last event is published.
    Pump(infra).publish_outbox()
    published = wiring().store.get_operation(operation.operation_id)
    assert published is not None and (published.deadline_at is None) == target.terminal


@pytest.mark.parametrize(("source", "target"), ILLEGAL, ids=[f"{s}->{t}" for s, t in ILLEGAL])
def test_every_illegal_transition_is_rejected_before_anything_is_written(
    source: Status, target: Status
) -> None:
    operation = Operation(
        operation_id="op-1",
        status=source,
        version=1,
        payment_id="pay-1",
        correlation_id="c",
        request=REQUEST,
        created_at="2024-01-01T00:00:00.000Z",
        updated_at="2024-01-01T00:00:00.000Z",
    )

    with pytest.raises(IllegalTransition, match="not a legal transition"):
        plan_transition(
            operation,
            target,
            now=datetime.now(UTC),
            error=OperationError("x", "y"),
            ttl_days=1,
            deadlines=DEADLINES,
        )


def test_stale_transition_from_an_old_state_is_rejected_by_dynamodb_and_not_applied(
    infra: Infrastructure,
) -> None:
    from payments.wiring import wiring

    read_earlier = operation_in(infra, Status.PENDING, version=1)
    apply(read_earlier, Status.PAYMENT_PROCESSING)  # someone else moved it on
    moved = wiring().store.get_operation(read_earlier.operation_id)
    apply(moved, Status.PAYMENT_COMPLETED)  # type: ignore[arg-type]

    with pytest.raises(IllegalTransition, match="not PENDING"):
        apply(read_earlier, Status.FAILED)  # legal from PENDING, but PENDING is long gone

    after = wiring().store.get_operation(read_earlier.operation_id)
    assert after is not None and after.status is Status.PAYMENT_COMPLETED and after.error is None


def test_transition_from_the_right_state_but_a_stale_version_is_retried_not_applied(
    infra: Infrastructure,
) -> None:
    from payments.wiring import wiring

    from relay.errors import ConcurrentWrite

    operation = operation_in(infra, Status.PAYMENT_PROCESSING, version=4)
    stale = Operation(**{**operation.__dict__, "version": 3})

    # A race, not an outage: its own transient type (retried with a fresh read).
    with pytest.raises(ConcurrentWrite, match="changed concurrently"):
        apply(stale, Status.PAYMENT_COMPLETED)

    after = wiring().store.get_operation(operation.operation_id)
    assert after is not None and after.status is Status.PAYMENT_PROCESSING and after.version == 4


def test_transition_to_a_state_the_operation_already_passed_reads_as_already_applied(
    infra: Infrastructure,
) -> None:
    from payments.step_rules import PAYMENT_STEP
    from payments.wiring import wiring

    operation = operation_in(infra, Status.PAYMENT_PROCESSING, version=2)
    apply(operation, Status.PAYMENT_COMPLETED)
    store = wiring().store
    plan = plan_transition(operation, Status.PAYMENT_COMPLETED, now=datetime.now(UTC), deadlines=DEADLINES)

    with pytest.raises(AlreadyApplied):
        store.apply_one(store.transition_write(plan, on_condition_failed=PAYMENT_STEP.on_stale(plan)))


@pytest.mark.parametrize(("target", "days"), [(Status.COMPLETED, 30), (Status.INVOICE_FAILED, 90)])
def test_terminal_states_set_expires_at_from_their_retention(target: Status, days: int) -> None:
    now = datetime(2024, 5, 1, tzinfo=UTC)
    operation = Operation(
        operation_id="op-1",
        status=Status.INVOICE_PENDING,
        version=5,
        payment_id="pay-1",
        correlation_id="c",
        request=REQUEST,
        created_at="2024-01-01T00:00:00.000Z",
        updated_at="2024-01-01T00:00:00.000Z",
    )

    plan = plan_transition(operation, target, now=now, error=OperationError("x", "y"), ttl_days=days)

    assert plan.set_attributes["expires_at"] == int((now + timedelta(days=days)).timestamp())


def test_a_stale_step_that_finds_a_concurrent_delivery_of_it_further_on_retries_instead_of_parking(
    infra: Infrastructure,
) -> None:
    """Found by ``make chaos``: two copies of one PaymentRequested; one took the operation PENDING ->
    PAYMENT_PROCESSING -> RECONCILING while the other still read PENDING. The second's failed condition
    is a state the payment step itself runs from: a fresh read decides (transient), never a park."""
    from payments.step_rules import PAYMENT_DONE, PAYMENT_STEP
    from payments.wiring import wiring

    from relay.errors import ConcurrentWrite, DependencyUnavailable

    stale = operation_in(infra, Status.PENDING, version=1)  # what the second copy read
    apply(stale, Status.PAYMENT_PROCESSING)  # the first copy's steps
    moved = wiring().store.get_operation(stale.operation_id)
    assert moved is not None
    apply(moved, Status.RECONCILING)
    store = wiring().store
    plan = plan_transition(stale, Status.PAYMENT_PROCESSING, now=datetime.now(UTC), deadlines=DEADLINES)
    concurrent = PAYMENT_STEP.runs_from - {Status.PENDING, Status.PAYMENT_PROCESSING}
    write = store.transition_write(
        plan,
        on_condition_failed=PAYMENT_STEP.on_stale(
            plan, PAYMENT_DONE | {Status.PAYMENT_PROCESSING}, concurrent
        ),
    )
    with pytest.raises(ConcurrentWrite, match="concurrent delivery") as raised:
        store.apply_one(write)
    assert not isinstance(raised.value, DependencyUnavailable)
    # Without the step's own states, the same failure is what it was before: parked as illegal.
    with pytest.raises(IllegalTransition):
        store.apply_one(
            store.transition_write(
                plan,
                on_condition_failed=PAYMENT_STEP.on_stale(plan, PAYMENT_DONE | {Status.PAYMENT_PROCESSING}),
            )
        )


def test_a_stepadvance_is_one_plain_update_and_its_retry_after_a_lost_reply_carries_on(
    infra: Infrastructure,
) -> None:
    """The step's first transition (``advance``) is a plain conditional UpdateItem, not a one-item
    transaction (half the write units). If botocore sends it again after its reply was lost, the retry
    meets the operation as the first attempt left it: the step carries on from there, never parks."""
    from payments.step_rules import PAYMENT_STEP, advance
    from payments.wiring import wiring

    read = operation_in(infra, Status.PENDING, version=1)
    cause = new_envelope(
        "PaymentRequested", identity=[read.operation_id], ids=read.ids(), payload={}, correlation_id="c-1"
    )
    calls: list[str] = []
    deps = wiring()

    def count(model: Any, **_: Any) -> None:
        calls.append(model.name)

    deps.store.ddb.meta.events.register("before-call.dynamodb", count)
    try:
        moved = advance(deps, cause, read, Status.PAYMENT_PROCESSING, PAYMENT_STEP, now=datetime.now(UTC))
        assert calls == ["UpdateItem"]
        assert moved is not None and moved.status is Status.PAYMENT_PROCESSING and moved.version == 2
        # The same write again: what a retry after a lost reply sends.
        again = advance(deps, cause, read, Status.PAYMENT_PROCESSING, PAYMENT_STEP, now=datetime.now(UTC))
    finally:
        deps.store.ddb.meta.events.unregister("before-call.dynamodb", count)
    assert again is not None and again.status is Status.PAYMENT_PROCESSING and again.version == 2
    stored = wiring().store.get_operation(read.operation_id)
    assert stored is not None and stored.version == 2  # applied once
