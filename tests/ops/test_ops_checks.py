"""ops.checks: after a redrive's first batch, each event's effect is looked for in the record its consumer
leaves (the processed marker, the operation's state, the side-effect record); a drained queue alone
proves nothing, and a consumer nobody knows how to check stops the redrive."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ops.app import DECLARED, App, FunctionInfo, read_declared
from ops.checks import EVIDENCE, Subject, first_batch_problems
from ops.parked import Moved, Received, read_parked
from ops.redrive import Redrive, RedriveOptions
from relay.ddb import serialize_item
from relay.envelope import Envelope
from relay.idempotency import commit_once
from tests.builders import envelope
from tests.handlers.stack_world import assembly
from tests.ops.world import FakeConsumer, park, receive_all

SOURCE = "payments-payment-requests"
DLQ = "payments-payment-requests-dlq"
IDEMPOTENCY = "relay-dev-payments-idempotency"
OPERATIONS = "relay-dev-payments-operations"


def _moved(app: App, event: Envelope) -> Moved:
    """``event`` parked from the payment-requests queue and read back, as the first batch moved it."""
    park(app, SOURCE, event=event)
    (message,) = receive_all(app, app.find_queue(DLQ, dlq=True).url)
    return Moved(read_parked(Received.of(message)), app.find_queue(SOURCE).name, f"new-{uuid.uuid4().hex}")


def _payment(operation_id: str) -> Envelope:
    return envelope("PaymentRequested", ids={"operationId": operation_id}, payload={"amount": "1.00"})


def _operation(app: App, operation_id: str, *history: str) -> None:
    from payments.operations import STEP_OF, Status

    steps = [dict(zip(("step", "status"), STEP_OF[Status(s)], strict=True)) for s in history]
    item = {
        "pk": f"OPERATION#{operation_id}",
        "sk": "OPERATION",
        "status": history[-1],
        "version": len(history),
        "steps": [{**step, "at": "2026-12-01T00:00:00Z"} for step in steps],
    }
    app.client("dynamodb").put_item(TableName=OPERATIONS, Item=serialize_item(item))


def _problems(app: App, *batch: Moved) -> tuple[list[str], list[str]]:
    lines: list[str] = []
    return first_batch_problems(app, batch, out=lines.append), lines


def test_an_event_whose_processed_marker_exists_passes(sandbox_app: App) -> None:
    event = _payment("op-marked")
    moved = _moved(sandbox_app, event)
    _operation(sandbox_app, "op-marked", "PENDING", "PAYMENT_PROCESSING", "PAYMENT_COMPLETED")
    commit_once(event, [], table_name=IDEMPOTENCY, ddb_client=sandbox_app.client("dynamodb"))

    problems, lines = _problems(sandbox_app, moved)

    assert problems == []
    assert any("1 event(s) OK by payments.handlers.payment_worker.handler" in line for line in lines)


def test_a_payment_event_acknowledged_without_effect_while_its_operation_waits_is_a_problem(
    sandbox_app: App,
) -> None:
    moved = _moved(sandbox_app, _payment("op-waiting"))
    _operation(sandbox_app, "op-waiting", "PENDING")

    problems, _ = _problems(sandbox_app, moved)

    (problem,) = problems
    assert "no marker, and operation op-waiting is still PENDING (the payment step did not run)" in problem
    assert "python -m ops operation op-waiting" in problem


def test_a_payment_event_for_an_operation_that_does_not_exist_is_a_problem(sandbox_app: App) -> None:
    problems, _ = _problems(sandbox_app, _moved(sandbox_app, _payment("op-nowhere")))

    assert problems and "operation 'op-nowhere' does not exist" in problems[0]


def test_a_payment_event_without_marker_whose_step_was_already_done_passes(sandbox_app: App) -> None:
    # The sweeper re-drove the step meanwhile: the redriven copy is acknowledged as "already done".
    moved = _moved(sandbox_app, _payment("op-done"))
    _operation(
        sandbox_app, "op-done", "PENDING", "PAYMENT_PROCESSING", "PAYMENT_COMPLETED", "POST_PROCESSING"
    )

    assert _problems(sandbox_app, moved)[0] == []


def test_an_operation_that_entered_a_state_twice_is_a_problem_even_with_a_marker(sandbox_app: App) -> None:
    event = _payment("op-twice")
    moved = _moved(sandbox_app, event)
    _operation(
        sandbox_app, "op-twice", "PENDING", "PAYMENT_COMPLETED", "POST_PROCESSING", "PAYMENT_COMPLETED"
    )
    commit_once(event, [], table_name=IDEMPOTENCY, ddb_client=sandbox_app.client("dynamodb"))

    (problem,) = _problems(sandbox_app, moved)[0]

    assert "operation op-twice entered payment COMPLETED more than once" in problem


def test_a_consumer_without_a_business_check_stops_the_redrive(
    sandbox_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(EVIDENCE, "payments.handlers.payment_worker.handler")

    (problem,) = _problems(sandbox_app, _moved(sandbox_app, _payment("op-unknown")))[0]

    assert (
        "(payments.handlers.payment_worker.handler) has no business check in ops.checks.EVIDENCE" in problem
    )


def test_a_side_effect_check_passes_only_once_the_webhook_call_completed(sandbox_app: App) -> None:
    from orders.notification import SIDE_EFFECT

    from relay.side_effects import run_once

    event = envelope("OrderPaid", ids={"orderId": "ord-1"})
    notifier = FunctionInfo(
        "notifier", "arn", "orders", 30, "orders.handlers.notifier.handler", 256, DECLARED,
        environment={"IDEMPOTENCY_TABLE": IDEMPOTENCY},
    )  # fmt: skip
    subject = Subject(sandbox_app, notifier, event)
    check = EVIDENCE[notifier.handler].check
    assert check is not None

    assert "side effect order-notification" in (check(subject) or "")
    run_once(
        SIDE_EFFECT,
        downstream_key=event.event_id,
        payload={"x": 1},
        call=lambda key: {"status": 200},
        table_name=IDEMPOTENCY,
        ddb_client=sandbox_app.client("dynamodb"),
    )
    assert check(subject) is None


def test_a_redrive_whose_consumer_drains_the_batch_without_effect_stops_after_the_first_batch(
    sandbox_app: App, tmp_path: Path
) -> None:
    # "The queue getting shorter also happens when messages are dropped": this consumer acknowledges
    # everything and does nothing, so the queue drains and nothing is parked again.
    for n in range(3):
        park(sandbox_app, SOURCE, event=_payment(f"op-dropped-{n}"))
        _operation(sandbox_app, f"op-dropped-{n}", "PENDING")
    consumer = FakeConsumer(sandbox_app, sandbox_app.find_queue(SOURCE))
    lines: list[str] = []
    redrive = Redrive(
        sandbox_app,
        sandbox_app.find_queue(DLQ, dlq=True),
        RedriveOptions(
            reason="fixed", audit_file=tmp_path / "audit.jsonl", poll_seconds=1, verify_timeout=30, first=2
        ),
        out=lines.append,
        sleep=consumer.sleep,
        clock=consumer.clock,
    )

    assert redrive.run() == 1
    text = "\n".join(lines)
    assert "the business checks failed after the first batch" in text
    assert "is still PENDING (the payment step did not run)" in text
    assert len(consumer.consumed) == 2  # the rest stayed parked
    assert len(receive_all(sandbox_app, sandbox_app.find_queue(DLQ, dlq=True).url)) == 1


def test_every_sqs_consumer_in_the_templates_has_a_business_check() -> None:
    declared = read_declared(Path(assembly()), "relay-dev")
    handlers = {f.name: f.handler for f in declared.functions}
    consumers = {handlers[m.function_name] for m in declared.mappings if m.is_sqs}

    assert consumers, "no SQS consumer found in the templates"
    assert sorted(consumers - set(EVIDENCE)) == []
    assert sorted(set(EVIDENCE) - consumers) == [], "an entry for a consumer that no longer exists"
