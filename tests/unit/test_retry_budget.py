"""Retry budgets measured in time (relay.retry + relay.consumer): a transient failure on a standard
queue is re-sent to the queue with DelaySeconds and the chain's relay.* attributes, the original is
reported handled, and once the budget is spent the message is parked with the reason."""

from __future__ import annotations

import base64
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from relay.consumer import ConsumerSettings, RecordContext, consume
from relay.envelope import Envelope
from relay.errors import BusinessRejection, DependencyUnavailable, TransientError
from relay.retry import (
    ATTEMPT,
    FIRST_FAILURE_AT,
    LAST_ERROR,
    MAX_DELAY_SECONDS,
    RetryBudgetSpent,
    RetryPlan,
    delay_seconds,
    plan_retry,
)
from tests.builders import (
    FakeContext,
    binary_attribute,
    envelope,
    fifo_record,
    record_from_received,
    sqs_event,
    sqs_record,
    string_attribute,
)
from tests.unit.fakes import FakeSqs

QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/relay-queue"
BUDGETED = ConsumerSettings(
    queue_url=QUEUE_URL,
    dlq_url="https://sqs.us-east-1.amazonaws.com/123456789012/relay-dlq",
    backoff_base_seconds=2,
    backoff_cap_seconds=900,
    retry_budget_seconds=3600,
)
IN_PLACE = ConsumerSettings(queue_url=BUDGETED.queue_url, dlq_url=BUDGETED.dlq_url, backoff_base_seconds=2)
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def number_attribute(value: float | int) -> dict[str, Any]:
    return {"stringValue": str(value), "stringListValues": [], "binaryListValues": [], "dataType": "Number"}


def chain(attempt: int, first_failure_at: datetime, last_error: str = "down") -> dict[str, Any]:
    """The relay.* attributes of the ``attempt``-th retry copy, as Lambda delivers them."""
    return {
        ATTEMPT: number_attribute(attempt),
        FIRST_FAILURE_AT: number_attribute(first_failure_at.timestamp()),
        LAST_ERROR: string_attribute(last_error),
    }


def failures(response: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def failing(error: Exception) -> Any:
    def handle(env: Envelope, ctx: RecordContext) -> None:
        raise error

    return handle


def copies(sqs: FakeSqs) -> list[dict[str, Any]]:
    return [s for s in sqs.sent if s["QueueUrl"] == QUEUE_URL]


def parked(sqs: FakeSqs) -> list[dict[str, Any]]:
    return [s for s in sqs.sent if s["QueueUrl"] == BUDGETED.dlq_url]


def delivered(copy: dict[str, Any], message_id: str = "copy-1") -> dict[str, Any]:
    """The record Lambda delivers for a re-sent copy (a new message: receive count 1)."""
    received = {
        "MessageId": message_id,
        "ReceiptHandle": f"rh-{message_id}",
        "Body": copy["MessageBody"],
        "Attributes": {"ApproximateReceiveCount": "1"},
        "MessageAttributes": copy["MessageAttributes"],
    }
    return record_from_received(received, "arn:aws:sqs:us-east-1:123456789012:relay-queue")


class SqsRefusingCopies(FakeSqs):
    """The DLQ takes messages; the consumed queue refuses the re-send."""

    def send_message(self, **params: Any) -> dict[str, Any]:
        if params["QueueUrl"] == QUEUE_URL:
            raise ConnectionError("SQS unreachable")
        return super().send_message(**params)


# --- the plan --------------------------------------------------------------------------------------


def test_first_failure_plans_the_first_retry_and_starts_the_chain_now() -> None:
    plan = plan_retry({}, error=DependencyUnavailable("down"), now=NOW, budget_seconds=3600, base=2, cap=900)
    assert (plan.attempt, plan.first_failure_at, plan.budget_seconds, plan.error) == (1, NOW, 3600, "down")
    assert 2 <= plan.delay_seconds <= 3
    assert plan.next_attempt_at == NOW + timedelta(seconds=plan.delay_seconds)
    assert plan.deadline == NOW + timedelta(hours=1)


def test_later_failures_number_the_attempts_and_carry_the_first_failure_time() -> None:
    first = NOW - timedelta(seconds=600)
    plan = plan_retry(
        chain(3, first), error=TimeoutError("slow"), now=NOW, budget_seconds=3600, base=2, cap=900
    )
    assert plan.attempt == 4
    assert plan.first_failure_at == first
    assert 16 <= plan.delay_seconds <= 20  # 2 · 2^3 plus at most 25 % jitter
    assert plan.budget_left_seconds(NOW) == 3000


def test_the_copy_a_plan_schedules_continues_the_chain() -> None:
    first = plan_retry({}, error=DependencyUnavailable("a"), now=NOW, budget_seconds=3600, base=2, cap=900)
    later = NOW + timedelta(seconds=first.delay_seconds)
    copy = delivered({"MessageBody": "{}", "MessageAttributes": first.message_attributes()})
    second = plan_retry(
        copy["messageAttributes"],
        error=DependencyUnavailable("b"),
        now=later,
        budget_seconds=3600,
        base=2,
        cap=900,
    )
    assert (second.attempt, second.first_failure_at) == (2, NOW)
    assert copy["messageAttributes"][LAST_ERROR]["stringValue"] == "a"


@pytest.mark.parametrize("cap", [900, 5000])
def test_delay_never_exceeds_the_sqs_maximum_of_900_seconds_and_keeps_its_jitter_at_the_cap(cap: int) -> None:
    rng = random.Random(7)
    delays = {delay_seconds(30, base=2, cap=cap, jitter=rng) for _ in range(200)}
    assert max(delays) <= MAX_DELAY_SECONDS
    # Cut at 900 every message that reached the cap would come back in the same second.
    assert min(delays) >= 720 and len(delays) > 50


def test_delay_is_capped_by_a_lower_backoff_cap_too() -> None:
    assert all(delay_seconds(30, base=2, cap=60, jitter=random.Random(s)) <= 60 for s in range(100))


@pytest.mark.parametrize("attempt", range(1, 13))
def test_jitter_adds_at_most_a_quarter_of_the_exponential_delay(attempt: int) -> None:
    exponential = min(2 * 2 ** (attempt - 1), 720)
    for seed in range(50):
        delay = delay_seconds(attempt, base=2, cap=900, jitter=random.Random(seed))
        assert round(exponential) <= delay <= round(exponential * 1.25)


def test_retry_after_is_honoured_up_to_the_sqs_maximum() -> None:
    hinted = plan_retry(
        {},
        error=DependencyUnavailable("busy", retry_after=120),
        now=NOW,
        budget_seconds=3600,
        base=2,
        cap=900,
    )
    assert hinted.delay_seconds == 120
    assert delay_seconds(1, base=2, cap=900, retry_after=7200) == MAX_DELAY_SECONDS


def test_error_is_truncated_to_256_characters() -> None:
    plan = plan_retry({}, error=TransientError("x" * 1000), now=NOW, budget_seconds=60, base=2, cap=900)
    assert len(plan.error) == 256 and plan.error.endswith("…")


def test_a_failure_once_the_budget_is_spent_raises_retry_budget_spent() -> None:
    first = NOW - timedelta(seconds=3600)
    with pytest.raises(RetryBudgetSpent) as raised:
        plan_retry(
            chain(11, first),
            error=DependencyUnavailable("still down"),
            now=NOW,
            budget_seconds=3600,
            base=2,
            cap=900,
        )
    spent = raised.value
    assert (spent.first_failure_at, spent.attempts, spent.last_error) == (first, 12, "still down")
    message = str(spent)
    assert "transient failures lasted 3600 s (since 2024-05-01T11:00:00Z)" in message
    assert "retry budget of 3600 s" in message and "after 12 attempts" in message
    assert "last error: still down" in message
    # One second earlier, it is still retried.
    plan = plan_retry(
        chain(11, first),
        error=DependencyUnavailable("x"),
        now=NOW - timedelta(seconds=1),
        budget_seconds=3600,
        base=2,
        cap=900,
    )
    assert plan.attempt == 12


def test_a_first_failure_in_the_future_counts_as_now_so_no_chain_is_endless() -> None:
    plan = plan_retry(
        chain(5, NOW + timedelta(days=365)),
        error=TransientError("x"),
        now=NOW,
        budget_seconds=60,
        base=2,
        cap=900,
    )
    assert plan.first_failure_at == NOW


def test_a_message_without_relay_attempt_starts_a_new_chain_even_with_a_parked_first_failure() -> None:
    # A message redriven from the DLQ: parking kept relay.firstFailureAt (ISO), not relay.attempt.
    redriven = {FIRST_FAILURE_AT: string_attribute("2024-01-01T00:00:00Z")}
    plan = plan_retry(redriven, error=TransientError("x"), now=NOW, budget_seconds=60, base=2, cap=900)
    assert (plan.attempt, plan.first_failure_at) == (1, NOW)


# --- the consumer ----------------------------------------------------------------------------------


def test_transient_failure_is_re_sent_with_a_delay_and_the_original_reported_handled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = envelope(payload={"n": 1}).to_json()
    original = {"tenant": string_attribute("acme"), "blob": binary_attribute(b"\x00\xff")}
    record = sqs_record(body, message_id="m-1", message_attributes=original, receive_count=2)
    sqs = FakeSqs()
    response = consume(
        sqs_event([record]),
        FakeContext(),
        failing(DependencyUnavailable("payment system timed out")),
        settings=BUDGETED,
        sqs_client=sqs,
    )
    assert failures(response) == []  # Lambda deletes the original: the copy carries on
    assert sqs.visibility == []
    (copy,) = sqs.sent
    assert copy["QueueUrl"] == QUEUE_URL
    assert copy["MessageBody"] == body
    assert 2 <= copy["DelaySeconds"] <= 3
    attrs = copy["MessageAttributes"]
    assert attrs["tenant"] == {"DataType": "String", "StringValue": "acme"}
    assert attrs["blob"] == {"DataType": "Binary", "BinaryValue": b"\x00\xff"}
    assert attrs[ATTEMPT] == {"DataType": "Number", "StringValue": "1"}
    assert attrs[FIRST_FAILURE_AT]["DataType"] == "Number"
    assert abs(float(attrs[FIRST_FAILURE_AT]["StringValue"]) - datetime.now(UTC).timestamp()) < 60
    assert attrs[LAST_ERROR] == {"DataType": "String", "StringValue": "payment system timed out"}
    assert set(attrs) == {"tenant", "blob", ATTEMPT, FIRST_FAILURE_AT, LAST_ERROR}
    (scheduled,) = [r for r in caplog.records if r.getMessage() == "transient failure; retry scheduled"]
    assert (scheduled.attempt, scheduled.delay_seconds) == (1, copy["DelaySeconds"])  # type: ignore[attr-defined]
    assert scheduled.next_attempt_at.endswith("Z")  # type: ignore[attr-defined]
    assert 3590 <= scheduled.budget_left_seconds <= 3600  # type: ignore[attr-defined]


def test_a_retry_copy_that_fails_again_is_re_sent_as_the_next_attempt_without_stale_kernel_attributes() -> (
    None
):
    first = datetime.now(UTC) - timedelta(seconds=120)
    attributes = {**chain(2, first, "old error"), "relay.errorClass": string_attribute("Stale")}
    sqs = FakeSqs()
    response = consume(
        sqs_event([sqs_record(envelope(), message_id="copy-2", message_attributes=attributes)]),
        FakeContext(),
        failing(KeyError("bug")),
        settings=BUDGETED,
        sqs_client=sqs,
    )
    assert failures(response) == []
    (copy,) = sqs.sent
    attrs = copy["MessageAttributes"]
    assert set(attrs) == {ATTEMPT, FIRST_FAILURE_AT, LAST_ERROR}
    assert attrs[ATTEMPT]["StringValue"] == "3"
    assert float(attrs[FIRST_FAILURE_AT]["StringValue"]) == pytest.approx(first.timestamp(), abs=0.001)
    assert "unclassified KeyError" in attrs[LAST_ERROR]["StringValue"]
    assert 8 <= copy["DelaySeconds"] <= 10  # 2 · 2^2 plus jitter


def test_once_the_budget_is_spent_the_message_is_parked_with_the_reason() -> None:
    first = datetime.now(UTC) - timedelta(seconds=3700)
    body = envelope().to_json()
    record = sqs_record(body, message_id="copy-9", message_attributes=chain(9, first))
    sqs = FakeSqs()
    response = consume(
        sqs_event([record]),
        FakeContext(),
        failing(DependencyUnavailable("still down")),
        settings=BUDGETED,
        sqs_client=sqs,
    )
    assert failures(response) == []
    assert copies(sqs) == [] and sqs.visibility == []
    (dlq,) = parked(sqs)
    attrs = dlq["MessageAttributes"]
    assert dlq["MessageBody"] == body
    assert attrs["relay.errorClass"]["StringValue"] == "RetryBudgetSpent"
    assert "retry budget of 3600 s" in attrs["relay.errorMessage"]["StringValue"]
    assert "after 10 attempts (last error: still down)" in attrs["relay.errorMessage"]["StringValue"]
    # The DLQ shows when the chain's first failure happened, in parking's ISO form.
    parked_first = datetime.fromisoformat(attrs["relay.firstFailureAt"]["StringValue"].replace("Z", "+00:00"))
    assert abs((parked_first - first).total_seconds()) < 0.001


def test_a_refused_re_send_falls_back_to_visibility_back_off_and_reports_the_record_failed() -> None:
    sqs = SqsRefusingCopies()
    response = consume(
        sqs_event([sqs_record(envelope(), message_id="m-1")]),
        FakeContext(),
        failing(DependencyUnavailable("down")),
        settings=BUDGETED,
        sqs_client=sqs,
    )
    assert failures(response) == ["m-1"]  # SQS keeps the original: never lost
    (visibility,) = sqs.visibility
    assert visibility["ReceiptHandle"] == "rh-m-1" and 2 <= visibility["VisibilityTimeout"] <= 3


def test_a_message_with_more_attributes_than_a_copy_can_carry_is_retried_in_place_intact() -> None:
    many = {f"a{i}": string_attribute(str(i)) for i in range(8)}
    sqs = FakeSqs()
    response = consume(
        sqs_event([sqs_record(envelope(), message_id="m-1", message_attributes=many)]),
        FakeContext(),
        failing(DependencyUnavailable("down")),
        settings=BUDGETED,
        sqs_client=sqs,
    )
    assert failures(response) == ["m-1"]
    assert sqs.sent == [] and len(sqs.visibility) == 1


def test_seven_attributes_of_its_own_still_fit_beside_the_chains_three() -> None:
    seven = {f"a{i}": string_attribute(str(i)) for i in range(7)}
    sqs = FakeSqs()
    consume(
        sqs_event([sqs_record(envelope(), message_attributes=seven)]),
        FakeContext(),
        failing(DependencyUnavailable("down")),
        settings=BUDGETED,
        sqs_client=sqs,
    )
    (copy,) = sqs.sent
    assert len(copy["MessageAttributes"]) == 10


def test_fifo_queue_keeps_retrying_in_place_even_with_a_budget() -> None:
    sqs = FakeSqs()
    response = consume(
        sqs_event([fifo_record(envelope(), message_id="m-1")]),
        FakeContext(),
        failing(DependencyUnavailable("down")),
        settings=BUDGETED,
        sqs_client=sqs,
    )
    assert failures(response) == ["m-1"]
    assert sqs.sent == [] and len(sqs.visibility) == 1


def test_without_a_budget_a_transient_failure_is_retried_in_place_as_before() -> None:
    sqs = FakeSqs()
    response = consume(
        sqs_event([sqs_record(envelope(), message_id="m-1", receive_count=3)]),
        FakeContext(),
        failing(DependencyUnavailable("down")),
        settings=IN_PLACE,
        sqs_client=sqs,
    )
    assert failures(response) == ["m-1"]
    assert sqs.sent == []
    assert 8 <= sqs.visibility[0]["VisibilityTimeout"] <= 10


def test_permanent_failure_is_still_parked_at_once_with_a_budget() -> None:
    sqs = FakeSqs()
    response = consume(
        sqs_event([sqs_record(envelope(), message_id="m-1")]),
        FakeContext(),
        failing(BusinessRejection("card declined")),
        settings=BUDGETED,
        sqs_client=sqs,
    )
    assert failures(response) == [] and copies(sqs) == []
    assert parked(sqs)[0]["MessageAttributes"]["relay.errorClass"]["StringValue"] == "BusinessRejection"


# --- ctx.plan_retry --------------------------------------------------------------------------------


def plan_then_raise(plans: list[RetryPlan], planned_error: Exception, raised: Exception) -> Any:
    def handle(env: Envelope, ctx: RecordContext) -> None:
        plans.append(ctx.plan_retry(planned_error))
        assert ctx.plan_retry(DependencyUnavailable("asked again")) is plans[0]  # decided once
        raise raised

    return handle


def test_the_kernel_re_sends_with_the_plan_the_handler_recorded() -> None:
    # The handler's plan honours a 500 s Retry-After; the error it then raises has none, so a plan
    # made afresh by the kernel would say 2-3 s.
    plans: list[RetryPlan] = []
    handle = plan_then_raise(
        plans, DependencyUnavailable("busy", retry_after=500), DependencyUnavailable("x")
    )
    sqs = FakeSqs()
    response = consume(
        sqs_event([sqs_record(envelope())]), FakeContext(), handle, settings=BUDGETED, sqs_client=sqs
    )
    (plan,) = plans
    assert plan.delay_seconds == 500
    assert failures(response) == []
    (copy,) = sqs.sent
    assert copy["DelaySeconds"] == plan.delay_seconds
    assert copy["MessageAttributes"][ATTEMPT]["StringValue"] == str(plan.attempt)
    assert copy["MessageAttributes"][LAST_ERROR]["StringValue"] == "busy"


def test_without_a_budget_the_plan_describes_the_visibility_back_off_the_kernel_applies() -> None:
    plans: list[RetryPlan] = []
    handle = plan_then_raise(
        plans, DependencyUnavailable("busy", retry_after=500), DependencyUnavailable("x")
    )
    sqs = FakeSqs()
    response = consume(
        sqs_event([sqs_record(envelope(), message_id="m-1", receive_count=4)]),
        FakeContext(),
        handle,
        settings=IN_PLACE,
        sqs_client=sqs,
    )
    (plan,) = plans
    assert failures(response) == ["m-1"] and sqs.sent == []
    assert (plan.attempt, plan.delay_seconds, plan.budget_seconds) == (4, 500, float("inf"))
    assert plan.deadline is None
    assert sqs.visibility[0]["VisibilityTimeout"] == plan.delay_seconds


def test_a_budget_spent_in_the_handler_is_parked_even_if_it_raises_the_transient_error() -> None:
    seen: list[RetryBudgetSpent] = []

    def handle(env: Envelope, ctx: RecordContext) -> None:
        try:
            ctx.plan_retry(DependencyUnavailable("down"))
        except RetryBudgetSpent as spent:
            seen.append(spent)
        raise DependencyUnavailable("down")

    first = datetime.now(UTC) - timedelta(hours=2)
    sqs = FakeSqs()
    response = consume(
        sqs_event([sqs_record(envelope(), message_attributes=chain(4, first))]),
        FakeContext(),
        handle,
        settings=BUDGETED,
        sqs_client=sqs,
    )
    assert len(seen) == 1 and failures(response) == []
    assert copies(sqs) == []
    assert parked(sqs)[0]["MessageAttributes"]["relay.errorClass"]["StringValue"] == "RetryBudgetSpent"


def test_record_context_knows_which_retry_a_delivery_is() -> None:
    seen: list[RecordContext] = []
    record = sqs_record(envelope(), message_attributes=chain(3, NOW))
    consume(
        sqs_event([record, sqs_record(envelope())]),
        FakeContext(),
        lambda e, c: seen.append(c),
        settings=BUDGETED,
        sqs_client=FakeSqs(),
    )
    assert [c.retry_attempt for c in seen] == [3, 0]
    assert [c.retries_by_time for c in seen] == [True, True]


def test_retry_budget_is_read_from_the_environment() -> None:
    assert ConsumerSettings.from_env({}).retry_budget_seconds is None
    assert ConsumerSettings.from_env({"RELAY_RETRY_BUDGET_SECONDS": "3600"}).retry_budget_seconds == 3600
    with pytest.raises(ValueError, match="RELAY_RETRY_BUDGET_SECONDS=0: a retry budget must be positive"):
        ConsumerSettings.from_env({"RELAY_RETRY_BUDGET_SECONDS": "0"})
    with pytest.raises(ValueError, match="RELAY_RETRY_BUDGET_SECONDS='soon' is not a number"):
        ConsumerSettings.from_env({"RELAY_RETRY_BUDGET_SECONDS": "soon"})


def test_binary_attributes_go_back_as_the_bytes_they_were() -> None:
    sqs = FakeSqs()
    raw = bytes(range(256))
    consume(
        sqs_event([sqs_record(envelope(), message_attributes={"sig": binary_attribute(raw)})]),
        FakeContext(),
        failing(DependencyUnavailable("down")),
        settings=BUDGETED,
        sqs_client=sqs,
    )
    sent = sqs.sent[0]["MessageAttributes"]["sig"]["BinaryValue"]
    assert sent == raw and base64.b64encode(sent).decode() == binary_attribute(raw)["binaryValue"]
