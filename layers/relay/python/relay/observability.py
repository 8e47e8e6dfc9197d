"""Lazy Powertools Logger / Metrics singletons, the tracing entry points and the kernel's EMF counters.

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

Traces (OpenTelemetry, ``relay.tracing``): the kernel's entry points run the handler in a ``## handler``
span (``trace_handler``), each SQS record in its own ``## record`` span (``record_subsegment``) parented
by the trace its event was produced in, and every span carries ``correlation_id``, so that
``annotation.correlation_id = "..."`` finds one request's spans across functions.
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
    from aws_lambda_powertools import Logger, Metrics

_lock = threading.Lock()
_logger: Logger | None = None
_metrics: Metrics | None = None
_pending: Counter[tuple[str, str]] | None = None

METRIC_NAMES = ("Processed", "Duplicate", "Parked", "Retried", "PayloadConflict")


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


def trace_handler[F: Callable[..., Any]](handler: F) -> F:
    """``handler`` run in a span of its own (``relay.tracing``: OpenTelemetry, exported to X-Ray's OTLP
    endpoint when the invocation ends); an exception it raises is recorded on the span. Without tracing
    (``OTEL_SDK_DISABLED``) the handler runs as it is and no OpenTelemetry module is imported.

    The response is never recorded: an API's response is the resource it returns (orders, payments,
    their amounts and customers), and trace data is readable by anyone with X-Ray read access, outside
    the tables' access control and retention."""
    import functools

    from relay import tracing

    @functools.wraps(handler)
    def traced(event: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
        active = tracing.tracer()
        if active is None:
            return handler(event, context, *args, **kwargs)
        name = str(getattr(context, "function_name", None) or service_name())
        try:
            with (
                tracing.correlated(None),
                active.start_as_current_span(
                    f"## handler {name}",
                    attributes={"faas.coldstart": _cold_start(), "service": service_name()},
                ),
            ):
                return handler(event, context, *args, **kwargs)
        finally:
            tracing.flush()

    return cast("F", traced)


_warm = False


def _cold_start() -> bool:
    global _warm
    cold, _warm = not _warm, True
    return cold


def annotate_correlation_id(correlation_id: str | None) -> None:
    """Put ``correlation_id`` on the current span and on every span started after it in this context
    (indexed by X-Ray as an annotation, so searchable)."""
    from relay import tracing

    tracing.set_correlation_id(correlation_id)


@contextmanager
def record_subsegment(
    correlation_id: str,
    traceparent: str | None = None,
    ids: Mapping[str, str] | None = None,
    name: str = "## record",
) -> Iterator[None]:
    """One record's own span, with its ``correlation_id`` on it and on every span inside (its AWS calls).
    Its parent is the trace the record's event was produced in (``traceparent``, from the envelope), so
    one operation is one trace across API, stream, topic, queue and consumer; without one, the handler's."""
    from relay import tracing

    active = tracing.tracer()
    if active is None:
        yield
        return
    attributes = {f"relay.{key}": value for key, value in (ids or {}).items()}
    with (
        tracing.correlated(correlation_id),
        active.start_as_current_span(
            name, context=tracing.remote_context(traceparent), kind=_consumer_kind(), attributes=attributes
        ),
    ):
        yield


def _consumer_kind() -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind.CONSUMER


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
