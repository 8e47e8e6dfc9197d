"""Lazy Powertools Logger / Metrics / Tracer singletons and the kernel's EMF counters.

Metrics (namespace ``POWERTOOLS_METRICS_NAMESPACE``, default ``Relay``), all Count, dimensions
``service`` and ``eventType``:

* Processed -- records acknowledged after the handler returned (duplicates included);
* Duplicate -- commits recognised as already applied (relay.idempotency);
* Parked -- permanent failures moved to the DLQ;
* Retried -- transient failures backed off and reported failed;
* PayloadConflict -- same eventId, different payload (alarm on it).

Counters are aggregated per (name, eventType) while a batch is being consumed and flushed as one
EMF line each at the end (``metrics_batch``), instead of one log line per record; outside a batch
they are emitted immediately.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics

_lock = threading.Lock()
_logger: Logger | None = None
_metrics: Metrics | None = None
_tracer: Any = None
_tracer_loaded = False
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


def tracer() -> Any:
    """The Powertools Tracer, or None when aws_xray_sdk is not installed (tracing is optional)."""
    global _tracer, _tracer_loaded
    if not _tracer_loaded:
        with _lock:
            if not _tracer_loaded:
                try:
                    from aws_lambda_powertools.tracing import Tracer

                    _tracer = Tracer(service=service_name())
                except ImportError:  # pragma: no cover - depends on the layer contents
                    _tracer = None
                _tracer_loaded = True
    return _tracer


def record_metric(name: str, value: int = 1, event_type: str | None = None) -> None:
    """Count ``name`` for ``event_type``; aggregated inside ``metrics_batch``, else emitted now."""
    key = (name, event_type or "unknown")
    with _lock:
        if _pending is not None:
            _pending[key] += value
            return
    _emit(key[0], key[1], value)


@contextmanager
def metrics_batch() -> Iterator[None]:
    """Aggregate record_metric calls and flush them (one EMF line per name/eventType) on exit."""
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
            for (name, event_type), value in sorted((pending or Counter()).items()):
                _emit(name, event_type, value)


def _metrics_disabled() -> bool:
    # Same switch as Powertools Metrics (single_metric does not check it itself).
    return os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() in ("1", "true", "yes", "on")


def _emit(name: str, event_type: str, value: int) -> None:
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
                    "Metrics": [{"Name": name, "Unit": "Count"}],
                }
            ],
        },
        "service": service_name(),
        "eventType": event_type,
        name: value,
    }
    try:
        print(json.dumps(document, separators=(",", ":")), flush=True)
    except Exception:  # a metric must never fail the record it describes
        logger().warning(
            "could not emit metric", extra={"metric": name, "eventType": event_type}, exc_info=True
        )
