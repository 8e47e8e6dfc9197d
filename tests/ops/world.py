"""The ops CLI's worlds (fixtures in conftest.py): a stage in moto, built the way it is deployed.

``payments``: the payments stack (and core) provisioned from the synthesized templates
(``tests.handlers.stack_world``), as the handler tests get theirs: the queues, DLQs, redrive policies,
topic, subscriptions and alarms ``cdk deploy`` creates. Functions, mappings and queue policies are not
in it (the provisioner runs those outside moto, as the sandbox does), so ``sandbox_app`` reads them from
the same assembly, as ``ops`` does against the sandbox.

``deployed``: a small stage as an AWS account holds it, built with boto3 under the app's naming: the
payment-requests queue and DLQ subscribed (enveloped) to payment-events, orders' analytics queue (raw),
each with its queue policy, its function, its event source mapping and its DLQ alarm. No message is
sent in it: moto's Lambda would try to run the function (it needs Docker).

Helpers: ``park`` parks a message with the kernel's own ``relay.parking.park``; ``FakeConsumer`` plays
the event source mapping when a test's ``sleep`` is called; ``FakeMoveTask`` plays SQS's move task,
which moto does not implement.
"""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from moto import mock_aws

from ops import parked as parked_module
from ops.app import App, QueueInfo
from relay.envelope import Envelope
from relay.errors import InvalidInput
from relay.parking import park as kernel_park
from tests.builders import envelope, record_from_received, sns_wrapped, sqs_record
from tests.handlers.stack_world import assembly, provision

REGION = "us-east-1"
ACCOUNT = "123456789012"


@pytest.fixture(autouse=True)
def _no_long_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    # moto answers a receive at once and completely; its long poll would only wait.
    monkeypatch.setattr(parked_module, "RECEIVE_WAIT_SECONDS", 0)


@pytest.fixture
def audit_file(tmp_path: Any) -> Any:
    return tmp_path / "audit.jsonl"


@pytest.fixture
def payments() -> Iterator[App]:
    """The payments stack from its template, seen as on AWS (no templates behind the App)."""
    with mock_aws():
        provision("payments")
        yield App("dev", REGION)


@pytest.fixture
def sandbox_app() -> Iterator[App]:
    """The payments stack from its template, seen as ops sees the sandbox: what moto lacks is read from
    the synthesized assembly the world was provisioned from."""
    with mock_aws():
        provision("payments")
        yield App("dev", REGION, templates=assembly())


# -- a deployed stage, by hand ----------------------------------------------------------------------


@dataclass
class Deployed:
    app: App
    topic_arns: dict[str, str] = field(default_factory=dict)  # short -> arn
    queues: dict[str, str] = field(default_factory=dict)  # short -> url
    subscriptions: dict[str, str] = field(default_factory=dict)  # queue short -> subscription arn
    mappings: dict[str, str] = field(default_factory=dict)  # queue short -> uuid

    def url(self, short: str) -> str:
        return self.queues[short]


def _queue_policy(queue_arn: str, topic_arn: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Deny",
                    "Principal": {"AWS": "*"},
                    "Action": "sqs:*",
                    "Resource": queue_arn,
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                },
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "sns.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                    "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
                },
            ],
        }
    )


@pytest.fixture
def deployed() -> Iterator[Deployed]:
    with mock_aws():
        app = App("dev", REGION)
        world = Deployed(app)
        sqs, sns, lam, cw, iam = (app.client(s) for s in ("sqs", "sns", "lambda", "cloudwatch", "iam"))
        role = iam.create_role(
            RoleName="relay-dev-test-role",
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )["Role"]["Arn"]
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("handler.py", "def handler(event, context):\n    return {}\n")
        for service, topic, queue, raw, timeout in (
            ("payments", "payment-events", "payment-requests", False, 60),
            ("orders", "order-events", "analytics", True, 30),
        ):
            topic_arn = sns.create_topic(Name=app.name(service, topic))["TopicArn"]
            world.topic_arns[f"{service}-{topic}"] = topic_arn
            undeliverable = sqs.create_queue(QueueName=app.name(service, f"{topic}-undeliverable"))[
                "QueueUrl"
            ]
            undeliverable_arn = _arn(app.name(service, f"{topic}-undeliverable"))
            dlq_name = app.name(service, f"{queue}-dlq")
            world.queues[f"{service}-{queue}-dlq"] = sqs.create_queue(QueueName=dlq_name)["QueueUrl"]
            name = app.name(service, queue)
            url = sqs.create_queue(
                QueueName=name,
                Attributes={
                    "VisibilityTimeout": str(6 * timeout),
                    "SqsManagedSseEnabled": "true",
                    "RedrivePolicy": json.dumps(
                        {"deadLetterTargetArn": _arn(dlq_name), "maxReceiveCount": 5}
                    ),
                    "Policy": _queue_policy(_arn(name), topic_arn),
                },
            )["QueueUrl"]
            world.queues[f"{service}-{queue}"] = url
            world.queues[f"{service}-{topic}-undeliverable"] = undeliverable
            world.subscriptions[f"{service}-{queue}"] = sns.subscribe(
                TopicArn=topic_arn,
                Protocol="sqs",
                Endpoint=_arn(name),
                Attributes={
                    "RawMessageDelivery": str(raw).lower(),
                    "RedrivePolicy": json.dumps({"deadLetterTargetArn": undeliverable_arn}),
                },
                ReturnSubscriptionArn=True,
            )["SubscriptionArn"]
            function = app.name(service, f"{queue.title().replace('-', '')}Function-AbC123")
            lam.create_function(
                FunctionName=function,
                Runtime="python3.13",
                Role=role,
                Handler="handler.handler",
                Code={"ZipFile": code.getvalue()},
                Timeout=timeout,
            )
            world.mappings[f"{service}-{queue}"] = lam.create_event_source_mapping(
                EventSourceArn=_arn(name),
                FunctionName=function,
                BatchSize=10,
                FunctionResponseTypes=["ReportBatchItemFailures"],
            )["UUID"]
            cw.put_metric_alarm(
                AlarmName=f"{app.prefix}-{service}-Alarms{queue.replace('-', '')}DlqNotEmpty-XYZ",
                MetricName="ApproximateNumberOfMessagesVisible",
                Namespace="AWS/SQS",
                Dimensions=[{"Name": "QueueName", "Value": dlq_name}],
                Statistic="Maximum",
                Period=60,
                EvaluationPeriods=1,
                Threshold=0,
                ComparisonOperator="GreaterThanThreshold",
                AlarmDescription=f"{queue}: messages are parked in the DLQ.",
            )
        yield world


def _arn(name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


# -- parking, consuming, moving ----------------------------------------------------------------------


def park(
    app: App,
    source: str,
    *,
    error: BaseException | None = None,
    event: Envelope | None = None,
    body: str | None = None,
) -> Envelope | None:
    """Park one message of ``source`` (a queue's short name) the way the kernel does: the SNS-wrapped
    envelope (or ``body``), with the reason attributes, sent to the queue's DLQ."""
    queue = app.find_queue(source, dlq=False)
    assert queue.dlq is not None
    if body is None:
        event = event or envelope(
            "PaymentRequested",
            ids={"operationId": f"op-{uuid.uuid4().hex[:8]}"},
            payload={"amount": "12.50", "payer": "acct-secret-payer"},
        )
        body = sns_wrapped(event)
    record = sqs_record(body, queue=queue.name)
    kernel_park(
        record,
        error or InvalidInput("amount: Input should be a valid decimal"),
        sqs_client=app.client("sqs"),
        dlq_url=queue.dlq.url,
        source_queue_url=queue.url,
    )
    return event


def receive_all(app: App, url: str) -> list[dict[str, Any]]:
    """Everything visible in ``url`` (held for 30 s)."""
    sqs = app.client("sqs")
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        VisibilityTimeout=30,
        MessageSystemAttributeNames=["All"],
        MessageAttributeNames=["All"],
    ).get("Messages", []):
        messages.extend(batch)
    return messages


class FakeConsumer:
    """Plays the event source mapping of ``queue`` whenever the redrive sleeps: receives what is there
    and acknowledges it, or parks it again (the kernel's park, from the received record) when
    ``fails(record)``. ``now`` is the fake clock the redrive reads; each sleep advances it."""

    def __init__(self, app: App, queue: QueueInfo, *, fails: Callable[[dict[str, Any]], bool] | None = None):
        self.app = app
        self.queue = queue
        self.fails = fails or (lambda record: False)
        self.now = 0.0
        self.consumed: list[dict[str, Any]] = []
        self.parked_again = 0
        self.active = True

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if not self.active:
            return
        sqs = self.app.client("sqs")
        for message in receive_all(self.app, self.queue.url):
            record = record_from_received(message, self.queue.arn)
            self.consumed.append(message)
            if self.fails(record):
                assert self.queue.dlq is not None
                kernel_park(
                    record,
                    InvalidInput("still broken"),
                    sqs_client=sqs,
                    dlq_url=self.queue.dlq.url,
                    source_queue_url=self.queue.url,
                )
                self.parked_again += 1
            sqs.delete_message(QueueUrl=self.queue.url, ReceiptHandle=message["ReceiptHandle"])


class FakeMoveTask:
    """SQS's message move task (moto has none): each ListMessageMoveTasks moves up to ``per_poll``
    messages from the DLQ to the destination (body and attributes, as SQS does) until it is empty."""

    def __init__(self, app: App, *, per_poll: int = 2) -> None:
        self.app = app
        self.per_poll = per_poll
        self.started: list[dict[str, Any]] = []
        self.cancelled: list[str] = []
        self.moved = 0
        self.status = "RUNNING"
        self.on_poll: Callable[[], None] = lambda: None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeMoveTask:
        sqs = self.app.client("sqs")
        monkeypatch.setattr(sqs, "start_message_move_task", self.start, raising=False)
        monkeypatch.setattr(sqs, "list_message_move_tasks", self.list, raising=False)
        monkeypatch.setattr(sqs, "cancel_message_move_task", self.cancel, raising=False)
        return self

    def start(self, **request: Any) -> dict[str, Any]:
        self.started.append(request)
        return {"TaskHandle": "task-handle-1"}

    def list(self, **request: Any) -> dict[str, Any]:
        (task,) = self.started
        sqs = self.app.client("sqs")
        source = sqs.get_queue_url(QueueName=task["SourceArn"].rsplit(":", 1)[-1])["QueueUrl"]
        destination = sqs.get_queue_url(QueueName=task["DestinationArn"].rsplit(":", 1)[-1])["QueueUrl"]
        if self.status == "RUNNING":
            batch = sqs.receive_message(
                QueueUrl=source, MaxNumberOfMessages=self.per_poll, MessageAttributeNames=["All"]
            ).get("Messages", [])
            for message in batch:
                attributes = {
                    k: {kk: vv for kk, vv in v.items() if kk in ("DataType", "StringValue", "BinaryValue")}
                    for k, v in (message.get("MessageAttributes") or {}).items()
                }
                sqs.send_message(
                    QueueUrl=destination, MessageBody=message["Body"], MessageAttributes=attributes
                )
                sqs.delete_message(QueueUrl=source, ReceiptHandle=message["ReceiptHandle"])
                self.moved += 1
            if not batch:
                self.status = "COMPLETED"
        self.on_poll()
        return {
            "Results": [
                {
                    "Status": self.status,
                    "SourceArn": task["SourceArn"],
                    "ApproximateNumberOfMessagesMoved": self.moved,
                    "ApproximateNumberOfMessagesToMove": 0,
                    **({"TaskHandle": "task-handle-1"} if self.status == "RUNNING" else {}),
                }
            ]
        }

    def cancel(self, **request: Any) -> dict[str, Any]:
        self.cancelled.append(request["TaskHandle"])
        self.status = "CANCELLED"
        return {"ApproximateNumberOfMessagesMoved": self.moved}
