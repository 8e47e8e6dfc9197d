"""The business checks of a redrive's first batch: did each moved event have its effect, and only once?

"The queue getting shorter also happens when messages are dropped": a drained source queue and an
empty DLQ say the consumer acknowledged the batch, not that it did anything. So after the first
batch, ``ops dlq redrive`` asks each event's consumer for the record its effect leaves behind:

- the entity item the step wrote (one write per step, ``relay.entity_events``): the order (orders'
  consumers, shipping), the order's ledger item (loyalty) or the report's verification (reports)
  records the event in ``seen``, else the
  step's effect is in place on it (a twin did it, or a later step replaced ``seen``);
- a processed-event marker (``relay.idempotency``: ``event#<eventId>`` in the consumer's
  ``IDEMPOTENCY_TABLE``), which commits in the same transaction as the effect, so it exists at most
  once and only with the effect (scores; payments, with the operation's state). A payments
  step that acknowledged the event without a marker did so
  because the step was already done; the operation's state says whether that is true
  (``payments.step_rules``), and its step history that no state was entered twice;
- a side effect's Powertools record (``relay.side_effects.record_id``, status COMPLETED): the
  notifiers' webhooks, sent at most once;
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


def _item(subject: Subject, table_variable: str, key: Mapping[str, str]) -> dict[str, Any] | None:
    item: dict[str, Any] | None = (
        subject.app.client("dynamodb")
        .get_item(
            TableName=subject.env(table_variable),
            Key={name: {"S": value} for name, value in key.items()},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return item


def _text(item: Mapping[str, Any] | None, name: str) -> str | None:
    value = (item or {}).get(name) or {}
    return str(value["S"]) if "S" in value else None


Effect = Callable[[Subject, dict[str, Any]], bool]


def _recorded(entity: str, key: Callable[[Subject], tuple[str, Mapping[str, str]]], effect: Effect) -> Check:
    """One write per step (``relay.entity_events``): the entity item records the event it processed
    (``seen``), else the step's effect is in place on it (the step acknowledged the event without a
    write because it already was: a twin did it, or a later step moved the entity on and replaced
    ``seen``)."""

    def check(subject: Subject) -> str | None:
        event = subject.envelope
        table, item_key = key(subject)
        item = _item(subject, table, item_key)
        if item is None:
            return f"{event.event_type} {event.event_id}: the {entity} {dict(item_key)} does not exist"
        if event.event_id in ((item.get("seen") or {}).get("M") or {}):
            return None
        if effect(subject, item):
            return None
        return (
            f"{event.event_type} {event.event_id}: the {entity} {dict(item_key)} does not record it and its "
            "effect is not in place; its consumer acknowledged it without an effect"
        )

    return check


def _order_key(subject: Subject) -> tuple[str, Mapping[str, str]]:
    return "ORDERS_TABLE", {"pk": f"ORDER#{subject.envelope.ids.get('orderId', '')}", "sk": "ORDER"}


def _stock_moved(subject: Subject, order: dict[str, Any]) -> bool:
    status, stock = _text(order, "status"), _text(order, "stock")
    if subject.envelope.event_type == "OrderCancelled":
        return stock == "RELEASED" if stock is not None else status == "CANCELLED"
    # OrderCreated: reserved, or not to be (rejected, cancelled first).
    return stock is not None or status in ("RESERVED", "REJECTED", "CANCELLED")


def _paid(subject: Subject, order: dict[str, Any]) -> bool:
    """PAID by this payment, or the payment kept as an orphan (the order could not take it)."""
    operation_id = subject.envelope.ids.get("operationId", "")
    if _text(order, "status") == "PAID" and _text(order, "paymentOperationId") == operation_id:
        return True
    order_id = subject.envelope.ids.get("orderId", "")
    orphan = {"pk": f"ORDER#{order_id}", "sk": f"PAYMENT#{operation_id}"}
    return _item(subject, "ORDERS_TABLE", orphan) is not None


def _no_longer_open(subject: Subject, order: dict[str, Any]) -> bool:
    return _text(order, "status") not in ("CREATED", "RESERVED")


def _shipped_or_not_to_be(subject: Subject, order: dict[str, Any]) -> bool:
    return "shipment" in order or _text(order, "status") != "PAID"


def _verification_key(subject: Subject) -> tuple[str, Mapping[str, str]]:
    event = subject.envelope
    report_id = str((event.payload or {}).get("reportId") or event.ids.get("reportId", ""))
    return "VERIFICATIONS_TABLE", {"pk": f"REPORT#{report_id}", "sk": "VERIFICATION"}


def _ledger_key(subject: Subject) -> tuple[str, Mapping[str, str]]:
    event = subject.envelope
    customer_id = str((event.payload or {}).get("customerId", ""))
    return "POINTS_TABLE", {"pk": f"CUSTOMER#{customer_id}", "sk": f"ORDER#{event.ids.get('orderId', '')}"}


def _points_moved(subject: Subject, entry: dict[str, Any]) -> bool:
    return ("reversedAt" if subject.envelope.event_type == "OrderRejected" else "accruedAt") in entry


def _points(subject: Subject) -> str | None:
    """The order's ledger item records the event or its accrual (reversal); an OrderRejected of an order
    that was never paid moves no points."""
    event = subject.envelope
    if event.event_type == "OrderRejected" and not (event.payload or {}).get("paymentOperationId"):
        return None
    return _recorded("ledger item", _ledger_key, _points_moved)(subject)


MARKER = "the processed marker (relay.idempotency)"
ORDER_RECORD = "the order records the event (seen)"
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
    "orders.handlers.inventory.handler": Evidence(
        ORDER_RECORD + ", else its stock reserved or released",
        _recorded("order", _order_key, _stock_moved),
    ),
    "orders.handlers.paid_orders.handler": Evidence(
        ORDER_RECORD + ", else PAID by this payment or the payment kept as an orphan",
        _recorded("order", _order_key, _paid),
    ),
    "orders.handlers.failed_payments.handler": Evidence(
        ORDER_RECORD + ", else the order no longer CREATED or RESERVED",
        _recorded("order", _order_key, _no_longer_open),
    ),
    "orders.handlers.notifier.handler": Evidence(
        "the notification's side-effect record", _side_effect("orders.notification", lambda e: e.event_id)
    ),
    "orders.handlers.shipping.handler": Evidence(
        ORDER_RECORD + ", else the order's shipment recorded or the order not PAID",
        _recorded("order", _order_key, _shipped_or_not_to_be),
    ),
    "loyalty.handlers.points.handler": Evidence(
        "the order's ledger item records the event, else its accrual (reversal); an unpaid order's "
        "rejection: none",
        _points,
    ),
    "reports.handlers.verifier.handler": Evidence(
        "the report's verification record (written once: any status is its final outcome)",
        _recorded("verification record", _verification_key, lambda _s, _record: True),
    ),
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
