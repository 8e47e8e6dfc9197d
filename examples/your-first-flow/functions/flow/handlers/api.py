"""Flow HTTP API: ``POST /tasks`` -- the task queued, 202. Thin: Powertools resolver with request
validation (``flow.models``), the domain in ``flow.intake``."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from flow.intake import submit_task
from flow.models import ErrorResponse, FieldError, TaskAccepted, TaskRequest
from flow.settings import API
from flow.wiring import wiring
from relay import api

_wiring = wiring.checked(API)
app = APIGatewayHttpResolver(enable_validation=True)
api.answer_unmatched_paths(app)
errors = api.ErrorAnswers(app, model=ErrorResponse, field_model=FieldError, not_done="nothing was queued")
MAX_BODY_BYTES = 16 * 1024


@app.post(
    "/tasks",
    summary="Submit a task (asynchronous: 202, then the worker does it once)",
    responses={
        202: errors.doc("Accepted and queued", TaskAccepted),
        **errors.body_docs(too_large="Body larger than 16 KiB", not_done="nothing queued"),
        503: errors.doc("The queue is unavailable; retry"),
    },
    tags=["flow"],
)
def post_task(task: Annotated[TaskRequest, Body(embed=False)]) -> Response[dict[str, Any]]:
    wired = _wiring()
    submit_task(
        task.task_id,
        task.title,
        sqs_client=wired.api_sqs,
        queue_url=wired.settings.require("tasks_queue_url"),
        correlation_id=api.correlation_id(app),
    )
    return Response(
        202, content_type="application/json", body=TaskAccepted(task_id=task.task_id).to_json_dict()
    )


handler = api.lambda_handler(app, max_body_bytes=lambda: MAX_BODY_BYTES)
