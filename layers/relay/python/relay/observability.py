"""Lazy Powertools Logger / Metrics / Tracer singletons and the kernel's EMF counters.

Metrics (namespace ``POWERTOOLS_METRICS_NAMESPACE``, default ``Relay``), all Count, dimensions
``service`` and ``eventType``:

* Processed -- records acknowledged after the handler returned (duplicates included);
* Duplicate -- commits recognised as already applied (relay.idempotency);
* Parked -- permanent failures moved to the DLQ;
* Retried -- transient failures backed off and reported failed;
* PayloadConflict -- same eventId, different payload (alarm on it).

Counters are aggregated per (name, eventType) while a batch is being consumed and flushed at the end
(``metrics_batch``) as one EMF line per eventType carrying all its metrics (EMF allows up to 100 a
document), instead of one log line per record or per metric; outside a batch they are emitted
immediately.

Logs: Powertools JSON, one line per record a handler acts on, with the Lambda context keys that vary
per invocation (``cold_start``, ``function_request_id``) and the correlation id; the function's name,
ARN and memory size are left out of each line (``inject_lambda_context``): the log group
(``/aws/lambda/<function>``) names the function, Logs Insights returns it as ``@log``, and the
platform's REPORT line has the memory. They were a third of each line's bytes, and CloudWatch bills
ingestion by the byte (docs/cost.md).

Traces (X-Ray; every function has active tracing): the kernel's entry points run the handler in the
Tracer's ``## handler`` subsegment (``trace_handler``) and annotate it, or each SQS record's own
``## record`` subsegment (``record_subsegment``), with ``correlation_id``, so that
``annotation.correlation_id = "..."`` finds one request's traces across functions.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast, overload

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics, Tracer

_lock = threading.Lock()
_logger: Logger | None = None
_metrics: Metrics | None = None
_tracer: Tracer | None = None
_tracer_loaded = False
_pending: Counter[tuple[str, str]] | None = None

METRIC_NAMES = ("Processed", "Duplicate", "Parked", "Retried", "PayloadConflict")

CORRELATION_ID_ANNOTATION = "correlation_id"
# X-Ray keeps an annotation value of at most 1,000 characters; an API's correlation id is the caller's
# x-correlation-id header, of any length.
_ANNOTATION_MAX_CHARS = 1000


def service_name() -> str:
    return os.environ.get("POWERTOOLS_SERVICE_NAME", "relay")


def namespace() -> str:
    return os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Relay")


def logger() -> Logger:
    """The process-wide Powertools Logger (service from POWERTOOLS_SERVICE_NAME)."""
    global _logger
    if _logger is None:
        with _lock:
            if _logger is None:
                from aws_lambda_powertools.logging import Logger

                _logger = Logger(service=service_name())
    return _logger


# What the log group already says of every line it holds (see the module docstring).
LOG_GROUP_KEYS = ("function_name", "function_arn", "function_memory_size")


type _Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


@overload
def inject_lambda_context[H: Callable[..., Any]](handler: H) -> H: ...
@overload
def inject_lambda_context(handler: None = None, **options: Any) -> _Decorator: ...
def inject_lambda_context(handler: Any = None, **options: Any) -> Any:
    """Powertools' ``Logger.inject_lambda_context`` (same options), without ``LOG_GROUP_KEYS`` on each
    line. Usable bare (``@inject_lambda_context``) or with options."""
    import functools

    log = logger()

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def lean(event: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
            log.remove_keys(list(LOG_GROUP_KEYS))
            return function(event, context, *args, **kwargs)

        return cast(Callable[..., Any], log.inject_lambda_context(lean, **options))

    return decorate(handler) if handler is not None else decorate


def metrics() -> Metrics:
    """The process-wide Powertools Metrics, for a handler's own metrics (kernel counts are written as EMF by
    ``record_metric``; a handler that adds none should not use ``log_metrics``, which warns when empty)."""
    global _metrics
    if _metrics is None:
        with _lock:
            if _metrics is None:
                from aws_lambda_powertools.metrics import Metrics

                _metrics = Metrics(service=service_name(), namespace=namespace())
    return _metrics


def tracer() -> Tracer | None:
    """The process-wide Powertools Tracer (service from POWERTOOLS_SERVICE_NAME), or None when there is
    nothing to trace with: POWERTOOLS_TRACE_DISABLED is true (the tests and the local sandbox: no X-Ray
    daemon) or aws_xray_sdk is not installed. A disabled Tracer would still build the X-Ray recorder,
    about 0.2 s of botocore model loading in every process, to record nothing."""
    global _tracer, _tracer_loaded
    missing = False
    if not _tracer_loaded:
        with _lock:
            if not _tracer_loaded:
                if not _tracing_disabled():
                    try:
                        from aws_lambda_powertools.tracing import Tracer

                        _tracer = Tracer(service=service_name())
                    except ImportError:  # pragma: no cover - depends on the layer contents
                        missing = True
                _tracer_loaded = True
    if missing:  # pragma: no cover - depends on the layer contents
        logger().warning(
            "aws_xray_sdk is not installed: traces carry no handler subsegments or correlation_id "
            "annotations (Powertools' tracer extra belongs in the dependency layer)"
        )
    return _tracer


def trace_handler[F: Callable[..., Any]](handler: F) -> F:
    """``handler`` run in the Tracer's ``## handler`` subsegment (annotated ColdStart and Service; an
    exception it raises is recorded), or ``handler`` itself without a Tracer.

    The response is never captured (``capture_response=False``): an API's response is the resource it
    returns (orders, payments, their amounts and customers), and trace metadata is readable by anyone
    with X-Ray read access, outside the tables' access control and retention. A batch response holds
    only ids, but one rule for every function keeps payloads out of traces as they are out of logs."""
    active = tracer()
    if active is None:
        return handler
    return cast("F", active.capture_lambda_handler(handler, capture_response=False))


def annotate_correlation_id(correlation_id: str | None) -> None:
    """Annotate the current (sub)segment with ``correlation_id`` (indexed by X-Ray, so searchable)."""
    active = tracer()
    if active is not None and correlation_id:
        active.put_annotation(CORRELATION_ID_ANNOTATION, correlation_id[:_ANNOTATION_MAX_CHARS])


@contextmanager
def record_subsegment(correlation_id: str) -> Iterator[None]:
    """One record's own ``## record`` subsegment, annotated with its ``correlation_id``.

    An annotation belongs to one (sub)segment and holds one value: on the handler's subsegment each
    record of a batch would overwrite the one before, and only the last would be found. A subsegment
    is cheap: an object and, when it closes, one small UDP datagram to the local X-Ray daemon (Powertools
    streams subsegments instead of batching them), next to the record's own AWS calls, each a subsegment
    already; X-Ray bills traces, not subsegments. X-Ray indexes at most 50 annotations per trace: the
    default batch of 10 records fits, a batch of many more leaves its last records unfindable by it."""
    active = tracer()
    if active is None:
        yield
        return
    with active.provider.in_subsegment(name="## record"):
        annotate_correlation_id(correlation_id)
        yield


def record_metric(name: str, value: int = 1, event_type: str | None = None) -> None:
    """Count ``name`` for ``event_type``; aggregated inside ``metrics_batch``, else emitted now."""
    key = (name, event_type or "unknown")
    with _lock:
        if _pending is not None:
            _pending[key] += value
            return
    _emit(key[1], {key[0]: value})


@contextmanager
def metrics_batch() -> Iterator[None]:
    """Aggregate record_metric calls and flush them (one EMF line per eventType, its metrics together)
    on exit."""
    global _pending
    with _lock:
        outer = _pending is not None
        if not outer:
            _pending = Counter()
    try:
        yield
    finally:
        if not outer:
            with _lock:
                pending, _pending = _pending, None
            by_type: dict[str, dict[str, int]] = {}
            for (name, event_type), value in sorted((pending or Counter()).items()):
                by_type.setdefault(event_type, {})[name] = value
            for event_type, values in by_type.items():
                _emit(event_type, values)


def _metrics_disabled() -> bool:
    # Same switch as Powertools Metrics (single_metric does not check it itself).
    return os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() in ("1", "true", "yes", "on")


def _tracing_disabled() -> bool:
    # Powertools Tracer's own switch, read the same way.
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "").lower() in ("1", "true", "yes", "on")


def _emit(event_type: str, values: Mapping[str, int]) -> None:
    if _metrics_disabled():
        return
    # One EMF line, two dimension sets: {service, eventType} for dashboards, {service} alone so an alarm
    # (which cannot SEARCH across eventTypes) can watch e.g. every PayloadConflict of a service.
    # Powertools' single_metric emits only one dimension set, hence the hand-written EMF document.
    document = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace(),
                    "Dimensions": [["service", "eventType"], ["service"]],
                    "Metrics": [{"Name": name, "Unit": "Count"} for name in values],
                }
            ],
        },
        "service": service_name(),
        "eventType": event_type,
        **values,
    }
    try:
        print(json.dumps(document, separators=(",", ":")), flush=True)
    except Exception:  # a metric must never fail the record it describes
        logger().warning(
            "could not emit metric", extra={"metrics": sorted(values), "eventType": event_type}, exc_info=True
        )
