"""Scores HTTP API: ``POST /score-snapshots`` (202, job enqueued) and ``GET /agents/{agentId}/scores``.

Thin: Powertools resolver with request validation (``scores.models``), the domain in
``scores.snapshots``. ``POST /score-snapshots`` sits behind the API-key authorizer
(``scores.handlers.authorizer``); it does one SendMessage and answers, well inside the API Destination's
5-second timeout. The OpenAPI document generated from this resolver is checked in as
``functions/scores/openapi.json``; regenerate it with ``make openapi``.
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from relay import api
from relay.errors import classify
from relay.observability import logger as relay_logger
from scores.hours import FIRST_HOUR, HOUR, LAST_HOUR, InstantOutOfRange, hour_start, normalise_hour
from scores.models import (
    AgentScores,
    FieldError,
    ScoreSnapshotView,
    SnapshotAccepted,
    SnapshotHourAhead,
    SnapshotRequest,
)
from scores.settings import API
from scores.snapshots import enqueue_snapshot
from scores.wiring import wiring

logger = relay_logger()
_wiring = wiring.checked(API)
_AGENT_ID = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"
# A snapshot request is one field (the rule passes the event's detail); anything this large is not one.
http = api.HttpApi(
    "Relay scores API",
    max_body_bytes=16 * 1024,
    not_done="nothing was enqueued",
    unqualified=("body", "query", "path"),
    strip_value_error=True,
)
app, errors, handler, openapi_document = http.app, http.errors, http.handler, http.openapi_document


@app.post(
    "/score-snapshots",
    summary="Request the score snapshot of an hour (asynchronous, idempotent)",
    description=(
        "Called hourly by EventBridge (API Destination, x-api-key). Enqueues the job for the UTC hour of "
        "snapshotHour and answers 202 at once; calling again for the same hour is harmless: the job has "
        "the same eventId and each agent gets one snapshot per hour."
    ),
    responses={
        202: errors.doc("Accepted; the snapshot is computed asynchronously", SnapshotAccepted),
        **errors.body_docs(
            too_large="Body larger than 16 KiB", invalid="Invalid body", not_done="nothing enqueued"
        ),
        409: errors.doc("snapshotHour is more than an hour ahead of now: too early, nothing enqueued"),
        503: errors.doc("The queue is unavailable; retry"),
    },
    tags=["scores"],
)
def request_snapshot(request: Annotated[SnapshotRequest, Body(embed=False)]) -> Response[dict[str, Any]]:
    wired = _wiring()
    try:
        envelope = enqueue_snapshot(
            request.snapshot_hour,
            sqs_client=wired.api_sqs,
            queue_url=wired.settings.require("snapshot_queue_url"),
            correlation_id=api.correlation_id(app),
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
    return api.json_response(202, SnapshotAccepted(snapshot_hour=request.snapshot_hour))


@app.get(
    "/agents/<agentId>/scores",
    summary="An agent's hourly score snapshots",
    description=(
        "Oldest first; `from` and `to` (inclusive) are ISO-8601 date-times, taken to their UTC hour. "
        "A range whose `from` is after its `to` is empty."
    ),
    responses=errors.read_docs(
        "snapshots", AgentScores, invalid="Invalid agent id or range", unmatched="An agent id"
    ),
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
        return errors.response(400, "ValidationError", "the request is invalid", fields)
    if hours["from"] and hours["to"] and hours["from"] > hours["to"]:  # an empty range, not an invalid one
        return api.json_response(200, AgentScores(agent_id=agent_id, snapshots=[]))
    snapshots, more = _wiring().api_store.snapshots(
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
    return api.json_response(200, view)


@app.exception_handler(SnapshotHourAhead)  # type: ignore[untyped-decorator]
def _too_early(exc: SnapshotHourAhead) -> Response[Any]:
    # 409, not 400: the request is valid, the hour has not come (an API Destination retries a 409).
    return errors.response(409, "SnapshotHourAhead", str(exc))


http.main(__name__)
