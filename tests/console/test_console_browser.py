"""The console in a real browser (Debian's headless Chromium, driven by Playwright): find an operation, open
its timeline, see its poison message parked with its reason, and redrive it from the page after a dry run;
the message goes back to its queue and the operation completes, charged once. Then the other pages."""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from emulator.server import client
from local.sandbox import Sandbox
from ops.console.server import Console
from tests.e2e import api
from tests.e2e.test_alarms_e2e import PERIOD, dlq_alarm
from tests.e2e.test_payments_e2e import payment, queue_url

pytestmark = pytest.mark.e2e

DLQ = "payments-payment-requests-dlq"
PARKED_REASON = "ClaimCheckMismatch"


def depth(sb: Sandbox, suffix: str) -> int:
    attrs = client("sqs", sb.endpoint).get_queue_attributes(
        QueueUrl=queue_url(sb, suffix), AttributeNames=["All"]
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def wait_for(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


def park_a_payment(sb: Sandbox) -> tuple[str, str, str, bytes]:
    """A payment whose request's claim check is overwritten while the legacy system is down, so its
    retry is parked as ClaimCheckMismatch (tests/e2e/test_ops_e2e.py's root cause). Returns the operation
    id and the claim check's bucket, key and original bytes (putting them back is the fix)."""
    s3 = client("s3", sb.endpoint)
    before = depth(sb, DLQ)
    sb.legacy.set_knobs(outage=True)
    try:
        body = payment(payer="console-e2e")
        body["details"] = {"memo": "x" * 70_000}  # above the 64 KB claim-check threshold: in S3
        response = api.post(sb, "/payments", json=body, headers={"Idempotency-Key": uuid.uuid4().hex})
        operation_id = response.json()["operationId"]
        view = wait_for(
            "the payment waits on the outage",
            lambda: (v := api.get(sb, f"/operations/{operation_id}").json()).get("nextAttemptAt") and v,
        )
        bucket, key = view["results"]["request"].removeprefix("s3://").split("/", 1)
        original = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        s3.put_object(Bucket=bucket, Key=key, Body=b'{"tampered": true}')
        wait_for("the retry is parked", lambda: depth(sb, DLQ) == before + 1)
    finally:
        sb.legacy.set_knobs(outage=False)
    return operation_id, bucket, key, original


def completed_payment(sb: Sandbox) -> str:
    response = api.post(sb, "/payments", json=payment(), headers={"Idempotency-Key": uuid.uuid4().hex})
    operation_id = str(response.json()["operationId"])
    wait_for(
        "the payment completes",
        lambda: api.get(sb, f"/operations/{operation_id}").json()["status"] == "COMPLETED",
    )
    return operation_id


def shot(page: Any, folder: Path, name: str, *, full_page: bool = True) -> None:
    page.screenshot(path=str(folder / f"{name}.png"), full_page=full_page)


def test_a_parked_payment_is_found_seen_and_redriven_from_the_page(
    sandbox: Sandbox, console: Console, page: Any, screenshots: Path, audit_file: Path
) -> None:
    drain(sandbox, DLQ)
    alarm = dlq_alarm(sandbox)["AlarmName"]
    sandbox.evaluate_alarms(advance=PERIOD + 1)  # a whole period of an empty DLQ: OK
    operation_id, bucket, key, original = park_a_payment(sandbox)
    sandbox.evaluate_alarms()
    audited_before = audit_file.read_text().count("\n") if audit_file.exists() else 0

    # Find the operation by its id, open its timeline.
    page.goto(console.url)
    expect(page.locator("#mode")).to_have_text("redrive allowed")
    page.fill("#search", operation_id)
    page.click("#search-button")
    row = page.locator(f'#operations-table tr[data-id="{operation_id}"]')
    expect(row).to_have_count(1)
    row.locator("a").click()
    expect(page.locator("#operation-id")).to_have_text(operation_id)
    expect(page.locator("#timeline li").first).to_contain_text("accepted (202)")
    # The step history decoded (the item keeps "payment STARTED <base-36 ms>"): state and ISO time.
    expect(page.locator("#timeline li", has_text="payment STARTED")).to_contain_text(
        re.compile(r"20\d\d-\d\d-\d\d ")
    )
    # Each delivery of the poison that reached the step parks a copy (a slow first one can be redelivered).
    expect(page.locator("#timeline li.parked").first).to_contain_text(PARKED_REASON)
    expect(page.locator("#operation-parked .error-class")).to_have_text(PARKED_REASON)
    expect(page.locator("#operation-parked")).to_contain_text("PARKED")
    expect(page.locator("#partner-calls")).to_contain_text("legacy payment")
    shot(page, screenshots, "operation-parked")

    # The DLQ's alarm in ALARM, with the runbook commands its description names.
    page.click('a[data-nav="alarms"]')
    alarm_row = page.locator(f'#alarms-table tr[data-alarm="{alarm}"]')
    expect(alarm_row.locator(".alarm-state")).to_have_text("ALARM")
    expect(alarm_row.locator(".runbook")).to_contain_text("python -m ops dlq")
    expect(page.locator("#alarms-table tbody tr").first).to_have_attribute("data-state", "ALARM")
    shot(page, screenshots, "alarms")

    # The DLQ on the queues page, and its parked message with the reason, read from the ledger.
    page.click('a[data-nav="queues"]')
    dlq_row = page.locator(f'#dlqs-table tr[data-dlq="{DLQ}"]')
    expect(dlq_row.locator(".depth")).to_have_text("1")
    shot(page, screenshots, "queues")
    dlq_row.locator("a").first.click()
    expect(page.locator("#dlq-depth")).to_have_text("1")
    parked_row = page.locator("#dlq-parked .parked-row", has_text=PARKED_REASON)
    expect(parked_row).to_have_count(1)
    expect(parked_row).to_contain_text("PARKED")
    expect(parked_row.locator(".error-message")).not_to_have_text("-")

    # The fix, then the redrive: no confirm before a dry run, and the dry run moves nothing.
    client("s3", sandbox.endpoint).put_object(Bucket=bucket, Key=key, Body=original)
    expect(page.locator("#redrive-confirm-check")).to_be_disabled()
    expect(page.locator("#redrive-start")).to_be_disabled()
    page.click("#redrive-dry-run")  # no reason yet: refused, nothing read
    expect(page.locator("#redrive-output .error")).to_contain_text("reason")
    page.fill("#redrive-reason", "claim check restored from the original request")
    page.click("#redrive-dry-run")
    expect(page.locator("#dry-run-result")).to_contain_text("1 message(s) would move")
    expect(page.locator("#dry-run-result")).to_contain_text(PARKED_REASON)
    assert depth(sandbox, DLQ) == 1
    expect(page.locator("#redrive-start")).to_be_disabled()
    page.check("#redrive-confirm-check")
    shot(page, screenshots, "redrive-dry-run")
    page.click("#redrive-start")
    expect(page.locator("#redrive-state")).to_have_text("done", timeout=150_000)
    expect(page.locator("#redrive-log")).to_contain_text("first batch OK: 1 consumed, none parked again")
    shot(page, screenshots, "redrive-done")

    # Back in its queue, processed once: the operation completes, charged once; the DLQ is empty.
    status = wait_for(
        "the operation completes",
        lambda: (s := api.get(sandbox, f"/operations/{operation_id}").json()["status"]) == "COMPLETED" and s,
    )
    assert status == "COMPLETED"
    assert sandbox.legacy.charges_by_operation()[operation_id] == 1
    assert depth(sandbox, DLQ) == 0
    # Audited like the CLI: the dry run and the redrive, with the reason.
    records = [json.loads(line) for line in audit_file.read_text().splitlines()[audited_before:]]
    assert [(r["dryRun"], r["outcome"]) for r in records] == [(True, "dry-run"), (False, "ok")]
    assert {r["reason"] for r in records} == {"claim check restored from the original request"}

    page.goto(f"{console.url}#/operation/{operation_id}")
    expect(page.locator("#operation-status")).to_have_text("COMPLETED")
    expect(page.locator("#operation-parked")).to_contain_text("REDRIVEN")
    expect(page.locator("#operation-parked")).to_contain_text("claim check restored")
    shot(page, screenshots, "operation-completed")

    sandbox.evaluate_alarms(advance=PERIOD + 1)  # the period that saw the parked message is over
    page.goto(f"{console.url}#/alarms")
    expect(page.locator(f'#alarms-table tr[data-alarm="{alarm}"] .alarm-state')).to_have_text("OK")


def test_a_redrive_is_aborted_from_the_page_while_its_first_batch_is_verified(
    sandbox: Sandbox, console: Console, page: Any, audit_file: Path
) -> None:
    drain(sandbox, DLQ)
    operation_id, bucket, key, original = park_a_payment(sandbox)
    client("s3", sandbox.endpoint).put_object(Bucket=bucket, Key=key, Body=original)
    audited_before = audit_file.read_text().count("\n") if audit_file.exists() else 0
    # The partner down again: the moved message waits on its retries, so the verification waits too.
    sandbox.legacy.set_knobs(outage=True)
    try:
        page.goto(f"{console.url}#/dlq/{DLQ}")
        page.fill("#redrive-reason", "abort drill")
        page.click("#redrive-dry-run")
        expect(page.locator("#dry-run-result")).to_contain_text("1 message(s) would move")
        page.check("#redrive-confirm-check")
        page.click("#redrive-start")
        expect(page.locator("#redrive-log")).to_contain_text("verifying: waiting")
        expect(page.locator("#redrive-abort")).to_be_enabled()
        page.click("#redrive-abort")
        expect(page.locator("#redrive-state")).to_have_text("stopped", timeout=30_000)
    finally:
        sandbox.legacy.set_knobs(outage=False)
    records = [json.loads(line) for line in audit_file.read_text().splitlines()[audited_before:]]
    assert [(r["dryRun"], r["outcome"]) for r in records] == [(True, "dry-run"), (False, "interrupted")]
    # What was moved before the abort is in its queue, not lost: it completes once the partner is back.
    wait_for(
        "the operation completes",
        lambda: api.get(sandbox, f"/operations/{operation_id}").json()["status"] == "COMPLETED",
        timeout=90,
    )
    assert sandbox.legacy.charges_by_operation()[operation_id] == 1


def test_a_waiting_operation_is_replayed_from_the_page_after_a_dry_run_and_charged_once(
    sandbox: Sandbox, console: Console, page: Any, audit_file: Path, screenshots: Path
) -> None:
    replays = audit_file.with_name("replay-audit.jsonl")
    audited_before = replays.read_text().count("\n") if replays.exists() else 0
    sandbox.legacy.set_knobs(outage=True)
    try:
        response = api.post(
            sandbox, "/payments", json=payment(), headers={"Idempotency-Key": uuid.uuid4().hex}
        )
        operation_id = response.json()["operationId"]
        wait_for(
            "the payment waits on the outage",
            lambda: api.get(sandbox, f"/operations/{operation_id}").json().get("nextAttemptAt"),
        )
        page.goto(f"{console.url}#/operation/{operation_id}")
        expect(page.locator("#replay-panel")).to_be_visible()
        page.fill("#replay-reason", "partner outage over")

        # A next attempt is scheduled: refused, as ops replay refuses it. The outage re-schedules it
        # every few seconds (the fast clock's 1-4 s backoff), so on a loaded machine a dry run can land
        # just after one attempt and before the next is written: ask again until one lands inside.
        def refused() -> bool:
            page.evaluate("document.querySelector('#replay-output').replaceChildren()")
            page.click("#replay-dry-run")
            page.wait_for_selector("#replay-output > *", timeout=30_000)
            error = page.locator("#replay-output .error")
            return error.count() > 0 and "next attempt scheduled" in error.inner_text()

        wait_for("a dry run refused while the next attempt is scheduled", refused)
        expect(page.locator("#replay-start")).to_be_disabled()
        page.check("#replay-force")
        page.click("#replay-dry-run")
        expect(page.locator("#replay-plan")).to_contain_text("re-drive the current step")
        page.check("#replay-confirm-check")
        page.click("#replay-start")
        expect(page.locator("#replay-record")).to_contain_text("Replayed")
        page.locator("#replay-panel").screenshot(path=str(screenshots / "replay.png"))
    finally:
        sandbox.legacy.set_knobs(outage=False)
    (record,) = [json.loads(line) for line in replays.read_text().splitlines()[audited_before:]]
    assert (record["operationId"], record["reason"], record["replayed"]) == (
        operation_id,
        "partner outage over",
        True,
    )
    wait_for(
        "the operation completes",
        lambda: api.get(sandbox, f"/operations/{operation_id}").json()["status"] == "COMPLETED",
        timeout=90,
    )
    assert (
        sandbox.legacy.charges_by_operation()[operation_id] == 1
    )  # the replay added a delivery, not a charge


def test_a_read_only_console_shows_the_dlq_and_offers_no_redrive(
    sandbox: Sandbox, read_only_console: Console, page: Any
) -> None:
    page.goto(f"{read_only_console.url}#/dlq/{DLQ}")
    expect(page.locator("#mode")).to_have_text("read-only")
    expect(page.locator("#read-only")).to_contain_text("--allow-redrive")
    expect(page.locator("#redrive-dry-run")).to_have_count(0)


def test_search_by_correlation_id_finds_the_operation(sandbox: Sandbox, console: Console, page: Any) -> None:
    correlation = f"corr-{uuid.uuid4().hex[:8]}"
    response = api.post(
        sandbox,
        "/payments",
        json=payment(),
        headers={"Idempotency-Key": uuid.uuid4().hex, "X-Correlation-Id": correlation},
    )
    operation_id = response.json()["operationId"]
    page.goto(f"{console.url}#/operations?q={correlation}")
    rows = page.locator("#operations-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-id", operation_id)
    expect(rows.first).to_contain_text(correlation)
    page.goto(f"{console.url}#/operations?q=corr-nobody-has-this")
    expect(page.locator("#no-results")).to_be_visible()


def test_the_iam_meter_and_chart_pages_draw_what_the_sandbox_measured(
    sandbox: Sandbox, console: Console, page: Any, screenshots: Path
) -> None:
    completed_payment(sandbox)
    # A poison message parked, so the DLQ's depth is above zero for as long as the test needs: a sample
    # (the console takes one a second here) sees it.
    sqs = client("sqs", sandbox.endpoint)
    sent = datetime.now(UTC).isoformat(timespec="seconds")
    sqs.send_message(QueueUrl=queue_url(sandbox, "payments-payment-requests"), MessageBody="{not json")
    wait_for(
        "a sample, taken after the send, with the DLQ's depth",
        lambda: any(p["depths"].get(DLQ) for p in console.history.points() if p["at"] > sent),
    )
    wait_for(
        "a sample with the payment COMPLETED", lambda: console.history.points()[-1]["states"].get("COMPLETED")
    )

    page.goto(f"{console.url}#/iam")
    expect(page.locator("#iam-summary")).to_contain_text("grants never used")
    expect(page.locator("#iam-table tbody tr", has_text="payments-PaymentWorker")).not_to_have_count(0)
    shot(page, screenshots, "iam", full_page=False)  # the first screen: the whole report is long

    page.goto(f"{console.url}#/meter")
    summary = page.locator("#meter-summary")
    expect(summary).to_contain_text("per operation")
    assert re.search(r"per operation\s*\$\d", summary.inner_text())
    expect(page.locator("#meter-table tbody tr", has_text="DynamoDB")).not_to_have_count(0)
    expect(page.locator("#meter-table tbody tr", has_text="CreateQueue")).to_have_count(0)  # provisioning
    shot(page, screenshots, "meter")

    page.goto(f"{console.url}#/charts")
    expect(page.locator('#chart-states polyline[data-series="COMPLETED"]')).to_have_count(1)
    expect(page.locator(f'#chart-depths polyline[data-series="{DLQ}"]')).to_have_count(1)
    bars = page.locator("#chart-latency rect")
    expect(bars).not_to_have_count(0)
    counted = sum(int(bars.nth(i).get_attribute("data-count") or 0) for i in range(bars.count()))
    assert counted >= 1  # at least the payment above reached a terminal state
    shot(page, screenshots, "charts")
    drain(sandbox, DLQ)


def drain(sb: Sandbox, suffix: str) -> None:
    sqs, url = client("sqs", sb.endpoint), queue_url(sb, suffix)
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30).get(
        "Messages", []
    ):
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )


def test_an_operations_trace_is_drawn_from_the_spans_the_sandbox_collected(
    sandbox: Sandbox, console: Console, page: Any, screenshots: Path
) -> None:
    from emulator.traces import operation_trace

    operation_id = completed_payment(sandbox)

    def sizes(traces: list[Any]) -> list[int]:
        return sorted(len(t["spans"]) for t in traces)

    read_before: list[Any] = []

    def one_trace_across_the_flow() -> Any:
        found = operation_trace(sandbox.endpoint, operation_id=operation_id)
        # The API's handler, then the payment worker's and the invoice worker's records under it.
        across = [t for t in found if len({s["function"] for s in t["spans"]}) >= 3]
        # The steps after COMPLETED (the completion notice) may still add traces: the page is compared
        # with what the sandbox holds once nothing is in flight and two reads agree.
        settled = sandbox.in_flight() == 0 and sizes(found) == sizes(read_before)
        read_before[:] = found
        return across and settled and found

    found = wait_for("the operation's spans from 3 functions in one trace", one_trace_across_the_flow)
    page.goto(f"{console.url}#/operation/{operation_id}")
    traces = page.locator("#operation-trace .trace")
    expect(traces).to_have_count(len(found))
    rows = page.locator("#operation-trace tr.span")
    expect(rows).to_have_count(sum(len(t["spans"]) for t in found))
    expect(page.locator("#operation-trace tr.span[data-kind=PRODUCER]")).not_to_have_count(0)
    expect(page.locator("#operation-trace tr.span[data-kind=CONSUMER]")).not_to_have_count(0)
    expect(
        page.locator('#operation-trace tr.span[data-function="payments-PaymentWorker"]')
    ).not_to_have_count(0)
    page.locator("#operation-trace").screenshot(path=str(screenshots / "trace.png"))
