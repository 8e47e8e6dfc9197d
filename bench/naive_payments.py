"""The naive payment pipeline, built and measured: ``python -m bench.naive_payments [N]``.

What a careful team would write for the same flow WITHOUT the Relay kernel (``bench/cost.py`` prices it
beside the measured app): Powertools idempotency around every handler plus a separate business write,
one SNS Publish per event straight from the handler (no outbox), and no batching (each queue's event
source mapping at batch size 1). Real boto3 calls and real Powertools utilities, in-process under
moto's ``mock_aws``:

* ``POST /payments``: ``idempotent_function`` on the Idempotency-Key around: ONE conditional PutItem
  of the PENDING operation with the request inline (in S3 only above the app's 64 KB claim-check
  threshold, as the app keeps it), ONE Publish of PaymentRequested;
* ``GET /operations/{id}``: one strongly consistent GetItem;
* three steps, each a ``BatchProcessor`` consumer of its queue (SNS -> SQS, filter policy on
  ``eventType``, raw delivery) with ``idempotent_function`` on the record handler keyed on the event id:
  payment (legacy system), post-processing (invoice input), invoice (invoice API) -- each reads the
  operation, does its work (payloads inline in the item, as the app's), makes ONE conditional
  UpdateItem (status and version) and publishes the next event. The invoice step publishes
  OperationCompleted as the app does (its notice sender hears it); ``publish_completed=False`` leaves
  it out.

Every AWS request is counted by caller, service and action and billed by the app's own meter
(``emulator.request_meter._billed``: DynamoDB read/write units from the wire JSON, SQS/SNS per 64 KB
chunk), from two botocore events on each client: ``before-send`` (the prepared request, its body
kept in the request context) and ``response-received`` (the raw answer). The driver plays each
queue's event source mapping (ReceiveMessage of 1, no wait, DeleteMessage on success): its calls are
callers ``glue:esm (<function>)``, as on AWS the mapping makes them; its empty receives are idle
polling, apart from the per-operation figures. Lambda invocations and HTTP API requests are counted
by the driver. Provisioning and the driver's own checks use unmetered clients (the app meter's
``other``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qs

import boto3
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError
from moto import mock_aws
from pydantic import BaseModel, ConfigDict, Field

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pricing import Measured, billed_as, counts  # noqa: E402
from emulator.request_meter import _billed  # noqa: E402

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

REGION = "us-east-1"
OPERATIONS_TABLE = "naive-operations"
IDEMPOTENCY_TABLE = "naive-idempotency"
BUCKET = "naive-payments"
TOPIC = "payment-events"
PRICES = ROOT / "bench" / "prices.json"

PAYMENT_REQUESTED = "PaymentRequested"
PAYMENT_COMPLETED = "PaymentCompleted"
INVOICE_REQUESTED = "InvoiceRequested"
OPERATION_COMPLETED = "OperationCompleted"
# Which queue hears which event type: the subscriptions' filter policies are built from this, and the
# meter counts SNS's (free) deliveries to SQS by it.
ROUTES: Mapping[str, str] = {
    PAYMENT_REQUESTED: "payment-requests",
    PAYMENT_COMPLETED: "post-processing",
    INVOICE_REQUESTED: "invoice-requests",
}
# Powertools keeps a completed record this long: a redelivery within it gets the saved result back.
IDEMPOTENCY_SECONDS = 24 * 3600
_BODY = "naive_meter_body"  # where before-send leaves the wire body for response-received


# -- metering --------------------------------------------------------------------------------------


class Meter:
    """Every AWS request the attached clients make, as ``emulator.request_meter`` counts and bills them:
    per (caller, service, action) requests, billed units and empty receives."""

    def __init__(self, fanout: Mapping[str, int]) -> None:
        self.rows: dict[tuple[str, str, str], dict[str, float]] = {}
        self._fanout = fanout  # event type -> queues subscribed to it

    def add(self, caller: str, service: str, action: str, *, billed: float, empty: int = 0) -> None:
        row = self.rows.setdefault((caller, service, action), {"requests": 0, "billed": 0.0, "empty": 0})
        row["requests"] += 1
        row["billed"] += billed
        row["empty"] += empty

    def attach(self, client: BaseClient, caller: str) -> None:
        def sent(request: Any, **_: Any) -> None:
            # The body as it goes on the wire (JSON for DynamoDB and SQS, a query string for SNS):
            # what the app's meter bills from. S3's streamed bodies are not needed (1 request each).
            body = request.body
            request.context[_BODY] = body.encode() if isinstance(body, str) else body

        def received(event_name: str, response_dict: dict[str, Any] | None, context: Any, **_: Any) -> None:
            if response_dict is None:  # never reached AWS (a connection error): nothing billed
                return
            _event, service, action = event_name.split(".", 2)
            body = context.get(_BODY)
            body = body if isinstance(body, bytes) else b""
            # Streamed answers (S3 GetObject) are left unread: only JSON answers are ever measured.
            answer = response_dict.get("body")
            billed, empty = _billed(service, action, body, answer if isinstance(answer, bytes) else b"")
            self.add(caller, service, action, billed=billed, empty=empty)
            if service == "sns" and action == "Publish" and response_dict.get("status_code") == 200:
                self._deliveries(body)

        client.meta.events.register("before-send", sent, unique_id=f"naive-meter-sent-{id(client)}")
        client.meta.events.register(
            "response-received", received, unique_id=f"naive-meter-received-{id(client)}"
        )

    def _deliveries(self, body: bytes) -> None:
        """SNS's deliveries to the subscribed queues: no request the clients see (AWS charges none),
        counted as ``emulator.tallies.delivered`` does."""
        query = parse_qs(body.decode())
        names = {k.rsplit(".", 1)[0]: v[0] for k, v in query.items() if k.endswith(".Name")}
        for prefix, name in names.items():
            if name == "eventType":
                event_type = query.get(f"{prefix}.Value.StringValue", [""])[0]
                for _ in range(self._fanout.get(event_type, 0)):
                    self.add(f"glue:sns ({TOPIC})", "sns", "Deliver to SQS", billed=1.0)

    def snapshot(self) -> list[dict[str, Any]]:
        return [
            {"caller": c, "service": s, "action": a, **dict(row)}
            for (c, s, a), row in sorted(self.rows.items())
        ]


@dataclass
class NaiveMeasured:
    """What N payments through the naive pipeline made."""

    operations: int
    requests: list[dict[str, Any]] = field(default_factory=list)  # the meter's rows
    invocations: dict[str, int] = field(default_factory=dict)  # function -> invocations
    http_requests: int = 0  # HTTP API requests (POST and GET)
    statuses: dict[str, int] = field(default_factory=dict)  # operation status -> operations
    legacy_charges: int = 0  # charges the legacy system made (once per payment, whatever the retries)
    invoices_issued: int = 0

    def measured(self) -> Measured:
        """As ``bench.pricing.Measured``, which the breakdown and counts read."""
        return Measured(
            flow="naive payments",
            operations=self.operations,
            requests=self.requests,
            invocations=self.invocations,
            http_requests=self.http_requests,
        )

    def counts(self) -> dict[str, float]:
        """Requests per operation by service and action (empty receives apart): ``bench.pricing.counts``, and
        the HTTP API's requests."""
        out = counts(self.measured())
        out["apigateway:HTTP request"] = self.http_requests / self.operations
        return dict(sorted(out.items()))

    def units(self) -> dict[str, float]:
        """Billed units per operation by ``bench/prices.json`` key (idle polling left out), by the
        measured app's own billing rule (``bench.pricing.billed_as``)."""
        out: defaultdict[str, float] = defaultdict(float)
        for row in self.requests:
            key = billed_as(row["service"], row["action"], row["caller"])[1] or "free"
            out[key] += (row["billed"] - row["empty"]) / self.operations
        out["lambda.request"] += sum(self.invocations.values()) / self.operations
        out["apigateway.http_request"] += self.http_requests / self.operations
        return dict(sorted(out.items()))

    def idle_receives(self) -> int:
        return int(sum(row["empty"] for row in self.requests))


# -- the external systems (plain Python, no AWS) ---------------------------------------------------


class FakeLegacyPayments:
    """The legacy payment system: create-or-get under the caller's key, so a retried call never
    charges twice."""

    def __init__(self) -> None:
        self.charges: dict[str, dict[str, str]] = {}
        self.calls = 0

    def charge(self, request: Mapping[str, Any], *, idempotency_key: str) -> dict[str, str]:
        self.calls += 1
        if idempotency_key not in self.charges:
            ref = f"LEG-{len(self.charges) + 1:06d}"
            self.charges[idempotency_key] = {"paymentRef": ref, "status": "COMPLETED"}
        return self.charges[idempotency_key]


class FakeInvoiceApi:
    """The invoice API: at most one invoice per key."""

    def __init__(self) -> None:
        self.invoices: dict[str, dict[str, str]] = {}
        self.calls = 0

    def issue(self, document: Mapping[str, Any], *, idempotency_key: str) -> dict[str, str]:
        self.calls += 1
        if idempotency_key not in self.invoices:
            self.invoices[idempotency_key] = {"invoiceId": f"INV-{len(self.invoices) + 1:06d}"}
        return self.invoices[idempotency_key]


# -- the functions ---------------------------------------------------------------------------------


class PaymentRequest(BaseModel):
    """The POST body, validated before anything is written (a bad request costs no AWS request)."""

    model_config = ConfigDict(extra="forbid")
    paymentId: str = Field(min_length=1)
    amount: str = Field(pattern=r"^\d+(\.\d{1,2})?$")
    currency: str = Field(min_length=3, max_length=3)
    payer: str
    payee: str
    details: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Clients:
    """One function's clients: its own, so the meter knows whose request each is."""

    ddb: DynamoDBClient
    s3: S3Client
    sns: SNSClient
    topic_arn: str


class _Context:
    """The Lambda context Powertools reads: the remaining time bounds an IN_PROGRESS record's life."""

    def __init__(self, function_name: str) -> None:
        self.function_name = function_name
        self.memory_limit_in_mb = 256
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def context(function_name: str) -> LambdaContext:
    return cast(LambdaContext, _Context(function_name))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _event(event_type: str, operation_id: str) -> dict[str, str]:
    # The id is derived from what the event announces, not random: a Publish repeated after a crash
    # carries the same id, so the consumer's Powertools record drops the repeat.
    return {
        "eventId": f"{operation_id}:{event_type}",
        "eventType": event_type,
        "operationId": operation_id,
        "occurredAt": _now(),
    }


def _publish(clients: Clients, event: Mapping[str, str]) -> None:
    # One Publish per event, straight from the handler after its write (no outbox); the eventType
    # attribute is what the subscriptions' filter policies match.
    clients.sns.publish(
        TopicArn=clients.topic_arn,
        Message=json.dumps(event),
        MessageAttributes={"eventType": {"DataType": "String", "StringValue": event["eventType"]}},
    )


def _put_json(clients: Clients, key: str, document: Mapping[str, Any]) -> None:
    clients.s3.put_object(
        Bucket=BUCKET, Key=key, Body=json.dumps(document).encode(), ContentType="application/json"
    )


def _get_json(clients: Clients, key: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(clients.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    return document


# Payloads live where the app keeps them: inline in the operation item below the app's claim-check
# threshold, in S3 above it (``relay.claim_check.keep_json``), so the comparison is about the messaging
# and the idempotency, not the payloads.
THRESHOLD_BYTES = 64 * 1024


def _keep(clients: Clients, key: str, document: Mapping[str, Any]) -> str:
    """The attribute value that keeps ``document``: its JSON, or ``s3:<key>`` once it is large."""
    text = json.dumps(document, separators=(",", ":"), sort_keys=True)
    if len(text.encode()) <= THRESHOLD_BYTES:
        return text
    _put_json(clients, key, document)
    return f"s3:{key}"


def _kept(clients: Clients, value: str) -> dict[str, Any]:
    if value.startswith("s3:"):
        return _get_json(clients, value.removeprefix("s3:"))
    document: dict[str, Any] = json.loads(value)
    return document


def _get_operation(clients: Clients, operation_id: str) -> dict[str, Any] | None:
    # Strongly consistent: a step that follows an event must see the write that published it.
    item = clients.ddb.get_item(
        TableName=OPERATIONS_TABLE, Key={"operationId": {"S": operation_id}}, ConsistentRead=True
    ).get("Item")
    if item is None:
        return None
    return {k: next(iter(v.values())) for k, v in item.items()}


def _persistence(clients: Clients) -> DynamoDBPersistenceLayer:
    # Powertools' own table layout (``id`` hash key, ``expiration`` TTL); the function's client, so its
    # requests are metered as the function's.
    return DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, key_attr="id", boto3_client=clients.ddb)


def request_key(operation_id: str) -> str:
    return f"payments/{operation_id}/request.json"


def result_key(operation_id: str) -> str:
    return f"payments/{operation_id}/result.json"


def invoice_input_key(operation_id: str) -> str:
    return f"payments/{operation_id}/invoice-input.json"


class Api:
    """The HTTP API's function: POST /payments and GET /operations/{id}."""

    def __init__(self, clients: Clients) -> None:
        self.clients = clients
        # Keyed on the Idempotency-Key; the body is validated against the saved one, so a key reused
        # with another payment is refused (IdempotencyValidationError) instead of answered as a replay.
        self.config = IdempotencyConfig(
            event_key_jmespath="idempotencyKey",
            payload_validation_jmespath="body",
            expires_after_seconds=IDEMPOTENCY_SECONDS,
            raise_on_no_idempotency_key=True,
        )
        self._accept = idempotent_function(
            data_keyword_argument="request", persistence_store=_persistence(clients), config=self.config
        )(self._create)

    def post_payment(self, body: Mapping[str, Any], idempotency_key: str) -> str:
        self.config.register_lambda_context(context("api"))
        payment = PaymentRequest.model_validate(body)
        accepted: dict[str, str] = self._accept(
            request={"idempotencyKey": idempotency_key, "body": payment.model_dump(mode="json")}
        )
        return accepted["operationId"]

    def _create(self, request: dict[str, Any]) -> dict[str, str]:
        # The id is derived from the key: a client retry after a crash between the write and the
        # Publish (Powertools then deleted its IN_PROGRESS record) finds its own operation, not a twin.
        operation_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"relay-naive:{request['idempotencyKey']}"))
        body = request["body"]
        kept = _keep(self.clients, request_key(operation_id), body)  # the whole request, as the app keeps it
        at = _now()
        try:
            self.clients.ddb.put_item(
                TableName=OPERATIONS_TABLE,
                Item={
                    "operationId": {"S": operation_id},
                    "status": {"S": "PENDING"},
                    "version": {"N": "1"},
                    "paymentId": {"S": body["paymentId"]},
                    "request": {"S": kept},
                    "createdAt": {"S": at},
                    "updatedAt": {"S": at},
                },
                ConditionExpression="attribute_not_exists(operationId)",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            # Written by the crashed attempt: its Publish may be what was lost, so publish again (the
            # payment step's idempotency drops it if it was not).
        _publish(self.clients, _event(PAYMENT_REQUESTED, operation_id))
        return {"operationId": operation_id, "status": "PENDING"}

    def get_operation(self, operation_id: str) -> dict[str, Any] | None:
        return _get_operation(self.clients, operation_id)


Work = Callable[[Clients, dict[str, Any]], dict[str, str]]  # (clients, operation) -> attributes to set


@dataclass(frozen=True)
class StepRule:
    function: str
    queue: str
    expects: str  # the operation's status this step starts from
    target: str  # and leaves it in
    emits: str | None  # the event it publishes after its write


class Step:
    """One step's function: an SQS consumer (batch size 1) whose record handler is Powertools-idempotent
    on the event id, around: read the operation, do the work, ONE conditional UpdateItem, Publish."""

    def __init__(self, rule: StepRule, work: Work, clients: Clients) -> None:
        self.rule, self.work, self.clients = rule, work, clients
        self.config = IdempotencyConfig(
            event_key_jmespath="powertools_json(body).eventId",
            expires_after_seconds=IDEMPOTENCY_SECONDS,
            raise_on_no_idempotency_key=True,
        )
        self._record = idempotent_function(
            data_keyword_argument="record", persistence_store=_persistence(clients), config=self.config
        )(self._apply)

    def handler(self, event: dict[str, Any], lambda_context: LambdaContext) -> PartialItemFailureResponse:
        self.config.register_lambda_context(lambda_context)
        # Partial batch response: only a failed record goes back to the queue (ReportBatchItemFailures).
        return process_partial_response(
            event=event,
            record_handler=self._handle,
            processor=BatchProcessor(event_type=EventType.SQS),
            context=lambda_context,
        )

    def _handle(self, record: SQSRecord) -> dict[str, str]:
        result: dict[str, str] = self._record(record=record)
        return result

    def _apply(self, record: SQSRecord) -> dict[str, str]:
        rule, clients = self.rule, self.clients
        event = json.loads(record.body)
        operation_id = event["operationId"]
        operation = _get_operation(clients, operation_id)
        if operation is None:
            raise LookupError(
                f"event {event['eventId']} ({event['eventType']}) names operation {operation_id}, "
                f"which {OPERATIONS_TABLE} does not hold; retried, then parked in the DLQ."
            )
        if operation["status"] == rule.target and rule.emits:
            # This step's write is there but its Publish may have been lost (a crash between them, no
            # outbox): publish again; the same event id makes the next step drop a repeat.
            _publish(clients, _event(rule.emits, operation_id))
            return {"operationId": operation_id, "status": rule.target, "outcome": "republished"}
        if operation["status"] != rule.expects:
            return {"operationId": operation_id, "status": operation["status"], "outcome": "skipped"}
        changes = self.work(clients, operation)
        names = {f"#a{i}": name for i, name in enumerate(changes)}
        values = {f":a{i}": {"S": value} for i, value in enumerate(changes.values())}
        try:
            # Conditional on the state and version it read: a concurrent delivery that got past the
            # idempotency record (expired, or deleted after a failure) cannot apply the step twice.
            clients.ddb.update_item(
                TableName=OPERATIONS_TABLE,
                Key={"operationId": {"S": operation_id}},
                UpdateExpression="SET #status = :to, #version = #version + :one, #updatedAt = :at"
                + "".join(f", {n} = {v}" for n, v in zip(names, values, strict=True)),
                ConditionExpression="#status = :from AND #version = :version",
                ExpressionAttributeNames={
                    "#status": "status",
                    "#version": "version",
                    "#updatedAt": "updatedAt",
                    **names,
                },
                ExpressionAttributeValues={
                    ":to": {"S": rule.target},
                    ":from": {"S": rule.expects},
                    ":version": {"N": str(operation["version"])},
                    ":one": {"N": "1"},
                    ":at": {"S": _now()},
                    **values,
                },
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return {"operationId": operation_id, "status": operation["status"], "outcome": "lost the race"}
        if rule.emits:
            _publish(clients, _event(rule.emits, operation_id))
        return {"operationId": operation_id, "status": rule.target, "outcome": "applied"}


def pay(legacy: FakeLegacyPayments) -> Work:
    def work(clients: Clients, operation: dict[str, Any]) -> dict[str, str]:
        operation_id = operation["operationId"]
        request = _kept(clients, operation["request"])
        # Under the operation's own key: a retry after a timeout gets the same charge back.
        charged = legacy.charge(request, idempotency_key=f"{operation_id}:payment")
        result = _keep(clients, result_key(operation_id), {**charged, "operationId": operation_id})
        return {"paymentRef": charged["paymentRef"], "result": result}

    return work


def post_process(clients: Clients, operation: dict[str, Any]) -> dict[str, str]:
    operation_id = operation["operationId"]
    result = _kept(clients, operation["result"])
    request = _kept(clients, operation["request"])
    document = {
        "operationId": operation_id,
        "paymentRef": result["paymentRef"],
        "amount": request["amount"],
        "currency": request["currency"],
        "payer": request["payer"],
        "payee": request["payee"],
        "lines": [{"description": f"Payment {request['paymentId']}", "amount": request["amount"]}],
    }
    return {"invoiceInput": _keep(clients, invoice_input_key(operation_id), document)}


def invoice(api: FakeInvoiceApi) -> Work:
    def work(clients: Clients, operation: dict[str, Any]) -> dict[str, str]:
        operation_id = operation["operationId"]
        document = _kept(clients, operation["invoiceInput"])
        issued = api.issue(document, idempotency_key=f"{operation_id}:invoice")
        return {"invoiceId": issued["invoiceId"]}

    return work


def step_rules(*, publish_completed: bool) -> tuple[StepRule, ...]:
    return (
        StepRule("payment-worker", "payment-requests", "PENDING", "PAYMENT_COMPLETED", PAYMENT_COMPLETED),
        StepRule(
            "post-processor", "post-processing", "PAYMENT_COMPLETED", "INVOICE_PENDING", INVOICE_REQUESTED
        ),
        StepRule(
            "invoice-worker",
            "invoice-requests",
            "INVOICE_PENDING",
            "COMPLETED",
            OPERATION_COMPLETED if publish_completed else None,
        ),
    )


# -- provisioning, the driver ----------------------------------------------------------------------


def _provision(session: boto3.session.Session) -> tuple[str, dict[str, str], dict[str, str]]:
    """The tables, bucket, topic and queues (unmetered, as the app meter's ``other``): the topic ARN,
    and queue name -> URL and -> ARN."""
    ddb, s3 = session.client("dynamodb"), session.client("s3")
    sns, sqs = session.client("sns"), session.client("sqs")
    for table, key in ((OPERATIONS_TABLE, "operationId"), (IDEMPOTENCY_TABLE, "id")):
        ddb.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    # Powertools' records expire by TTL, so the table does not grow with every event ever handled.
    ddb.update_time_to_live(
        TableName=IDEMPOTENCY_TABLE, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"}
    )
    s3.create_bucket(Bucket=BUCKET)
    topic_arn = sns.create_topic(Name=TOPIC)["TopicArn"]
    urls, arns = {}, {}
    for event_type, name in ROUTES.items():
        dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        # A poison message is parked after 5 receives instead of retried forever.
        urls[name] = sqs.create_queue(
            QueueName=name,
            Attributes={
                "VisibilityTimeout": "180",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"}),
            },
        )["QueueUrl"]
        arns[name] = sqs.get_queue_attributes(QueueUrl=urls[name], AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sqs.set_queue_attributes(
            QueueUrl=urls[name],
            Attributes={
                "Policy": json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "sns.amazonaws.com"},
                                "Action": "sqs:SendMessage",
                                "Resource": arns[name],
                                "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
                            }
                        ],
                    }
                )
            },
        )
        sns.subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=arns[name],
            Attributes={
                "FilterPolicy": json.dumps({"eventType": [event_type]}),
                "RawMessageDelivery": "true",
            },
        )
    return topic_arn, urls, arns


def _sqs_record(message: Mapping[str, Any], queue_arn: str) -> dict[str, Any]:
    """One record of the event Lambda's SQS event source mapping builds from a received message."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {
            name: {
                "stringValue": value.get("StringValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value["DataType"],
            }
            for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }


class NaivePipeline:
    """The naive pipeline's functions, their metered clients, and a driver that plays the HTTP API and
    each queue's event source mapping. Build it inside ``naive_environment()``."""

    def __init__(self, *, publish_completed: bool = True) -> None:
        self.session = boto3.session.Session(region_name=REGION)
        self.topic_arn, self.queue_urls, self.queue_arns = _provision(self.session)
        self.meter = Meter(Counter(ROUTES.keys()))
        self.legacy, self.invoice_api = FakeLegacyPayments(), FakeInvoiceApi()
        self.invocations: Counter[str] = Counter()
        self.http_requests = 0
        self.received: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)  # queue -> messages
        self.api = Api(self._clients("api"))
        works: dict[str, Work] = {
            "payment-worker": pay(self.legacy),
            "post-processor": post_process,
            "invoice-worker": invoice(self.invoice_api),
        }
        self.steps = [
            Step(rule, works[rule.function], self._clients(rule.function))
            for rule in step_rules(publish_completed=publish_completed)
        ]
        self._glue: dict[str, SQSClient] = {}
        for rule in step_rules(publish_completed=publish_completed):
            glue = self.session.client("sqs")
            self.meter.attach(glue, f"glue:esm ({rule.function})")
            self._glue[rule.function] = glue
        self._unmetered_sqs = self.session.client("sqs")  # SQS's own redelivery: nobody's request

    def _clients(self, function: str) -> Clients:
        ddb, s3, sns = self.session.client("dynamodb"), self.session.client("s3"), self.session.client("sns")
        for client in (ddb, s3, sns):
            self.meter.attach(client, function)
        return Clients(ddb=ddb, s3=s3, sns=sns, topic_arn=self.topic_arn)

    def _invoked(self, function: str) -> None:
        self.invocations[function] += 1
        # What the Lambda runtime sets: Powertools prefixes its idempotency keys with it.
        os.environ["AWS_LAMBDA_FUNCTION_NAME"] = function

    # The HTTP API: one request, one invocation of the API function.
    def post_payment(self, body: Mapping[str, Any], idempotency_key: str) -> str:
        self.http_requests += 1
        self._invoked("api")
        return self.api.post_payment(body, idempotency_key)

    def get_operation(self, operation_id: str) -> dict[str, Any] | None:
        self.http_requests += 1
        self._invoked("api")
        return self.api.get_operation(operation_id)

    def poll(self, step: Step) -> bool:
        """One poll of the step's event source mapping at batch size 1; True if a message came."""
        glue, url = self._glue[step.rule.function], self.queue_urls[step.rule.queue]
        messages = glue.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=1,
            WaitTimeSeconds=0,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return False
        (message,) = messages
        self.received[step.rule.queue].append(dict(message))
        self._invoked(step.rule.function)
        # At batch size 1 a failed record fails the whole batch (Powertools raises): the mapping would
        # leave the message for a retry after its visibility timeout; the bench stops and says why.
        answer = step.handler(
            {"Records": [_sqs_record(message, self.queue_arns[step.rule.queue])]}, context(step.rule.function)
        )
        if not answer.get("batchItemFailures"):
            glue.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return True

    def pump(self) -> None:
        """Every queue drained, until one pass over them all finds none with a message."""
        while True:
            busy = False
            for step in self.steps:
                while self.poll(step):
                    busy = True
            if not busy:
                return

    def redeliver(self, queue: str, message: Mapping[str, Any]) -> None:
        """SQS delivering a message again (at-least-once): a copy put back on the queue by an unmetered
        client, since on AWS no one makes a request for it; only the receive it meets is billed."""
        self._unmetered_sqs.send_message(
            QueueUrl=self.queue_urls[queue],
            MessageBody=message["Body"],
            MessageAttributes=message.get("MessageAttributes", {}),
        )

    def statuses(self) -> dict[str, int]:
        """Operations by status (an unmetered Scan: the driver's check, not the flow's)."""
        items = self.session.client("dynamodb").scan(TableName=OPERATIONS_TABLE)["Items"]
        return dict(Counter(item["status"]["S"] for item in items))

    def measured(self, operations: int) -> NaiveMeasured:
        return NaiveMeasured(
            operations=operations,
            requests=self.meter.snapshot(),
            invocations=dict(self.invocations),
            http_requests=self.http_requests,
            statuses=self.statuses(),
            legacy_charges=len(self.legacy.charges),
            invoices_issued=len(self.invoice_api.invoices),
        )


_ENVIRONMENT = {
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "naive-bench",
    "AWS_SECRET_ACCESS_KEY": "naive-bench",
    "AWS_SESSION_TOKEN": "naive-bench",
    "POWERTOOLS_SERVICE_NAME": "naive-payments",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "OTEL_SDK_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}


@contextlib.contextmanager
def naive_environment() -> Iterator[None]:
    """Fake credentials and us-east-1 under ``mock_aws``, Powertools idempotency ON, its logging quiet;
    the process's environment and log levels as they were afterwards."""
    saved = dict(os.environ)
    quiet = logging.getLogger("aws_lambda_powertools")
    level = quiet.level
    os.environ.update(_ENVIRONMENT)
    os.environ.pop("POWERTOOLS_IDEMPOTENCY_DISABLED", None)  # it would skip every idempotency write
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    quiet.setLevel(logging.CRITICAL)  # a failed record's traceback reaches the caller as an exception
    try:
        with mock_aws():
            yield
    finally:
        quiet.setLevel(level)
        os.environ.clear()
        os.environ.update(saved)


def payment_body(n: int) -> dict[str, Any]:
    """The same request as ``bench/cost.py``'s payments flow."""
    return {
        "paymentId": f"naive-{n:06d}",
        "amount": "10.00",
        "currency": "EUR",
        "payer": "cost-bench",
        "payee": "relay-shop",
        "details": {},
    }


def drive(pipeline: NaivePipeline, operations: int) -> list[str]:
    """N payments: each POSTed, the queues pumped until every operation is done, then one GET each."""
    ids = [pipeline.post_payment(payment_body(n), uuid.uuid4().hex) for n in range(operations)]
    pipeline.pump()
    statuses = pipeline.statuses()
    if statuses != {"COMPLETED": operations}:
        raise RuntimeError(f"the naive pipeline left operations {statuses}, not {operations} COMPLETED")
    for operation_id in ids:  # the client reads the outcome once
        pipeline.get_operation(operation_id)
    return ids


def measure_naive(operations: int = 30, *, publish_completed: bool = True) -> NaiveMeasured:
    """N payments through the naive pipeline, every AWS request counted and billed."""
    with naive_environment():
        pipeline = NaivePipeline(publish_completed=publish_completed)
        drive(pipeline, operations)
        return pipeline.measured(operations)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    operations = int(args[0]) if args else 30
    m = measure_naive(operations)
    known = json.loads(PRICES.read_text())["prices"]
    print(f"naive payments: {operations} operations, {m.statuses}")
    print("\nrequests per operation (service:action):")
    for name, value in m.counts().items():
        print(f"  {name:<52} {value:>7.2f}")
    print("\nbilled units per operation (bench/prices.json keys):")
    for key, value in m.units().items():
        print(f"  {key:<52} {value:>7.2f}{'' if key in known else '  (no such price!)'}")
    print(f"\ninvocations: {m.invocations}; idle receives: {m.idle_receives()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
