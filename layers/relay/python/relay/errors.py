"""Error classes, and the ONE place where botocore errors and HTTP statuses are classified.

Every failure ends up in one of two families:

* ``TransientError`` -- retrying later can succeed (throttling, timeouts, 5xx, 429, connection
  errors). The consumer re-sends the message with a delay until its retry budget is spent
  (``relay.retry``), or, on a FIFO queue or without a budget, backs it off with
  ChangeMessageVisibility and reports it failed. ``OutcomeUnknown`` is the transient failure after
  which the call may nevertheless have taken effect: retry only with the same idempotency key, or ask.
* ``PermanentError`` -- retrying sends the same bytes to the same code and fails the same way
  (invalid input, unknown version, business rejection, payload conflict). The consumer parks the
  message in the DLQ at once instead of burning ``maxReceiveCount`` receives on it.
"""

from __future__ import annotations

import sys
from typing import Any

# botocore is imported lazily (inside classify) so that importing relay.errors stays free.

_TRANSIENT_CLIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "TransactionConflictException",
        "TransactionInProgressException",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "LimitExceededException",
    }
)

# Client errors that say "this request can never succeed as sent": parking is better than retrying.
_PERMANENT_CLIENT_CODES = frozenset(
    {
        "ValidationException",
        "ValidationError",
        "SerializationException",
        "InvalidParameterValue",
        "InvalidParameterException",
        "InvalidParameterValueException",
        "InvalidRequestException",
        "ConditionalCheckFailedException",
        "ItemCollectionSizeLimitExceededException",
    }
)

# Cancellation reason codes of a DynamoDB TransactWriteItems that clear up on their own.
_TRANSIENT_CANCELLATION_CODES = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)


class RelayError(Exception):
    """Base class of every error the kernel raises on purpose."""

    retryable: bool = True


class TransientError(RelayError):
    """Retry later. ``retry_after`` (seconds), when known, is the earliest useful retry."""

    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(RelayError):
    """Retrying cannot help: park the message with this error as the reason."""

    retryable = False


class DependencyUnavailable(TransientError):
    """A dependency (AWS or HTTP) throttled, timed out, or answered 5xx."""


class ConcurrentWrite(TransientError):
    """Another writer changed the entity between this step's read and its conditional write: a race,
    not an outage. Retried with a fresh read; its own type keeps the outage metrics and alarms
    (``DependencyUnavailable``) honest."""


class OutcomeUnknown(DependencyUnavailable):
    """The call may have taken effect: a timeout after the request was sent, a connection dropped
    before the answer, or an HTTP 500/502/504 answer. Retrying is safe only with the same idempotency
    key; a caller that must not act twice asks the dependency what happened instead."""


class InvalidInput(PermanentError):
    """The message is not something this consumer can ever process (malformed JSON, schema)."""


class UnknownVersion(PermanentError):
    """The envelope's major ``eventVersion`` is not supported by this consumer."""


class BusinessRejection(PermanentError):
    """The domain (or a downstream system) refused the request; a retry gets the same answer."""


class BusinessConditionFailed(PermanentError):
    """A conditional business write in an idempotent commit failed (and nothing was written)."""


class PayloadConflict(PermanentError):
    """The same eventId was already processed with a different payload."""


class ClaimCheckMismatch(PermanentError):
    """A claim-checked S3 object is missing, or its sha256/size differ from the reference."""


def _truncate(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify(exc: BaseException) -> RelayError:
    """Return ``exc`` itself if it is a RelayError, otherwise a RelayError wrapping it.

    The returned error is either a TransientError or a PermanentError; its ``__cause__`` is ``exc``.
    """
    if isinstance(exc, RelayError):
        return exc
    error = _classify_foreign(exc)
    error.__cause__ = exc
    return error


def _classify_foreign(exc: BaseException) -> RelayError:
    name = type(exc).__name__
    # Only look at libraries that are already imported: classifying must not cost an import.
    botocore_exceptions = sys.modules.get("botocore.exceptions")
    if botocore_exceptions is not None:
        if isinstance(exc, botocore_exceptions.ClientError):
            return _classify_client_error(exc.response, str(exc))
        connection_errors = (
            botocore_exceptions.EndpointConnectionError,
            botocore_exceptions.ConnectTimeoutError,
            botocore_exceptions.ReadTimeoutError,
            botocore_exceptions.ConnectionClosedError,
            botocore_exceptions.ConnectionError,
        )
        if isinstance(exc, connection_errors):
            return DependencyUnavailable(f"{name}: {_truncate(str(exc))}; will retry with backoff.")
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(exc, pydantic.ValidationError):
        # A payload that does not match the consumer's model will not match it on the next receive.
        return InvalidInput(f"payload failed validation: {_truncate(str(exc), 600)}")
    if isinstance(exc, TimeoutError | ConnectionError):
        return DependencyUnavailable(f"{name}: {_truncate(str(exc))}; will retry with backoff.")
    # Unknown exceptions are treated as transient ON PURPOSE: a bug or an unforeseen dependency
    # failure should not silently park healthy messages. They are retried with backoff until the
    # consumer's retry budget is spent (then parked with the reason) or, without one, until the
    # queue's redrive policy moves them to the DLQ after maxReceiveCount receives -- so nothing loops
    # forever and nothing is lost.
    return TransientError(
        f"unclassified {name}: {_truncate(str(exc))}; retrying (parked when its retries run out)."
    )


def _classify_client_error(response: dict[str, Any], text: str) -> RelayError:
    error = response.get("Error", {}) or {}
    code = str(error.get("Code", ""))
    status = int((response.get("ResponseMetadata", {}) or {}).get("HTTPStatusCode", 0) or 0)
    if code == "TransactionCanceledException":
        reasons = response.get("CancellationReasons") or []
        codes = [str(r.get("Code", "None")) for r in reasons]
        if any(c in _TRANSIENT_CANCELLATION_CODES for c in codes) or not codes:
            return DependencyUnavailable(
                f"DynamoDB transaction cancelled ({', '.join(codes) or 'no reasons'}); retrying."
            )
        return PermanentError(f"DynamoDB transaction cancelled ({', '.join(codes)}): {_truncate(text)}")
    if code in _TRANSIENT_CLIENT_CODES or code.startswith("Throttl") or status >= 500 or status == 429:
        return DependencyUnavailable(f"AWS {code or status}: {_truncate(text)}; will retry with backoff.")
    if code in _PERMANENT_CLIENT_CODES:
        return PermanentError(f"AWS {code}: {_truncate(text)}; the request cannot succeed as sent.")
    # AccessDenied, ResourceNotFound & co. are configuration problems that a deploy fixes: keep the
    # message (transient) so it is processed once the fix is out, instead of parking a whole stream.
    return TransientError(
        f"AWS {code or status}: {_truncate(text)}; retrying (parked when its retries run out)."
    )


def classify_cancellation_reason(index: int, reason: dict[str, Any], *, table: str = "?") -> RelayError:
    """Classify one non-conditional TransactWriteItems cancellation reason (see relay.idempotency)."""
    code = str(reason.get("Code", "None"))
    message = str(reason.get("Message", ""))
    if code in _TRANSIENT_CANCELLATION_CODES:
        return DependencyUnavailable(f"DynamoDB transaction item {index} on {table}: {code}; retrying.")
    return InvalidInput(
        f"DynamoDB rejected transaction item {index} on {table}: {code} {_truncate(message)}. "
        "The write itself is invalid; fix the code that builds it."
    )


def classify_http_status(
    status: int, body: str = "", *, retry_after: float | None = None, what: str = "downstream"
) -> RelayError | None:
    """Classify an HTTP response: ``None`` for success, otherwise the error to raise."""
    if status < 400:
        return None
    snippet = _truncate(body, 200)
    # 408/425/429 and 5xx say "not now": retry later. 409 is included because idempotent APIs answer
    # it while a request with the same idempotency key is still being processed.
    if status in (408, 409, 425, 429) or status >= 500:
        return DependencyUnavailable(
            f"{what} answered HTTP {status}: {snippet}; will retry with backoff.", retry_after=retry_after
        )
    return BusinessRejection(
        f"{what} rejected the request with HTTP {status}: {snippet}. Retrying sends the same request; parked."
    )
