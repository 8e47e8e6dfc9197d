"""Kernel benchmarks: prints ``<name>: <value>`` lines. Figures only -- nothing here is asserted.

Run from the repo root: ``.venv/bin/python bench/kernel_bench.py``.

* ddb_requests_per_*: DynamoDB HTTP requests (botocore ``before-send`` hook, moto in-process)
  for one new and one duplicate record, kernel consumer vs the canonical Powertools pattern
  (``idempotent_function`` + a separate business write).
* handler_import_ratio: median wall time of ``python -c "import <handler>"`` for the sample kernel
  consumer (bench/handlers/kernel_handler.py) divided by a boto3-only handler, runs interleaved.
* *_records_per_second: records through ``consume`` + ``commit_once`` with in-memory fakes of SQS
  and DynamoDB, beside a bare Powertools BatchProcessor loop over the same records.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench_size import scaled  # bench/, the script's own directory

ROOT = Path(__file__).resolve().parent.parent
HANDLERS = ROOT / "bench" / "handlers"
sys.path[:0] = [str(ROOT / "layers" / "relay" / "python"), str(HANDLERS), str(ROOT)]
for _name, _value in {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "POWERTOOLS_SERVICE_NAME": "bench",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_METRICS_DISABLED": "true",
}.items():
    os.environ.setdefault(_name, _value)

TABLE = "bench-table"
IMPORT_RUNS = scaled(7, 1)


class _Context:
    function_name = "bench"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def _context() -> Any:
    return _Context()


def _records(count: int) -> list[dict[str, Any]]:
    from relay.envelope import new_envelope

    records = []
    for n in range(count):
        env = new_envelope(
            "PaymentCompleted",
            identity=[f"op-{n}-{uuid.uuid4().hex[:6]}"],
            ids={"accountId": f"a{n % 50}"},
            payload={"amount": n},
            correlation_id=f"c-{n}",
        )
        sns_body = json.dumps(
            {"Type": "Notification", "TopicArn": "arn:aws:sns:us-east-1:1:t", "Message": env.to_json()}
        )
        records.append(
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": f"rh-{n}",
                "body": sns_body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "ApproximateFirstReceiveTimestamp": "1700000000000",
                },
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:bench",
                "awsRegion": "us-east-1",
            }
        )
    return records


# ------------------------------------------------------------------------------------------------
# DynamoDB requests per record (moto, in-process)
# ------------------------------------------------------------------------------------------------


def _count_requests(client: Any) -> list[str]:
    sent: list[str] = []

    def count(request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        sent.append(target.decode() if isinstance(target, bytes) else str(target))

    client.meta.events.register("before-send.dynamodb.*", count)
    return sent


def _create_table(ddb: Any) -> None:
    ddb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def ddb_requests_kernel() -> tuple[int, int]:
    import boto3
    from moto import mock_aws

    from relay.consumer import ConsumerSettings, consume
    from relay.ddb import update
    from relay.idempotency import commit_once

    with mock_aws():
        ddb = boto3.client("dynamodb")
        _create_table(ddb)
        sent = _count_requests(ddb)

        def handle(env: Any, ctx: Any) -> None:
            write = update(
                TABLE, {"id": f"account#{env.ids['accountId']}"}, "ADD balance :a", values={":a": 1}
            )
            commit_once(env, [write], table_name=TABLE, ddb_client=ddb)

        (record,) = _records(1)
        settings = ConsumerSettings(queue_url="https://q", dlq_url="https://d")
        counts = []
        for _ in range(2):  # new, then the same record again (duplicate)
            sent.clear()
            consume({"Records": [record]}, _context(), handle, settings=settings, sqs_client=_FakeSqs())
            counts.append(len(sent))
        return counts[0], counts[1]


def ddb_requests_powertools() -> tuple[int, int]:
    import boto3
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )
    from moto import mock_aws

    with mock_aws():
        ddb = boto3.client("dynamodb")
        _create_table(ddb)
        sent = _count_requests(ddb)
        persistence = DynamoDBPersistenceLayer(
            table_name=TABLE, key_attr="id", expiry_attr="expiresAt", boto3_client=ddb
        )
        config = IdempotencyConfig(event_key_jmespath="eventId", payload_validation_jmespath="payload")
        config.register_lambda_context(_context())

        @idempotent_function(  # type: ignore[untyped-decorator]
            data_keyword_argument="event", persistence_store=persistence, config=config
        )
        def apply(event: dict[str, Any]) -> dict[str, Any]:
            ddb.update_item(
                TableName=TABLE,
                Key={"id": {"S": f"account#{event['ids']['accountId']}"}},
                UpdateExpression="ADD balance :a",
                ExpressionAttributeValues={":a": {"N": "1"}},
            )
            return {"ok": True}

        def record_handler(record: Any) -> None:
            apply(event=json.loads(json.loads(record.body)["Message"]))

        (record,) = _records(1)
        counts = []
        for _ in range(2):
            sent.clear()
            process_partial_response(
                event={"Records": [record]},
                record_handler=record_handler,
                processor=BatchProcessor(EventType.SQS),
                context=_context(),
            )
            counts.append(len(sent))
        return counts[0], counts[1]


# ------------------------------------------------------------------------------------------------
# Import time
# ------------------------------------------------------------------------------------------------


def _import_seconds(module: str) -> float:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HANDLERS), str(ROOT / "layers" / "relay" / "python")]),
    }
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, env=env, cwd=str(HANDLERS))
    return time.perf_counter() - started


def import_medians(modules: list[str], runs: int = IMPORT_RUNS) -> dict[str, float]:
    samples: dict[str, list[float]] = {m: [] for m in modules}
    for module in modules:  # warm the file cache and .pyc files once
        _import_seconds(module)
    for _ in range(runs):  # interleaved, so background load hits every handler alike
        for module in modules:
            samples[module].append(_import_seconds(module))
    return {m: statistics.median(s) for m, s in samples.items()}


# ------------------------------------------------------------------------------------------------
# Throughput with in-memory fakes
# ------------------------------------------------------------------------------------------------


class _FakeSqs:
    class meta:
        endpoint_url = "https://sqs.us-east-1.amazonaws.com"

    def send_message(self, **_: Any) -> dict[str, Any]:
        return {}

    def change_message_visibility(self, **_: Any) -> dict[str, Any]:
        return {}


class _FakeDynamoDB:
    """Just enough TransactWriteItems: the marker's attribute_not_exists(id) is enforced."""

    def __init__(self) -> None:
        self.ids: set[str] = set()

    def transact_write_items(self, TransactItems: list[dict[str, Any]]) -> dict[str, Any]:
        marker_id = TransactItems[0]["Put"]["Item"]["id"]["S"]
        if marker_id in self.ids:
            raise RuntimeError("duplicate in a throughput run")
        self.ids.add(marker_id)
        return {}


def records_per_second(batches: int = 300, batch_size: int = 10) -> tuple[float, float]:
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    from relay.consumer import ConsumerSettings, consume
    from relay.ddb import update
    from relay.idempotency import commit_once

    events = [{"Records": _records(batch_size)} for _ in range(batches)]
    total = batches * batch_size
    ddb = _FakeDynamoDB()
    sqs = _FakeSqs()
    settings = ConsumerSettings(queue_url="https://q", dlq_url="https://d")

    def handle(env: Any, ctx: Any) -> None:
        write = update(TABLE, {"id": f"account#{env.ids['accountId']}"}, "ADD balance :a", values={":a": 1})
        commit_once(env, [write], table_name=TABLE, ddb_client=ddb)

    def bare_handler(record: Any) -> None:
        json.loads(json.loads(record.body)["Message"])

    with contextlib.redirect_stdout(io.StringIO()):
        started = time.perf_counter()
        for event in events:
            consume(event, _context(), handle, settings=settings, sqs_client=sqs)
        kernel = total / (time.perf_counter() - started)

        started = time.perf_counter()
        for event in events:
            process_partial_response(
                event=event,
                record_handler=bare_handler,
                processor=BatchProcessor(EventType.SQS),
                context=_context(),
            )
        bare = total / (time.perf_counter() - started)
    return kernel, bare


def main() -> None:
    medians = import_medians(["boto3_handler", "kernel_handler", "powertools_handler"])
    new, duplicate = ddb_requests_kernel()
    pt_new, pt_duplicate = ddb_requests_powertools()
    kernel_rps, bare_rps = records_per_second()
    print(f"ddb_requests_per_new_record: {new}")
    print(f"ddb_requests_per_duplicate_record: {duplicate}")
    print(f"powertools_ddb_requests_per_new_record: {pt_new}")
    print(f"powertools_ddb_requests_per_duplicate_record: {pt_duplicate}")
    print(f"handler_import_ratio: {medians['kernel_handler'] / medians['boto3_handler']:.2f}")
    print(f"powertools_handler_import_ratio: {medians['powertools_handler'] / medians['boto3_handler']:.2f}")
    print(f"boto3_handler_import_ms: {medians['boto3_handler'] * 1000:.0f}")
    print(f"kernel_handler_import_ms: {medians['kernel_handler'] * 1000:.0f}")
    print(f"kernel_records_per_second: {kernel_rps:.0f}")
    print(f"powertools_records_per_second: {bare_rps:.0f}")


if __name__ == "__main__":
    main()
