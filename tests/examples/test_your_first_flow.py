"""Your first flow (``examples/your-first-flow``), end to end on the app-agnostic emulator: a second,
tiny CDK app synthesized, provisioned and run with IAM enforced against its synthesized roles, over real
HTTP (SigV4) and real SQS and DynamoDB APIs. Nothing of Relay's sandbox (``local``) takes part.

One stage for the module (synthesized into the example's ``cdk.out`` when that is missing or older than
its sources, like Relay's own). Each test isolates its data by its own task ids; waits poll with a
deadline and never assert on time.
"""

from __future__ import annotations

import ast
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from emulator import callers
from emulator.iam_report import denials, fetch_report
from emulator.mappings import SqsMapping
from emulator.server import REGION, client, free_port
from emulator.stage import Stage, StageConfig

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "your-first-flow"
# What the example is synthesized from: its own files, and the Relay constructs, kernel and feature flags
# it builds on (paths relative to the example).
SOURCES = (
    "app.py",
    "cdk.json",
    "flow_stack.py",
    "functions",
    "../../infra",
    "../../layers",
    "../../cdk.json",
)
WORKER = "-flow-WorkerFunction"  # the worker's function name, as the stage knows it
DEADLINE = 30.0  # seconds; far below the tasks queue's visibility timeout (a batch retried whole)


@dataclass(frozen=True)
class Run:
    stage: Stage
    imported_at_start: list[str]  # the modules this process imported while the stage started


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    config = StageConfig(
        app_root=EXAMPLE,
        sources=SOURCES,
        emulator_port=free_port(),
        api_port=0,
        write_state=False,
        log_dir=tmp_path_factory.mktemp("your-first-flow-logs"),
    )
    before = set(sys.modules)
    with Stage(config, log=lambda *_: None) as running:
        yield Run(running, sorted(set(sys.modules) - before))


@pytest.fixture(scope="module")
def stage(run: Run) -> Stage:
    return run.stage


@pytest.fixture(autouse=True)
def no_iam_denials(stage: Stage) -> Iterator[None]:
    """Every test fails on a call IAM denied (a grant the stack forgot), naming it."""
    before = len(denials(stage.endpoint))
    yield
    new = denials(stage.endpoint)[before:]
    assert not new, "calls denied by IAM (missing grants?):\n" + "\n".join(
        f"  {d['function']}: {d['action']} on {d['resource']} {d['reason']}" for d in new
    )


# -- how a client and an operator see the flow ----------------------------------------------------


def post_task(stage: Stage, body: Any, *, caller: str | None = callers.CLIENT) -> requests.Response:
    """``POST /tasks`` signed with SigV4 as ``caller`` (None: unsigned), as a client on AWS signs."""
    data = json.dumps(body).encode()
    request = AWSRequest(
        method="POST", url=f"{stage.api_url}/tasks", data=data, headers={"Content-Type": "application/json"}
    )
    if caller is not None:
        SigV4Auth(stage.callers[caller].credentials(), "execute-api", REGION).add_auth(request)
    return requests.post(f"{stage.api_url}/tasks", data=data, headers=dict(request.headers), timeout=30)


def new_task() -> dict[str, str]:
    return {"taskId": f"task-{uuid.uuid4().hex[:12]}", "title": "write the first flow"}


def queue_url(stage: Stage, suffix: str) -> str:
    (url,) = [url for name, url in stage.topology.queues.items() if name.endswith(suffix)]
    return url


def table(stage: Stage) -> str:
    (name,) = [t for t in stage.topology.tables if t.endswith("-flow-tasks")]
    return name


def item(stage: Stage, pk: str, sk: str) -> dict[str, Any] | None:
    found = client("dynamodb", stage.endpoint).get_item(
        TableName=table(stage), Key={"pk": {"S": pk}, "sk": {"S": sk}}, ConsistentRead=True
    )
    answer: dict[str, Any] | None = found.get("Item")
    return answer


def eventually[T](check: Callable[[], T | None], what: str, timeout: float = DEADLINE) -> T:
    """``check()``'s first truthy answer, polled until ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = check()
        if answer:
            return answer
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout:g} s")


def done_task(stage: Stage, task_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        found = item(stage, f"TASK#{task_id}", "TASK")
        return found if found and found["status"]["S"] == "DONE" else None

    return eventually(done, f"task {task_id} DONE")


def queued(stage: Stage) -> int:
    """Messages in the tasks queue, visible or held by a poller."""
    attributes = client("sqs", stage.endpoint).get_queue_attributes(
        QueueUrl=queue_url(stage, "-flow-tasks"),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def parked(stage: Stage, match: Callable[[str], bool]) -> dict[str, Any]:
    """The message in the tasks DLQ whose body matches, read without hiding any (visibility 0)."""

    def find() -> dict[str, Any] | None:
        messages = client("sqs", stage.endpoint).receive_message(
            QueueUrl=queue_url(stage, "-flow-tasks-dlq"),
            MessageAttributeNames=["All"],
            MaxNumberOfMessages=10,
            VisibilityTimeout=0,
            WaitTimeSeconds=1,
        )
        return next((m for m in messages.get("Messages", []) if match(m["Body"])), None)

    return eventually(find, "the message parked in the tasks DLQ")


def settled(stage: Stage) -> None:
    """Wait until the tasks queue is empty and no batch is being invoked."""
    eventually(lambda: queued(stage) == 0 and stage.in_flight() == 0, "the tasks queue drained")


def worker_mapping(stage: Stage) -> SqsMapping:
    assert stage.mappings is not None
    (mapping,) = [m for m in stage.mappings.items if isinstance(m, SqsMapping) and WORKER in m.spec.function]
    return mapping


# -- the HTTP route --------------------------------------------------------------------------------


def test_a_signed_post_is_accepted_with_202_and_the_task_is_done_once(stage: Stage) -> None:
    task = new_task()
    response = post_task(stage, task)
    assert response.status_code == 202, response.text
    assert response.json() == {"taskId": task["taskId"], "status": "PENDING"}
    done = done_task(stage, task["taskId"])
    assert done["title"]["S"] == task["title"]
    assert done["version"]["N"] == "1"


def test_a_retried_post_is_the_same_event_and_the_task_is_done_once(stage: Stage) -> None:
    task = new_task()
    assert post_task(stage, task).status_code == 202
    first = done_task(stage, task["taskId"])
    assert post_task(stage, task).status_code == 202
    settled(stage)
    assert item(stage, f"TASK#{task['taskId']}", "TASK") == first


def test_an_unsigned_post_is_refused_403_and_nothing_is_queued(stage: Stage) -> None:
    settled(stage)
    with stage.paused(WORKER):
        response = post_task(stage, new_task(), caller=None)
        assert response.status_code == 403
        assert response.json() == {"message": "Missing Authentication Token"}
        assert queued(stage) == 0


def test_a_caller_without_the_invoke_grant_is_refused_403_and_nothing_is_queued(stage: Stage) -> None:
    settled(stage)
    with stage.paused(WORKER):
        response = post_task(stage, new_task(), caller=callers.DENIED)
        assert response.status_code == 403
        assert "is not authorized to perform: execute-api:Invoke" in response.json()["message"]
        assert queued(stage) == 0


def test_an_invalid_body_is_refused_400_with_field_errors_and_nothing_is_queued(stage: Stage) -> None:
    settled(stage)
    with stage.paused(WORKER):
        response = post_task(stage, {"taskId": "no spaces allowed", "title": "", "priority": 1})
        assert response.status_code == 400
        answer = response.json()
        assert answer["error"] == "ValidationError"
        assert {f["field"] for f in answer["fields"]} == {"taskId", "title", "priority"}
        assert queued(stage) == 0
        # The count would have seen it: a valid task, held by the paused worker, is counted.
        assert post_task(stage, new_task()).status_code == 202
        assert queued(stage) == 1


# -- the consumer ------------------------------------------------------------------------------------


def test_a_poison_message_is_parked_with_its_reason_and_its_batch_neighbour_is_done(stage: Stage) -> None:
    poison = f"{{not json {uuid.uuid4().hex}"
    task = new_task()
    mapping = worker_mapping(stage)
    failed_before = mapping.stats.failed_records
    settled(stage)
    with stage.paused(WORKER):
        # Both wait in the queue, so the worker receives them in one batch when it resumes.
        client("sqs", stage.endpoint).send_message(
            QueueUrl=queue_url(stage, "-flow-tasks"), MessageBody=poison
        )
        assert post_task(stage, task).status_code == 202
        assert queued(stage) == 2
    done_task(stage, task["taskId"])
    attributes = parked(stage, lambda body: body == poison)["MessageAttributes"]
    assert attributes["relay.errorClass"]["StringValue"] == "InvalidInput"
    assert "not valid JSON" in attributes["relay.errorMessage"]["StringValue"]
    # Parked and reported handled: the batch answered no failure, so SQS redelivered nothing.
    assert mapping.stats.failed_records == failed_before


def test_a_duplicate_delivery_is_acknowledged_without_a_second_effect(stage: Stage) -> None:
    task = new_task()
    mapping = worker_mapping(stage)
    duplicated_before = mapping.stats.duplicated_records
    with stage.delivering_twice(WORKER):
        assert post_task(stage, task).status_code == 202
        done = done_task(stage, task["taskId"])
        settled(stage)
    assert mapping.stats.duplicated_records > duplicated_before  # the batch was invoked twice
    assert item(stage, f"TASK#{task['taskId']}", "TASK") == done
    assert done["version"]["N"] == "1"


def test_the_same_task_id_with_another_title_is_parked_as_a_payload_conflict(stage: Stage) -> None:
    task = new_task()
    assert post_task(stage, task).status_code == 202
    done = done_task(stage, task["taskId"])
    assert post_task(stage, {**task, "title": "another title"}).status_code == 202
    message = parked(stage, lambda body: task["taskId"] in body and "another title" in body)
    assert message["MessageAttributes"]["relay.errorClass"]["StringValue"] == "PayloadConflict"
    assert item(stage, f"TASK#{task['taskId']}", "TASK") == done


# -- the schedule ----------------------------------------------------------------------------------


def test_the_hourly_schedule_puts_its_tick_on_the_queue_and_the_worker_records_it_once(stage: Stage) -> None:
    schedule = stage.schedule_named("-flow-tick")
    hour = "2026-11-29T10:00:00Z"
    (firing,) = stage.fire_schedule(schedule, scheduled_time=hour)
    assert firing.sent and not firing.error
    tick = eventually(lambda: item(stage, f"TICK#{hour}", "TICK"), f"the tick of {hour}")
    # Scheduler delivers at least once: the same hour again is acknowledged without effect.
    (again,) = stage.fire_schedule(schedule, scheduled_time=hour)
    assert again.sent
    settled(stage)
    assert item(stage, f"TICK#{hour}", "TICK") == tick


# -- what the run proves about the emulator ---------------------------------------------------------


def test_every_call_was_authorized_against_the_synthesized_roles_and_none_was_denied(stage: Stage) -> None:
    report = fetch_report(stage.endpoint)
    calls = {fn["function"]: sum(fn["calls"].values()) for fn in report["functions"]}
    denied = {fn["function"]: fn["denied"] for fn in report["functions"] if fn["denied"]}
    assert denied == {} and report.get("serviceDenials", {}) == {}
    # IAM was enforced on the flow's own callers: each made calls the emulator authorized.
    for caller in ("-flow-ApiFunction", WORKER, "-flow-tick"):
        assert any(caller in name and count for name, count in calls.items()), (caller, calls)


def test_the_example_runs_on_the_emulator_alone_with_nothing_of_relays_sandbox(run: Run) -> None:
    assert type(run.stage) is Stage and Stage.__module__ == "emulator.stage"
    assert [name for name in run.imported_at_start if name.split(".")[0] == "local"] == []
    sources = [*EXAMPLE.glob("*.py"), *(EXAMPLE / "functions").rglob("*.py"), Path(__file__)]
    assert [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sources
        for name in roots(path)
        if name == "local"
    ] == []


def roots(path: Path) -> set[str]:
    """The top-level packages a file imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found
