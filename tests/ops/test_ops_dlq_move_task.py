"""The redrive's move-task phase against the sandbox's emulator: a moto server with the SQS patches that
give it StartMessageMoveTask and the queue ages (emulator.patches.message_move_tasks, patch 10, and
emulator.sqs_admin); the unit tests (test_ops_dlq_redrive.py) play them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from emulator import sqs_admin
from emulator.patches import message_move_tasks, sqs_queue_attributes
from emulator.server import free_port
from ops.app import App
from ops.redrive import Redrive, RedriveOptions
from ops.status import SandboxAges
from tests.ops.world import FakeConsumer, park, receive_all


@pytest.fixture
def emulator() -> Iterator[App]:
    removes = [sqs_queue_attributes.install(), message_move_tasks.install(), sqs_admin.install()]
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        app = App("dev", endpoint_url=f"http://127.0.0.1:{port}")
        sqs = app.client("sqs")
        dlq = sqs.create_queue(QueueName=app.name("payments", "payment-requests-dlq"))["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sqs.create_queue(
            QueueName=app.name("payments", "payment-requests"),
            Attributes={
                "VisibilityTimeout": "360",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5}),
            },
        )
        yield app
    finally:
        server.stop()
        for remove in reversed(removes):
            remove()


def test_the_rest_moves_with_the_emulators_move_task_to_the_source_queue(
    emulator: App, tmp_path: Path
) -> None:
    for _ in range(6):
        park(emulator, "payments-payment-requests")
    source = emulator.find_queue("payments-payment-requests", dlq=False)
    consumer = FakeConsumer(emulator, source)
    lines: list[str] = []

    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, 0.2))  # the task moves in the server's own thread
        consumer.sleep(seconds)

    redrive = Redrive(
        emulator,
        emulator.find_queue("payments-payment-requests-dlq", dlq=True),
        RedriveOptions(
            reason="integration",
            first=2,
            rate=50,
            poll_seconds=0.2,
            verify_timeout=10,
            audit_file=tmp_path / "a",
        ),
        out=lines.append,
        sleep=sleep,
        clock=time.monotonic,
        ages=SandboxAges(emulator.endpoint_url or ""),
    )

    assert redrive.run() == 0, "\n".join(lines)

    assert any("move task COMPLETED, 4 moved" in line for line in lines), "\n".join(lines)
    assert receive_all(emulator, emulator.find_queue("payments-payment-requests-dlq").url) == []
    arrived = consumer.consumed + receive_all(emulator, source.url)
    assert len(arrived) == 6
    assert all(m["MessageAttributes"]["relay.errorClass"]["StringValue"] == "InvalidInput" for m in arrived)
