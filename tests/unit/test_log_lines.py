"""Log lines: the kernel's handlers log Powertools JSON with the Lambda context keys that vary per
invocation, and without those the log group already says (the function's name, ARN and memory), which
were a third of each line's bytes (docs/cost.md)."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

from relay import observability
from tests.builders import FakeContext


def _lines(handler: Any, event: dict[str, Any]) -> list[dict[str, Any]]:
    log = observability.logger()
    stream = io.StringIO()
    # The process's logger is built once, at the level of the first environment that asked for it: a
    # stack's functions log at WARNING, so this test sets the INFO its lines are written at. With a
    # sample rate, each invocation resets the level to ``initial_log_level``: that is set too.
    level, initial = log.log_level, log.initial_log_level
    log.initial_log_level = logging.INFO
    log.setLevel("INFO")
    original = log.registered_handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        handler(event, FakeContext())
    finally:
        log.registered_handler.setStream(original)  # type: ignore[attr-defined]
        log.initial_log_level = initial
        log.setLevel(level)
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_a_handlers_lines_keep_the_request_id_and_leave_out_what_the_log_group_says() -> None:
    @observability.inject_lambda_context
    def handler(event: dict[str, Any], context: Any) -> None:
        observability.logger().info("order placed", extra={"order_id": "o-1"})

    (line,) = _lines(handler, {})
    assert line["message"] == "order placed" and line["order_id"] == "o-1"
    assert line["function_request_id"] == FakeContext.aws_request_id and "cold_start" in line
    assert not set(observability.LOG_GROUP_KEYS) & set(line)


def test_options_pass_through_to_powertools() -> None:
    @observability.inject_lambda_context(correlation_id_path="headers.id")
    def handler(event: dict[str, Any], context: Any) -> None:
        observability.logger().info("seen")

    (line,) = _lines(handler, {"headers": {"id": "corr-1"}})
    assert line["correlation_id"] == "corr-1"
    assert not set(observability.LOG_GROUP_KEYS) & set(line)
