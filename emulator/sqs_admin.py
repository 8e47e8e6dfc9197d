"""Queue ages, read inside the emulator process without receiving: ``GET /_relay/sqs/queues``.

On AWS the age of a queue's oldest message is CloudWatch's ``ApproximateAgeOfOldestMessage``; moto has no
such metric, and a ReceiveMessage to find out would count as a receive (towards the redrive policy's
``maxReceiveCount``) and hide the messages for a visibility timeout. The endpoint reads moto's queues
directly, changing nothing, and answers for every queue of every account and region:

    {"queues": [{"url": "http://127.0.0.1:4566/123456789012/orders-dlq", "name": "orders-dlq",
                 "arn": "arn:aws:sqs:us-east-1:123456789012:orders-dlq", "visible": 2, "inFlight": 0,
                 "delayed": 0, "oldestAgeSeconds": 73.4}]}

``visible``, ``inFlight`` and ``delayed`` count as GetQueueAttributes' ApproximateNumberOfMessages,
…NotVisible and …Delayed do. ``oldestAgeSeconds`` is the time since the oldest message's SentTimestamp,
over the messages that are visible or in flight (a delayed message is not in the queue yet); null for
an empty queue. Two differences from CloudWatch: the value is exact and current (CloudWatch's is a
one-minute sample), and messages received three or more times are not skipped (CloudWatch leaves such
"poison pill" messages out). A message moved to a DLQ by moto's redrive policy keeps its SentTimestamp,
so a DLQ's age counts from the original send.

``queue_ages(endpoint)`` is the client, for the ops toolkit against the sandbox (on AWS the same figure
is CloudWatch's metric).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

PREFIX = "/_relay/sqs/"
QUEUES_PATH = PREFIX + "queues"


@dataclass(frozen=True)
class QueueAge:
    url: str
    name: str
    arn: str
    visible: int
    in_flight: int
    delayed: int
    oldest_age_seconds: float | None  # None: no message visible or in flight


def queue_ages(
    endpoint: str, *, urlopen: Callable[..., Any] = urllib.request.urlopen, timeout: float = 10.0
) -> dict[str, QueueAge]:
    """Every queue in the emulator at ``endpoint``, by URL. Receives nothing: receive counts and
    visibility stay as they are."""
    with urlopen(endpoint.rstrip("/") + QUEUES_PATH, timeout=timeout) as response:
        payload = json.loads(response.read())
    return {
        q["url"]: QueueAge(
            url=q["url"],
            name=q["name"],
            arn=q["arn"],
            visible=int(q["visible"]),
            in_flight=int(q["inFlight"]),
            delayed=int(q["delayed"]),
            oldest_age_seconds=None if q["oldestAgeSeconds"] is None else float(q["oldestAgeSeconds"]),
        )
        for q in payload["queues"]
    }


# -- inside the emulator process -------------------------------------------------------------------------


def _backends() -> Iterable[Any]:
    from moto.sqs.models import sqs_backends

    # Only the backends that exist: indexing moto's BackendDicts would create them.
    for regions in list(sqs_backends.values()):
        yield from list(regions.values())


def _queue_entry(queue: Any, base_url: str, now_ms: float) -> dict[str, Any]:
    # A copy of the list: request threads append and remove messages meanwhile. Reading a message's
    # fields changes nothing (no receive count, no visibility, no retention check).
    messages = list(queue._messages)
    visible = in_flight = delayed = 0
    oldest: float | None = None
    for message in messages:
        is_visible = now_ms > message.visible_at
        is_delayed = now_ms < message.delayed_until
        in_flight += not is_visible
        delayed += is_delayed
        visible += is_visible and not is_delayed
        if not is_delayed and message.sent_timestamp is not None:
            oldest = message.sent_timestamp if oldest is None else min(oldest, message.sent_timestamp)
    return {
        "url": f"{base_url}/{queue.account_id}/{queue.name}",
        "name": queue.name,
        "arn": queue.queue_arn,
        "visible": visible,
        "inFlight": in_flight,
        "delayed": delayed,
        "oldestAgeSeconds": None if oldest is None else round(max(0.0, now_ms - oldest) / 1000.0, 3),
    }


def queues_snapshot(base_url: str) -> dict[str, Any]:
    """The endpoint's answer; queue URLs are built on ``base_url`` as moto builds them."""
    now_ms = time.time() * 1000.0
    queues = [
        _queue_entry(queue, base_url, now_ms)
        for backend in _backends()
        for queue in list(backend.queues.values())
    ]
    return {"queues": sorted(queues, key=lambda q: q["url"])}


def json_response(
    start_response: Any, status: str, body: Any, headers: tuple[tuple[str, str], ...] = ()
) -> list[bytes]:
    """A WSGI JSON answer (the emulator's own control routes: this one, traces, the meter)."""
    payload = json.dumps(body).encode()
    start_response(
        status,
        [("Content-Type", "application/json"), *headers, ("Content-Length", str(len(payload)))],
    )
    return [payload]


def _handle(original: Callable[..., Any]) -> Callable[..., Any]:
    def __call__(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(PREFIX):
            return original(self, environ, start_response)
        if path != QUEUES_PATH:
            return json_response(start_response, "404 Not Found", {"message": f"no such endpoint: {path}"})
        if environ.get("REQUEST_METHOD", "GET") != "GET":
            return json_response(
                start_response, "405 Method Not Allowed", {"message": f"{path} is read-only: GET"}
            )
        host = environ.get("HTTP_HOST") or f"{environ.get('SERVER_NAME')}:{environ.get('SERVER_PORT')}"
        base_url = f"{environ.get('wsgi.url_scheme', 'http')}://{host}"
        return json_response(start_response, "200 OK", queues_snapshot(base_url))

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    return __call__


def install() -> Callable[[], None]:
    """Serve ``/_relay/sqs/`` in this moto server process; returns a function that removes it (tests
    run a moto server in their own process)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.__call__
    DomainDispatcherApplication.__call__ = _handle(original)  # type: ignore[method-assign]

    def remove() -> None:
        DomainDispatcherApplication.__call__ = original  # type: ignore[method-assign]

    return remove
