"""Baseline (bench only): a handler that imports only boto3."""

import json
from typing import Any

import boto3  # noqa: F401


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    for record in event["Records"]:
        json.loads(record["body"])
    return {"batchItemFailures": []}
