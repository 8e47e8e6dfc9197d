"""ops dlq redrive: a dry run moves nothing; a verified first batch, then SQS's move task; stops on parks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ops.__main__ import main
from ops.app import App
from ops.redrive import Redrive, RedriveOptions
from relay.errors import UnknownVersion
from tests.builders import envelope
from tests.ops.world import FakeConsumer, FakeMoveTask, park, receive_all

SOURCE = "payments-payment-requests"
DLQ = "payments-payment-requests-dlq"


def _park(
    app: App, n: int, *, error: BaseException | None = None, event_type: str = "PaymentRequested"
) -> list[str]:
    ids = []
    for _ in range(n):
        event = park(app, SOURCE, error=error, event=envelope(event_type, payload={"amount": "1.00"}))
        assert event is not None
        ids.append(event.event_id)
    return ids


def _redrive(app: App, audit_file: Path, consumer: FakeConsumer, lines: list[str], **options: Any) -> Redrive:
    return Redrive(
        app,
        app.find_queue(DLQ, dlq=True),
        RedriveOptions(
            reason="fixed the amount parser (PR 123)",
            audit_file=audit_file,
            poll_seconds=1,
            verify_timeout=30,
            **options,
        ),
        out=lines.append,
        sleep=consumer.sleep,
        clock=consumer.clock,
    )


def _audit(audit_file: Path) -> dict[str, Any]:
    (line,) = audit_file.read_text().splitlines()
    record: dict[str, Any] = json.loads(line)
    return record


def _depth(app: App, short: str) -> int:
    return len(receive_all(app, app.find_queue(short).url))


def test_a_dry_run_counts_by_error_class_and_event_type_and_moves_nothing(
    payments: App, audit_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _park(payments, 3)
    _park(
        payments, 2, error=UnknownVersion("eventVersion 2.0 is not supported"), event_type="PaymentRedriveDue"
    )

    code = main(
        [
            "dlq",
            "redrive",
            "payment-requests-dlq",
            "--dry-run",
            "--yes",
            "--reason",
            "looking first",
            "--audit-file",
            str(audit_file),
        ]
    )

    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith("WARNING: a dry run RECEIVES EVERY message")
    assert "read 5 of ~5 message(s); 5 would move" in out
    assert "     3  InvalidInput" in out and "     2  UnknownVersion" in out
    assert "     3  PaymentRequested" in out and "     2  PaymentRedriveDue" in out
    assert "     5  payments-payment-requests" in out
    assert _depth(payments, SOURCE) == 0
    assert _depth(payments, DLQ) == 5  # all of them released, visible again
    record = _audit(audit_file)
    assert record["outcome"] == "dry-run" and record["reason"] == "looking first"
    assert record["who"] == "arn:aws:sts::123456789012:user/moto"
    assert record["counts"]["byErrorClass"] == {"InvalidInput": 3, "UnknownVersion": 2}
    assert record["dlq"] == "relay-dev-payments-payment-requests-dlq"
    assert record["destination"] == "relay-dev-payments-payment-requests"


def test_a_reason_is_required(payments: App) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["dlq", "redrive", "payment-requests-dlq", "--dry-run", "--yes"])
    assert usage.value.code == 2


def test_the_first_batch_is_verified_then_the_move_task_moves_the_rest(
    payments: App, audit_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    event_ids = _park(payments, 8)
    source = payments.find_queue(SOURCE)
    consumer = FakeConsumer(payments, source)
    task = FakeMoveTask(payments, per_poll=2).install(monkeypatch)
    checked: list[list[str]] = []
    lines: list[str] = []
    redrive = _redrive(payments, audit_file, consumer, lines, first=5, rate=10)
    redrive.business = lambda app, batch: checked.append([m.parked.event_id for m in batch]) or []

    assert redrive.run() == 0, "\n".join(lines)

    assert _depth(payments, DLQ) == 0
    assert len(consumer.consumed) == 8
    first_batch = consumer.consumed[:5]
    # Redriven with the original body and the reason attributes (a park after it keeps firstFailureAt).
    assert all("relay.errorClass" in m["MessageAttributes"] for m in first_batch)
    assert sorted(
        json.loads(json.loads(m["Body"])["Message"])["eventId"] for m in consumer.consumed
    ) == sorted(event_ids)
    assert len(checked) == 1 and len(checked[0]) == 5 and set(checked[0]) <= set(event_ids)
    (started,) = task.started
    assert started == {
        "SourceArn": payments.find_queue(DLQ).arn,
        "DestinationArn": source.arn,
        "MaxNumberOfMessagesPerSecond": 10,
    }
    assert task.cancelled == []
    assert any("first batch OK: 5 consumed, none parked again" in line for line in lines)
    record = _audit(audit_file)
    assert record["outcome"] == "ok"
    assert record["counts"]["movedByHand"] == 5 and record["counts"]["movedByMoveTask"] == 3
    assert record["counts"]["inDlqAtStart"] == 8


def test_a_first_batch_parked_again_stops_the_redrive_before_the_move_task(
    payments: App, audit_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _park(payments, 7)
    consumer = FakeConsumer(payments, payments.find_queue(SOURCE), fails=lambda record: True)
    task = FakeMoveTask(payments).install(monkeypatch)
    lines: list[str] = []

    assert _redrive(payments, audit_file, consumer, lines, first=2).run() == 1

    assert task.started == []
    assert consumer.parked_again == 2
    assert any("2 of the first batch's 2 message(s) were parked again" in line for line in lines)
    assert any("still broken" in line for line in lines)  # the new reason
    assert _depth(payments, DLQ) == 7
    assert _audit(audit_file)["outcome"] == "stopped"


def test_a_first_batch_nobody_consumes_stops_at_the_verify_timeout(
    payments: App, audit_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _park(payments, 3)
    consumer = FakeConsumer(payments, payments.find_queue(SOURCE))
    consumer.active = False  # the mapping is disabled, or the function is down
    task = FakeMoveTask(payments).install(monkeypatch)
    lines: list[str] = []

    assert _redrive(payments, audit_file, consumer, lines, first=1).run() == 1

    assert task.started == []
    assert consumer.now >= 30
    stop = next(line for line in lines if line.startswith("STOPPED"))
    assert "not consumed within 30 s" in stop and "payments-payment-requests holds 1 visible" in stop


def test_new_parks_while_the_move_task_runs_cancel_it(
    payments: App, audit_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _park(payments, 10)
    consumer = FakeConsumer(payments, payments.find_queue(SOURCE))
    task = FakeMoveTask(payments, per_poll=1).install(monkeypatch)
    # Every poll, something is parked again: the DLQ holds more than what is left to move.
    task.on_poll = lambda: _park(payments, 2) and None
    lines: list[str] = []

    assert _redrive(payments, audit_file, consumer, lines, first=1).run() == 1

    assert task.cancelled == ["task-handle-1"]
    assert any("were parked again while the move task ran; cancelled it" in line for line in lines)
    assert _audit(audit_file)["outcome"] == "stopped"


def test_ctrl_c_cancels_the_move_task(
    payments: App, audit_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _park(payments, 4)
    consumer = FakeConsumer(payments, payments.find_queue(SOURCE))
    task = FakeMoveTask(payments, per_poll=1).install(monkeypatch)
    lines: list[str] = []
    redrive = _redrive(payments, audit_file, consumer, lines, first=1)

    def interrupted_once_moving(seconds: float) -> None:
        if task.started:
            raise KeyboardInterrupt
        consumer.sleep(seconds)

    redrive.sleep = interrupted_once_moving

    assert redrive.run() == 1
    assert task.cancelled == ["task-handle-1"]
    assert _audit(audit_file)["outcome"] == "interrupted"


def test_a_filtered_redrive_moves_only_the_matching_messages_one_by_one(
    payments: App, audit_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _park(payments, 3)  # InvalidInput
    wanted = _park(payments, 3, error=UnknownVersion("eventVersion 2.0"), event_type="PaymentRedriveDue")
    consumer = FakeConsumer(payments, payments.find_queue(SOURCE))
    task = FakeMoveTask(payments).install(monkeypatch)
    lines: list[str] = []

    code = _redrive(
        payments, audit_file, consumer, lines, first=1, filters={"errorClass": "UnknownVersion"}
    ).run()

    assert code == 0, "\n".join(lines)
    assert task.started == []  # the move task would move every message
    assert any("cannot use SQS's move task" in line for line in lines)
    # The first one the consumer took while it was verified; the others are in the source queue.
    arrived = consumer.consumed + receive_all(payments, payments.find_queue(SOURCE).url)
    moved = sorted(json.loads(json.loads(m["Body"])["Message"])["eventId"] for m in arrived)
    assert moved == sorted(wanted)
    left = receive_all(payments, payments.find_queue(DLQ).url)
    assert [m["MessageAttributes"]["relay.errorClass"]["StringValue"] for m in left] == ["InvalidInput"] * 3


def test_where_the_endpoint_has_no_move_task_the_rest_is_refused_with_what_to_do(
    payments: App, audit_file: Path
) -> None:
    # moto implements no StartMessageMoveTask (the sandbox gets one from another change): the verified
    # first batch stays moved, the rest is left in the DLQ, and the operator is told how to go on.
    _park(payments, 3)
    consumer = FakeConsumer(payments, payments.find_queue(SOURCE))
    lines: list[str] = []

    assert _redrive(payments, audit_file, consumer, lines, first=1).run() == 1

    assert len(consumer.consumed) == 1 and _depth(payments, DLQ) == 2
    stop = next(line for line in lines if line.startswith("STOPPED"))
    assert "StartMessageMoveTask failed" in stop and "--filter" in stop


def test_an_aws_error_mid_redrive_is_audited_as_an_error_not_ok(
    payments: App, audit_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError

    _park(payments, 2)
    consumer = FakeConsumer(payments, payments.find_queue(SOURCE))

    def refused(**request: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no sqs:SendMessage"}}, "SendMessage")

    monkeypatch.setattr(payments.client("sqs"), "send_message", refused)

    with pytest.raises(ClientError):
        _redrive(payments, audit_file, consumer, [], first=1).run()
    record = _audit(audit_file)
    assert record["outcome"] == "error" and "AccessDenied" in record["detail"]
    assert _depth(payments, DLQ) == 2  # nothing deleted that was not sent


def test_a_bus_rules_target_dlq_redrives_to_the_queue_eventbridge_failed_to_deliver_to(
    audit_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """EventBridge's undeliverable events carry no redrive source, only TARGET_ARN: that queue is where
    they go back to (never a queue outside the stage)."""
    from moto import mock_aws

    from tests.builders import eventbridge_wrapped
    from tests.handlers.stack_world import provision

    with mock_aws():
        provision("orders")
        app = App("dev", "us-east-1")
        target = app.find_queue("orders-shipping", dlq=False)
        dlq = app.find_queue("orders-shipping-target-dlq", dlq=True)
        body = eventbridge_wrapped(envelope("OrderPaid"), detail_type="OrderPaid", source="relay.orders")
        for arn in (target.arn, "arn:aws:sqs:us-east-1:999999999999:elsewhere"):
            app.client("sqs").send_message(
                QueueUrl=dlq.url,
                MessageBody=body,
                MessageAttributes={
                    "TARGET_ARN": {"DataType": "String", "StringValue": arn},
                    "ERROR_CODE": {"DataType": "String", "StringValue": "AccessDenied"},
                },
            )

        code = main(
            [
                "dlq",
                "redrive",
                "orders-shipping-target-dlq",
                "--dry-run",
                "--yes",
                "--reason",
                "policy restored",
                "--audit-file",
                str(audit_file),
            ]
        )

    assert code == 0
    out = capsys.readouterr().out
    assert "     1  orders-shipping\n" in out
    assert "     1  (nowhere: no source queue)" in out
