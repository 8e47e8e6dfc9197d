"""Scores HTTP API: ``POST /score-snapshots`` (202, job enqueued) and ``GET /agents/{agentId}/scores``.

Thin: Powertools resolver with request validation (``scores.models``), the domain in
``scores.snapshots``. ``POST /score-snapshots`` sits behind the API-key authorizer
(``scores.authorizer``); it does one SendMessage and answers, well inside the API Destination's
5-second timeout. The OpenAPI document generated from this resolver is checked in as
``functions/scores/openapi.json``; regenerate it with
``PYTHONPATH=layers/relay/python:functions python -m scores.api > functions/scores/openapi.json``.
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from relay import api
from relay.errors import TransientError, classify
from relay.observability import logger as relay_logger
from scores.hours import FIRST_HOUR, HOUR, LAST_HOUR, InstantOutOfRange, hour_start, normalise_hour
from scores.models import (
    AgentScores,
    ErrorResponse,
    FieldError,
    ScoreSnapshotView,
    SnapshotAccepted,
    SnapshotHourAhead,
    SnapshotRequest,
)
from scores.runtime import runtime
from scores.snapshots import enqueue_snapshot

logger = relay_logger()
app = APIGatewayHttpResolver(enable_validation=True)
api.answer_unmatched_paths(app)

_JSON = "application/json"
_AGENT_ID = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"
# A snapshot request is one field (the rule passes the event's detail); anything this large is not one.
MAX_BODY_BYTES = 16 * 1024


def _error(
    status: int,
    error: str,
    message: str,
    fields: list[FieldError] | None = None,
    headers: dict[str, str] | None = None,
) -> Response[dict[str, Any]]:
    body = ErrorResponse(error=error, message=message, fields=fields).to_json_dict()
    return Response(status_code=status, content_type=_JSON, body=body, headers=headers)


def _doc(description: str, model: type[BaseModel] = ErrorResponse) -> OpenAPIResponse:
    return {"description": description, "content": {_JSON: {"model": model}}}


@app.post(
    "/score-snapshots",
    summary="Request the score snapshot of an hour (asynchronous, idempotent)",
    description=(
        "Called hourly by EventBridge (API Destination, x-api-key). Enqueues the job for the UTC hour of "
        "snapshotHour and answers 202 at once; calling again for the same hour is harmless: the job has "
        "the same eventId and each agent gets one snapshot per hour."
    ),
    responses={
        202: _doc("Accepted; the snapshot is computed asynchronously", SnapshotAccepted),
        400: _doc("Invalid body: field-level errors (field `body` when it is not JSON), nothing enqueued"),
        409: _doc("snapshotHour is more than an hour ahead of now: too early, nothing enqueued"),
        413: _doc("Body larger than 16 KiB"),
        415: _doc("Body that is not application/json (UTF-8)"),
        503: _doc("The queue is unavailable; retry"),
    },
    tags=["scores"],
)
def request_snapshot(request: Annotated[SnapshotRequest, Body(embed=False)]) -> Response[dict[str, Any]]:
    rt = runtime()
    event = app.current_event
    correlation_id = event.headers.get("x-correlation-id") or event.request_context.request_id
    try:
        envelope = enqueue_snapshot(
            request.snapshot_hour,
            sqs_client=rt.sqs,
            queue_url=rt.settings.require("snapshot_queue_url"),
            correlation_id=correlation_id,
        )
    except Exception as exc:
        # Throttling, timeouts, 5xx -> TransientError -> 503, which the API Destination retries.
        error = classify(exc)
        if error is exc:
            raise
        raise error from exc
    logger.info(
        "snapshot job enqueued", extra={"snapshot_hour": request.snapshot_hour, "event_id": envelope.event_id}
    )
    body = SnapshotAccepted(snapshot_hour=request.snapshot_hour).to_json_dict()
    return Response(status_code=202, content_type=_JSON, body=body)


@app.get(
    "/agents/<agentId>/scores",
    summary="An agent's hourly score snapshots",
    description=(
        "Oldest first; `from` and `to` (inclusive) are ISO-8601 date-times, taken to their UTC hour. "
        "A range whose `from` is after its `to` is empty."
    ),
    responses={
        200: _doc("The snapshots", AgentScores),
        400: _doc("Invalid agent id or range"),
        404: _doc("An agent id the router cannot match (a character outside the id's pattern)"),
    },
    tags=["scores"],
)
def get_scores(
    agent_id: Annotated[str, Path(alias="agentId", min_length=1, max_length=256, pattern=_AGENT_ID)],
    from_: Annotated[
        str | None,
        Query(
            alias="from",
            max_length=64,
            description="First hour (inclusive)",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None,
    to: Annotated[
        str | None,
        Query(max_length=64, description="Last hour (inclusive)", json_schema_extra={"format": "date-time"}),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many snapshots")] = 500,
) -> Response[dict[str, Any]]:
    fields: list[FieldError] = []
    hours: dict[str, str | None] = {"from": None, "to": None}
    for name, raw in (("from", from_), ("to", to)):
        if raw is None:
            continue
        try:
            hours[name] = normalise_hour(raw)
        except InstantOutOfRange as exc:  # a valid date-time beyond year 1 or 9999 once in UTC
            hours[name] = LAST_HOUR if exc.later else FIRST_HOUR
        except ValueError as exc:
            fields.append(FieldError(field=name, message=str(exc)))
    if fields:
        return _error(400, "ValidationError", "the request is invalid", fields)
    if hours["from"] and hours["to"] and hours["from"] > hours["to"]:  # an empty range, not an invalid one
        empty = AgentScores(agent_id=agent_id, snapshots=[])
        return Response(status_code=200, content_type=_JSON, body=empty.to_json_dict())
    snapshots, more = runtime().api_store.snapshots(
        agent_id, from_hour=hours["from"], to_hour=hours["to"], limit=limit
    )
    next_from = None
    if more and snapshots:
        next_from = (hour_start(snapshots[-1].snapshot_hour) + HOUR).strftime("%Y-%m-%dT%H:00:00Z")
    view = AgentScores(
        agent_id=agent_id,
        snapshots=[
            ScoreSnapshotView(
                snapshot_hour=s.snapshot_hour,
                score=s.score,
                verified=s.verified,
                mismatched=s.mismatched,
                unreachable=s.unreachable,
                total=s.total,
                counted_before=s.counted_before,
                computed_at=s.computed_at,
            )
            for s in snapshots
        ],
        next_from=next_from,
    )
    return Response(status_code=200, content_type=_JSON, body=view.to_json_dict())


@app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
def _invalid_request(exc: RequestValidationError) -> Response[Any]:
    pairs = api.field_errors(exc.errors(), unqualified=("body", "query", "path"), strip_value_error=True)
    fields = [FieldError(field=field, message=message) for field, message in pairs]
    return _error(400, "ValidationError", "the request is invalid; nothing was enqueued", fields)


@app.exception_handler(SnapshotHourAhead)  # type: ignore[untyped-decorator]
def _too_early(exc: SnapshotHourAhead) -> Response[Any]:
    # 409, not 400: the request is valid, the hour has not come (an API Destination retries a 409).
    return _error(409, "SnapshotHourAhead", str(exc))


@app.exception_handler(TransientError)  # type: ignore[untyped-decorator]
def _unavailable(exc: TransientError) -> Response[Any]:
    logger.warning("dependency unavailable", extra={"error": str(exc)})
    return _error(
        503, "ServiceUnavailable", "a dependency is unavailable; retry later", headers={"Retry-After": "1"}
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # The body is screened before the resolver parses it: size, Content-Type, base64, UTF-8 and JSON
    # limits, each a 4xx (relay.api).
    return api.resolve(app, event, context, max_body_bytes=MAX_BODY_BYTES)


def openapi_document() -> str:
    """The OpenAPI document as checked in (stable key order, trailing newline).

    Powertools documents its default ``422 HTTPValidationError`` on every validated route; this API
    answers validation errors with 400, so those default entries and their schemas are removed.
    """
    return api.openapi_document(app, title="Relay scores API")


if __name__ == "__main__":
    print(openapi_document(), end="")
