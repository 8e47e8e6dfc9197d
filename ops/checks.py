"""The business checks of a redrive's first batch: did each moved event have its effect, and only once?

"The queue getting shorter also happens when messages are dropped": a drained source queue and an
empty DLQ say the consumer acknowledged the batch, not that it did anything. So after the first
batch, ``ops dlq redrive`` asks each event's consumer for the record its effect leaves behind:

- a processed-event marker (``relay.idempotency``: ``event#<eventId>`` in the consumer's
  ``IDEMPOTENCY_TABLE``), which commits in the same transaction as the effect, so it exists at most
  once and only with the effect. A payments step that acknowledged the event without a marker did so
  because the step was already done; the operation's state says whether that is true
  (``payments.step_rules``), and its step history that no state was entered twice;
- a side effect's Powertools record (``relay.side_effects.record_id``, status COMPLETED): the
  notifiers' webhooks, sent at most once;
- the archived object (orders' analytics: one S3 object per eventId);
- nothing, for a consumer whose work is not per event (the payments sweeper), said so.

Which record each consumer leaves is in ``EVIDENCE``, keyed by the function's handler; a test holds
every SQS consumer in the templates to having an entry, so a new consumer cannot be redriven
unchecked. Checks read with ConsistentRead / HeadObject and never receive anything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ops.app import App, FunctionInfo
    from ops.parked import Moved
    from relay.envelope import Envelope


@dataclass(frozen=True)
class Subject:
    """One moved event, as its consumer sees it."""

    app: App
    function: FunctionInfo
    envelope: Envelope

    def env(self, name: str) -> str:
        value = self.function.environment.get(name)
        if not value:
            raise LookupError(f"{self.function.name} has no {name} in its environment")
        return value


Check = Callable[[Subject], str | None]  # a problem, or None: the effect is there, once


@dataclass(frozen=True)
class Evidence:
    what: str
    check: Check | None  # None: nothing per event to check (``what`` says why)


def _get(subject: Subject, table: str, key: str) -> dict[str, Any] | None:
    item = subject.app.client("dynamodb").get_item(
        TableName=subject.env(table), Key={"id": {"S": key}}, ConsistentRead=True
    )
    found: dict[str, Any] | None = item.get("Item")
    return found


def _marker() -> Check:
    def check(subject: Subject) -> str | None:
        from relay.idempotency import marker_id

        if _get(subject, "IDEMPOTENCY_TABLE", marker_id(subject.envelope.event_id)) is not None:
            return None
        return (
            f"{subject.envelope.event_type} {subject.envelope.event_id}: no processed marker in "
            f"{subject.env('IDEMPOTENCY_TABLE')}; its consumer acknowledged it without an effect"
        )

    return check


def _entered_twice(operation_id: str, history: Sequence[Mapping[str, Any] | str]) -> str | None:
    # The operation's state graph has no cycle (retries stay in their state), so each history entry
    # (step, step status: ``payments.operations.STEP_OF``) appears once; a repeat is a step applied twice.
    entered = Counter(
        f"{entry.get('step')} {entry.get('status')}"
        if isinstance(entry, Mapping)
        else entry.rsplit(" ", 1)[0]
        for entry in history
    )
    twice = sorted(entry for entry, n in entered.items() if n > 1)
    if twice:
        return f"operation {operation_id} entered {', '.join(twice)} more than once: {list(history)}"
    return None


def _payment_marker(rule_name: str) -> Check:
    """The marker, else the operation in one of the step's done states (the step was already done:
    acknowledged without effect); either way its history enters no (step, status) twice."""

    def check(subject: Subject) -> str | None:
        from payments import step_rules as steps

        from ops.lookup import operation_rows
        from relay.idempotency import marker_id

        rule = getattr(steps, rule_name)
        event = subject.envelope
        marked = _get(subject, "IDEMPOTENCY_TABLE", marker_id(event.event_id)) is not None
        operation_id = event.ids.get("operationId", "")
        item = operation_rows(subject.app, operation_id)[0] if operation_id else None
        if item is None:
            if marked:
                return None
            return (
                f"{event.event_type} {event.event_id}: no marker, and operation {operation_id!r} "
                "does not exist"
            )
        # One write per step: the operation records the event it processed last (``seen``).
        marked = marked or event.event_id in (item.get("seen") or {})
        status = str(item["status"])
        if not marked and status not in {str(s) for s in rule.done}:
            return (
                f"{event.event_type} {event.event_id}: no marker, and operation {operation_id} is still "
                f"{status} (the {rule.step} did not run); see python -m ops operation {operation_id}"
            )
        return _entered_twice(operation_id, item.get("steps") or [])

    return check


def _side_effect(module: str, key_of: Callable[[Envelope], str]) -> Check:
    def check(subject: Subject) -> str | None:
        import importlib

        from relay.side_effects import record_id

        name = importlib.import_module(module).SIDE_EFFECT
        key = key_of(subject.envelope)
        item = _get(subject, "IDEMPOTENCY_TABLE", record_id(name, key))
        status = item.get("status", {}).get("S") if item else None
        if status == "COMPLETED":
            return None
        return (
            f"{subject.envelope.event_type} {subject.envelope.event_id}: side effect {name} ({key}) is "
            f"{status or 'not recorded'} in {subject.env('IDEMPOTENCY_TABLE')}"
        )

    return check


def _archived(subject: Subject) -> str | None:
    from orders.archive import archive_key

    bucket, key = subject.env("ANALYTICS_BUCKET"), archive_key(subject.envelope)
    try:
        subject.app.client("s3").head_object(Bucket=bucket, Key=key)
    except Exception as exc:  # ClientError 404 (or 403 without ListBucket): not there to be seen
        event = subject.envelope
        return f"{event.event_type} {event.event_id}: s3://{bucket}/{key} is missing ({exc})"
    return None


def _notice(subject: Subject) -> str | None:
    """A notice is owed only to an operation with a callback URL."""
    from ops.lookup import operation_rows

    item = operation_rows(subject.app, subject.envelope.ids.get("operationId", ""))[0]
    if item is not None and not item.get("callbackUrl"):
        return None
    return _side_effect("payments.notices", lambda e: f"{e.ids.get('operationId', '')}:notice")(subject)


def _report_key(envelope: Envelope) -> str:
    from reports.notification import notification_key

    return notification_key(envelope.ids.get("reportId", ""))


def _shipment(subject: Subject) -> str | None:
    """The marker, else the order holds its shipment (recorded by a twin) or is not PAID (a rejected
    order is acknowledged without a shipment)."""
    if _marker()(subject) is None:
        return None
    event = subject.envelope
    order_id = event.ids.get("orderId", "")
    item = (
        subject.app.client("dynamodb")
        .get_item(
            TableName=subject.env("ORDERS_TABLE"),
            Key={"pk": {"S": f"ORDER#{order_id}"}, "sk": {"S": "ORDER"}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    if item is None:
        return f"{event.event_type} {event.event_id}: no marker, and order {order_id!r} does not exist"
    if "shipment" in item or item.get("status", {}).get("S") != "PAID":
        return None
    return (
        f"{event.event_type} {event.event_id}: no marker, and order {order_id} is PAID without a shipment; "
        f"see python -m ops order {order_id}"
    )


def _points(subject: Subject) -> str | None:
    """The marker, unless the event is an OrderRejected of an order that was never paid (no points)."""
    event = subject.envelope
    if event.event_type == "OrderRejected" and not (event.payload or {}).get("paymentOperationId"):
        return None
    return _marker()(subject)


MARKER = "the processed marker (relay.idempotency)"
EVIDENCE: dict[str, Evidence] = {
    "payments.handlers.payment_worker.handler": Evidence(
        MARKER + ", else the operation past the payment step", _payment_marker("PAYMENT_STEP")
    ),
    "payments.handlers.post_processor.handler": Evidence(
        MARKER + ", else the operation past post-processing", _payment_marker("POST_PROCESSING_STEP")
    ),
    "payments.handlers.invoice_worker.handler": Evidence(
        MARKER + ", else the operation past the invoice step", _payment_marker("INVOICE_STEP")
    ),
    "payments.handlers.notice_sender.handler": Evidence(
        "the completion notice's side-effect record (when the operation has a callback URL)", _notice
    ),
    "payments.handlers.sweeper.handler": Evidence(
        "none: a sweep acts on whatever is due then, not on one event; ops status shows the backlog", None
    ),
    "orders.handlers.inventory.handler": Evidence(MARKER, _marker()),
    "orders.handlers.paid_orders.handler": Evidence(MARKER, _marker()),
    "orders.handlers.failed_payments.handler": Evidence(MARKER, _marker()),
    "orders.handlers.notifier.handler": Evidence(
        "the notification's side-effect record", _side_effect("orders.notification", lambda e: e.event_id)
    ),
    "orders.handlers.analytics.handler": Evidence("the archived object (one per eventId)", _archived),
    "orders.handlers.shipping.handler": Evidence(
        MARKER + ", else the order's shipment recorded or the order not PAID", _shipment
    ),
    "loyalty.handlers.points.handler": Evidence(MARKER + " (an unpaid order's rejection: none)", _points),
    "reports.handlers.verifier.handler": Evidence(MARKER, _marker()),
    "reports.handlers.notifier.handler": Evidence(
        "the report-ready side-effect record", _side_effect("reports.notification", _report_key)
    ),
    "scores.handlers.snapshot_worker.handler": Evidence(MARKER, _marker()),
}


def first_batch_problems(app: App, batch: Sequence[Moved], out: Callable[[str], None] = print) -> list[str]:
    """Each moved event checked against the record its destination queue's consumer leaves. A consumer
    with no entry in ``EVIDENCE`` is a problem: it cannot be verified, so the redrive stops."""
    from relay.errors import InvalidInput
    from relay.unwrap import envelope_from_sqs_record

    functions = app.functions_by_name()
    consumers: dict[str, list[FunctionInfo]] = {}
    for mapping in app.event_source_mappings():
        if mapping.is_sqs and mapping.function_name in functions:
            queue = mapping.source_arn.rsplit(":", 1)[-1]
            consumers.setdefault(queue, []).append(functions[mapping.function_name])
    problems: list[str] = []
    checked: Counter[str] = Counter()
    for moved in batch:
        record = {"messageId": moved.new_message_id, "body": moved.parked.body, "attributes": {}}
        try:
            envelope = envelope_from_sqs_record(record)
        except InvalidInput:
            continue  # not an envelope: its consumer parks it again, which the verify already caught
        found = consumers.get(moved.destination)
        if not found:
            out(
                f"  business checks: no consumer of {moved.destination} was found; "
                f"{envelope.event_id} unchecked"
            )
            continue
        for function in found:
            evidence = EVIDENCE.get(function.handler)
            if evidence is None:
                problems.append(
                    f"{function.name} ({function.handler}) has no business check in ops.checks.EVIDENCE: "
                    "its effects cannot be verified"
                )
                continue
            if evidence.check is None:
                checked[f"{function.handler}: {evidence.what}"] += 1
                continue
            try:
                problem = evidence.check(Subject(app, function, envelope))
            except LookupError as exc:
                problem = str(exc)
            if problem:
                problems.append(problem)
            else:
                checked[f"{function.handler}: {evidence.what}"] += 1
    for what, n in sorted(checked.items()):
        out(f"  business checks: {n} event(s) OK by {what}")
    return problems
