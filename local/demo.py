"""``python -m local demo``: the payments scenario over real HTTP and AWS APIs, then the verdict.

What it does to the running sandbox, and the invariant each step protects:
* N payments over HTTP; a share of them sent twice with the same ``Idempotency-Key`` (a client
  retry) -> the same operationId comes back, one operation exists;
* a legacy outage (fake knob) while the payment worker is busy, that recovers after a few seconds ->
  the refused calls are retried, still one charge each;
* duplicate deliveries: already-published ``PaymentRequested`` envelopes published to the topic
  again (as SNS may do) -> no second charge;
* a poison message sent straight to the payment-requests queue -> parked in the DLQ with a reason.
* at the end the payments sweeper's schedule is fired once -> nothing is left behind: no operation
  non-terminal past its deadline ("stranded: 0").
Exit code 0 only when every operation COMPLETED, each was charged and invoiced exactly once, the only
parked message is the poison one, and nothing is stranded.

And a short agents section (``AgentsScenario``): ``ReportGenerated`` events over SNS, two of them late
(not visible for the first reads) and one tampered in the report API -> VERIFIED except one
MISMATCH, one webhook notification per report; the hourly schedule fired twice for the current
hour -> one unchanged snapshot per agent.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import requests

from emulator.server import client
from local import lifecycle
from local.sandbox import PROJECT_ROOT, Sandbox, snapshot, status_line, stream_records
from ops.paths import use_function_code

TERMINAL = {"COMPLETED", "FAILED", "PAYMENT_UNRESOLVED", "INVOICE_FAILED", "CANCELLED"}
CALLBACK_EVERY = 4  # every 4th payment asks for a completion notice (the sandbox's callback receiver)
OUTAGE_EXPECTED_FROM = 50  # payments
DEFAULT_PAYMENTS = 100  # `make demo`; DEMO_PAYMENTS or --payments for another size
DUPLICATES = 10  # PaymentRequested events published again once half the operations are terminal


def payment_body(i: int) -> dict[str, Any]:
    return {
        "paymentId": f"pay-{i:05d}-{uuid.uuid4().hex[:6]}",
        "amount": f"{10 + i % 90}.{i % 100:02d}",
        "currency": "EUR",
        "payer": f"customer-{i % 17}",
        "payee": "relay-shop",
        "details": {"note": "sandbox demo"},
    }


class Scenario:
    def __init__(self, sandbox: Sandbox, *, payments: int = DEFAULT_PAYMENTS, retry_every: int = 10) -> None:
        self.sb = sandbox
        self.payments = payments
        self.retry_every = retry_every
        self.accepted: dict[str, float] = {}  # operationId -> time of the 202
        self.with_callback: set[str] = set()
        self.completed: dict[str, float] = {}
        self.final: dict[str, str] = {}
        self.replay_mismatches = 0
        self.replays = 0
        self.http_errors: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.local = threading.local()
        self.outage_seconds = 3.0
        # The outage must overlap the payment worker's calls to show anything: it starts once the
        # first operation has left PENDING, and is expected to refuse calls when a run is big enough
        # (OUTAGE_EXPECTED_FROM) for the worker to still be busy for its whole duration.
        self.outage_started = False

    def session(self) -> requests.Session:
        """This thread's session, signing every request as the sandbox's client (the routes are AWS_IAM)."""
        if not hasattr(self.local, "session"):
            self.local.session = requests.Session()
            self.local.session.auth = self.sb.client_auth()
        session: requests.Session = self.local.session
        return session

    def submit(self, i: int) -> None:
        body = payment_body(i)
        if i % CALLBACK_EVERY == 1:
            body["callbackUrl"] = f"{self.sb.receiver.base_url}/demo/notices"
        key = f"demo-{i}-{uuid.uuid4().hex[:8]}"
        url = f"{self.sb.api_url}/payments"
        response = self.session().post(url, json=body, headers={"Idempotency-Key": key}, timeout=30)
        if response.status_code != 202:
            with self.lock:
                self.http_errors[f"POST {response.status_code}"] += 1
            return
        operation = response.json()["operationId"]
        with self.lock:
            self.accepted.setdefault(operation, time.time())
            if "callbackUrl" in body:
                self.with_callback.add(operation)
        if i % self.retry_every == 0:
            # The client did not see the first answer and retries with the same key and body.
            again = self.session().post(url, json=body, headers={"Idempotency-Key": key}, timeout=30)
            with self.lock:
                self.replays += 1
                if again.status_code != 202 or again.json().get("operationId") != operation:
                    self.replay_mismatches += 1

    def poll(self, operation: str) -> None:
        """GET the operation over HTTP once; its steps say when it completed."""
        response = self.session().get(f"{self.sb.api_url}/operations/{operation}", timeout=30)
        if response.status_code != 200:
            return
        view = response.json()
        status = view.get("status", "")
        if status in TERMINAL:
            with self.lock:
                self.final[operation] = status
                if status == "COMPLETED" and view.get("steps"):
                    finished = datetime.fromisoformat(str(view["steps"][-1]["at"]).replace("Z", "+00:00"))
                    self.completed[operation] = finished.timestamp()

    def duplicate_deliveries(self, count: int) -> int:
        """Publish ``count`` PaymentRequested events again, as an SNS redelivery would: the events
        exactly as the operations' first writes put them in the table, read back from its stream,
        and published with the attributes the stream publisher gives them."""
        use_function_code()
        from payments.subscriptions import message_attributes

        from relay.ddb import deserialize_item
        from relay.entity_events import new_events
        from relay.outbox import sns_publisher

        topic = next(arn for name, arn in self.sb.topology.topics.items() if "payment-events" in name)
        publish = sns_publisher(topic, client("sns", self.sb.endpoint), message_attributes)
        table = lifecycle.operations_table(self.sb.topology.tables)
        sent = 0
        for record in stream_records(self.sb.endpoint, table):
            image = deserialize_item(record["dynamodb"].get("NewImage") or {})
            for event in new_events(record):
                if event.event_type == "PaymentRequested" and event.ids.get("operationId") in self.accepted:
                    publish(event, image)
                    sent += 1
                    if sent == count:
                        return sent
        return sent

    def poison(self) -> str:
        sqs = client("sqs", self.sb.endpoint)
        url = next(u for n, u in self.sb.topology.queues.items() if n.endswith("payment-requests"))
        return str(sqs.send_message(QueueUrl=url, MessageBody='{"this is": not an envelope')["MessageId"])

    def parked(self) -> list[tuple[str, str, str]]:
        """(queue, errorClass, errorMessage) of every message in a DLQ, read without consuming it."""
        sqs = client("sqs", self.sb.endpoint)
        found = []
        for name in sorted(self.sb.topology.dlqs):
            url = self.sb.topology.queues[name]
            seen: set[str] = set()
            for _ in range(5):
                messages = sqs.receive_message(
                    QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=0
                ).get("Messages", [])
                for m in messages:
                    if m["MessageId"] in seen:
                        continue
                    seen.add(m["MessageId"])
                    attrs = m.get("MessageAttributes", {})
                    found.append(
                        (
                            name,
                            attrs.get("relay.errorClass", {}).get("StringValue", "(redriven by SQS)"),
                            attrs.get("relay.errorMessage", {}).get("StringValue", "no reason recorded")[:70],
                        )
                    )
                if not messages:
                    break
        return found

    def start_outage(self, out: Any) -> None:
        self.outage_started = True
        self.sb.legacy.set_knobs(outage=True)
        print(f"\n  legacy payment system DOWN for {self.outage_seconds:.0f} s", file=out)
        threading.Timer(self.outage_seconds, lambda: self.sb.legacy.set_knobs(outage=False)).start()

    def run(self, out: Any = None) -> bool:
        out = out or sys.stdout  # read at call time: the demo's transcript replaces sys.stdout
        started = time.time()
        with ThreadPoolExecutor(max_workers=8) as pool:
            for future in [pool.submit(self.submit, i) for i in range(self.payments)]:
                future.result()
        poison_id = self.poison()
        print(f"  {len(self.accepted)} payments accepted; poison message {poison_id[:8]} sent", file=out)
        duplicates_sent: int | None = None  # None: not injected yet
        waiting = lifecycle.Patience()
        snap: dict[str, Any] = {}
        # Progress comes from one table scan a second (cheap); each operation is then read once
        # over HTTP, so the watching does not compete with the work for the 2 cores.
        while waiting.more((snap.get("operations"), snap.get("queues"), duplicates_sent)):
            snap = snapshot(self.sb.state())
            terminal = sum(n for state, n in snap["operations"].items() if state in TERMINAL)
            if not self.outage_started and snap["operations"].get("PENDING", 0) < len(self.accepted):
                self.start_outage(out)
            if duplicates_sent is None and terminal >= len(self.accepted) // 2:
                duplicates_sent = self.duplicate_deliveries(self.duplicates_wanted)
                print(
                    f"\n  re-published {duplicates_sent} PaymentRequested events (duplicate delivery)",
                    file=out,
                )
            print(f"\r  [{time.time() - started:5.1f}s] {status_line(snap)}  ", end="", file=out, flush=True)
            idle = self.sb.in_flight() == 0 and not any(
                q["visible"] + q["inFlight"] for q in snap["queues"].values()
            )
            # Every operation in the table, the orders' payments included: counting only ours let a
            # small run stop while one of them was still between the stream and its queue.
            everything = max(len(self.accepted), sum(snap["operations"].values()))
            if duplicates_sent is not None and terminal >= everything and idle:
                break
            time.sleep(1)
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(self.poll, list(self.accepted)))
        print(file=out)
        self.sweep(out)
        return self.report(poison_id, duplicates_sent or 0, out)

    @property
    def duplicates_wanted(self) -> int:
        return min(DUPLICATES, len(self.accepted))

    def sweep(self, out: Any) -> None:
        """Fire the payments sweeper once and wait for it: whatever it finds overdue it re-drives or
        ends, and the report then counts what is still stranded."""
        firing = lifecycle.sweep_now(self.sb)
        print(f"  payments sweeper fired (message {str(firing.message_id)[:8]})", file=out)

    def report(self, poison_id: str, duplicates_sent: int, out: Any) -> bool:
        charges = self.sb.legacy.charges_by_operation()
        invoices = self.sb.invoices.invoices_by_operation()
        states = Counter(self.final.get(op, "NOT TERMINAL") for op in self.accepted)
        charge_counts = Counter(charges.get(op, 0) for op in self.accepted)
        invoice_counts = Counter(invoices.get(op, 0) for op in self.accepted)
        parked = self.parked()
        notices = self.sb.receiver.notices_by_key()
        notice_verdicts = Counter(
            "1 valid" if notices.get(f"{op}:notice") == {"valid": 1} else repr(notices.get(f"{op}:notice"))
            for op in self.with_callback
        )
        uninvited = [key for key in notices if key.removesuffix(":notice") not in self.with_callback]
        latencies = sorted(self.completed[op] - self.accepted[op] for op in self.completed)
        legacy_calls = self.sb.legacy.calls()
        outage_rejections = sum(1 for c in legacy_calls if c.get("fault") == "outage")
        table = lifecycle.operations_table(self.sb.topology.tables)
        retried = lifecycle.retries(self.sb.endpoint, table)
        left_behind = lifecycle.stranded(self.sb.endpoint, table)

        def p(q: float) -> float:
            if not latencies:
                return float("nan")
            return latencies[min(len(latencies) - 1, round(q * (len(latencies) - 1)))]

        rows = [("operations accepted (202)", str(len(self.accepted)))]
        rows += [(f"  {state}", str(n)) for state, n in sorted(states.items())]
        rows.append(
            (f"client retries, same Idempotency-Key ({self.replays})", f"{self.replay_mismatches} mismatches")
        )
        rows += [(f"operations charged {n}×", str(c)) for n, c in sorted(charge_counts.items())]
        rows += [(f"operations invoiced {n}×", str(c)) for n, c in sorted(invoice_counts.items())]
        rows.append(
            (
                f"completion notices ({len(self.with_callback)} callbacks)",
                ", ".join(f"{v}: {n}" for v, n in sorted(notice_verdicts.items())) or "none",
            )
        )
        rows.append(("duplicate deliveries injected", str(duplicates_sent)))
        rows.append(("legacy calls refused by the outage", str(outage_rejections)))
        rows.append(("step retries (delayed copies, no receive burnt)", str(retried)))
        rows.append(("stranded: non-terminal past deadline", str(left_behind["operation"])))
        rows.append(("messages parked", str(len(parked))))
        rows += [(f"  {queue.removeprefix('relay-dev-')}", f"{cls}: {msg}") for queue, cls, msg in parked]
        rows.append(
            (
                "202 → COMPLETED p50 / p99",
                f"{statistics.median(latencies) if latencies else float('nan'):.2f} s / {p(0.99):.2f} s",
            )
        )
        if self.http_errors:
            rows.append(("HTTP errors", ", ".join(f"{k}: {v}" for k, v in self.http_errors.items())))
        width = max(len(r[0]) for r in rows)
        print("", file=out)
        for label, value in rows:
            print(f"  {label:<{width}}  {value}", file=out)
        checks = {
            "every operation COMPLETED": states == Counter({"COMPLETED": len(self.accepted)}),
            "every operation charged exactly once": charge_counts == Counter({1: len(self.accepted)}),
            "every operation invoiced exactly once": invoice_counts == Counter({1: len(self.accepted)}),
            "client retries returned the same operation": self.replay_mismatches == 0,
            f"{self.duplicates_wanted} duplicate deliveries injected": duplicates_sent > 0
            and duplicates_sent == self.duplicates_wanted,
            "each callback got exactly one notice, validly signed": bool(self.with_callback)
            and notice_verdicts == Counter({"1 valid": len(self.with_callback)})
            and not uninvited,
            "only the poison message is parked, with a reason": len(parked) == 1
            and parked[0][1] != "(redriven by SQS)",
            "no HTTP errors": not self.http_errors,
            "nothing left behind (stranded: 0)": not left_behind,
        }
        if self.payments >= OUTAGE_EXPECTED_FROM:
            checks["the legacy outage refused calls; each was retried (charged once above)"] = (
                outage_rejections > 0
            )
        print("", file=out)
        for name, ok in checks.items():
            print(f"  {'PASS' if ok else 'FAIL'}  {name}", file=out)
        return all(checks.values())


def publish_report(
    sb: Sandbox, report_id: str, agent: str, content: bytes, *, correlation_id: str, invisible_reads: int = 0
) -> None:
    """A report as an agent produces one: its content in the report API fake, then its
    ``ReportGenerated`` envelope published to the reports topic (what the verifier consumes)."""
    sys.path.insert(0, str(PROJECT_ROOT / "layers" / "relay" / "python"))
    from relay.envelope import new_envelope

    digest = sb.reports.publish(report_id, content, invisible_reads=invisible_reads)
    envelope = new_envelope(
        "ReportGenerated",
        identity=[report_id],
        ids={"reportId": report_id, "agentId": agent},
        payload={
            "reportId": report_id,
            "agentId": agent,
            "url": f"{sb.reports.base_url}/reports/{report_id}",
            "sha256": digest,
        },
        correlation_id=correlation_id,
    )
    topic = next(arn for name, arn in sb.topology.topics.items() if name.endswith("report-events"))
    client("sns", sb.endpoint).publish(
        TopicArn=topic,
        Message=envelope.to_json(),
        MessageAttributes={"eventType": {"DataType": "String", "StringValue": "ReportGenerated"}},
    )


class AgentsScenario:
    """Reports published at the start (verified while the payments run), snapshot fired at the end."""

    def __init__(self, sandbox: Sandbox, out: Any = None) -> None:
        self.sb = sandbox
        self.out = out or sys.stdout  # read at call time: the demo's transcript replaces sys.stdout
        topics = [arn for name, arn in sandbox.topology.topics.items() if name.endswith("report-events")]
        tables = [name for name in sandbox.topology.tables if name.endswith("reports-verifications")]
        self.enabled = bool(topics and tables and sandbox.topology.schedules)
        self.table = tables[0] if tables else ""
        run = uuid.uuid4().hex[:6]
        self.agents = {
            f"agent-{name}-{run}": [f"rep-{run}-{name}{i}" for i in range(3)] for name in ("a", "b")
        }
        self.late = {f"rep-{run}-a1", f"rep-{run}-b2"}
        self.tampered = f"rep-{run}-b1"
        self.run_id = run

    @property
    def report_ids(self) -> list[str]:
        return [r for ids in self.agents.values() for r in ids]

    def publish(self) -> None:
        if not self.enabled:
            return
        reports = self.sb.reports
        reports.set_knobs(tamper_ids=frozenset({*reports.knobs.tamper_ids, self.tampered}))
        for agent, report_ids in self.agents.items():
            for report_id in report_ids:
                publish_report(
                    self.sb,
                    report_id,
                    agent,
                    f"report {report_id} of {agent}".encode(),
                    correlation_id=f"demo-{self.run_id}",
                    invisible_reads=2 if report_id in self.late else 0,
                )
        print(
            f"agents: published {len(self.report_ids)} ReportGenerated of 2 agents (2 late, 1 tampered)",
            file=self.out,
            flush=True,
        )

    def _status(self, report_id: str) -> str | None:
        item = client("dynamodb", self.sb.endpoint).get_item(
            TableName=self.table,
            Key={"pk": {"S": f"REPORT#{report_id}"}, "sk": {"S": "VERIFICATION"}},
            ConsistentRead=True,
        )
        return item["Item"]["status"]["S"] if "Item" in item else None

    def _scores(self, agent: str, hour: str) -> list[dict[str, Any]]:
        params = {"from": hour, "to": hour}
        response = self.sb.call("GET", f"/agents/{agent}/scores", params=params, timeout=10)
        return list(response.json().get("snapshots", [])) if response.status_code == 200 else []

    def _snapshot_queue_idle(self) -> bool:
        sqs = client("sqs", self.sb.endpoint)
        url = next(u for n, u in self.sb.topology.queues.items() if n.endswith("scores-snapshots"))
        attrs = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(v) for v in attrs.values()) == 0

    def finish(self) -> bool:
        """The verdict: verifications, notifications, the schedule fired twice; True when it all holds."""
        if not self.enabled:
            return True
        print("\nagents: reports verified by read-back, then the hourly schedule fired twice", file=self.out)
        started = time.monotonic()
        statuses: dict[str, str | None] = {}
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            statuses = {r: self._status(r) for r in self.report_ids}
            if all(statuses.values()):
                break
            time.sleep(0.5)
        notified = self.sb.webhook.deliveries_by_key()

        snapshot_schedule = self.sb.schedule_named("scores-hourly-snapshot")
        (first,) = self.sb.fire_schedule(snapshot_schedule)
        hour = first.scheduled_time
        first_ok = all(d.delivered for d in first.wait(60))
        snapshots: dict[str, list[dict[str, Any]]] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            snapshots = {agent: self._scores(agent, hour) for agent in self.agents}
            if all(snapshots.values()):
                break
            time.sleep(0.3)
        (second,) = self.sb.fire_schedule(
            self.sb.schedule_named("scores-hourly-snapshot"), scheduled_time=hour
        )
        second_ok = all(d.delivered for d in second.wait(60))
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not self._snapshot_queue_idle():
            time.sleep(0.3)
        again = {agent: self._scores(agent, hour) for agent in self.agents}

        counts = Counter(str(v) for v in statuses.values())
        per_report = sorted({notified.get(f"{r}:report-ready", 0) for r in self.report_ids})
        rows = [(f"reports {state}", str(n)) for state, n in sorted(counts.items())]
        rows.append(("webhook notifications per report", ", ".join(map(str, per_report))))
        rows.append(("agents section took", f"{time.monotonic() - started:.1f} s"))
        for agent, snaps in snapshots.items():
            value = ", ".join(f"score {s['score']} ({s['verified']}/{s['total']} verified)" for s in snaps)
            rows.append((f"snapshot {hour} {agent}", value or "none"))
        width = max(len(r[0]) for r in rows)
        for label, value in rows:
            print(f"  {label:<{width}}  {value}", file=self.out)
        checks = {
            "every report VERIFIED except the tampered one (MISMATCH)": all(
                statuses[r] == ("MISMATCH" if r == self.tampered else "VERIFIED") for r in self.report_ids
            ),
            "each report notified exactly once": all(
                notified.get(f"{r}:report-ready") == 1 for r in self.report_ids
            ),
            "both firings delivered by the API destination": first_ok and second_ok,
            "one snapshot per agent for the hour, unchanged by the second firing": all(
                len(snapshots[a]) == 1 and again[a] == snapshots[a] for a in self.agents
            ),
        }
        print("", file=self.out)
        for name, ok in checks.items():
            print(f"  {'PASS' if ok else 'FAIL'}  {name}", file=self.out)
        return all(checks.values())


def run_demo(sandbox: Sandbox, payments: int = DEFAULT_PAYMENTS) -> int:
    from local.demo_orders import OrdersScenario

    print(f"\ndemo: {payments} payments through {sandbox.api_url}", flush=True)
    agents = AgentsScenario(sandbox)
    agents.publish()  # verified in the background while the payments run
    orders = OrdersScenario(sandbox)
    orders.start()  # placed, reserved, one cancelled, the rest paid alongside the payments burst
    ok = Scenario(sandbox, payments=payments).run()
    orders_ok = orders.finish()
    agents_ok = agents.finish()
    iam_ok = iam_section(sandbox)
    return 0 if ok and orders_ok and agents_ok and iam_ok else 1


def iam_section(sandbox: Sandbox) -> bool:
    """Every call above was authorized against its function's synthesized role: none may be denied.
    The full least-privilege report (grants never used) goes to a file beside the logs."""
    from emulator.iam_report import fetch_report, format_report

    report = fetch_report(sandbox.endpoint)
    lines = format_report(report)
    path = sandbox.config.log_dir.parent / "iam-report.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    denied: int = sum(sum(f["denied"].values()) for f in report["functions"]) + sum(
        report.get("serviceDenials", {}).values()
    )
    calls = sum(sum(f["calls"].values()) for f in report["functions"])
    print("\niam: every AWS call authorized against its function's synthesized role", flush=True)
    print(f"  {'calls authorized':<45}{calls}")
    print(f"  {'calls denied':<45}{denied}")
    shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    print(f"  {'report (grants never used, denials)':<45}{shown}")
    print(f"  {lines[-1]}")
    ok = denied == 0
    print(f"\n  {'PASS' if ok else 'FAIL'}  no call denied by IAM")
    return ok
