"""The sandbox's CLI: ``python -m local up | status | demo | chaos | fire-schedule [NAME] | iam-report |
readme-sample`` (the README's sample from the last demo's transcript, ``local.demo_readme``),
and ``python -m local smoke`` (``ops smoke`` against the sandbox, started for the run when none runs)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from local.sandbox import STATE_FILE, Sandbox, SandboxConfig, cli_hint, snapshot, status_line


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m local", description=__doc__)
    parser.add_argument(
        "command", choices=["up", "status", "demo", "chaos", "fire-schedule", "iam-report", "readme-sample"]
    )
    parser.add_argument("name", nargs="?", help="fire-schedule: the schedule to fire (default: all)")
    parser.add_argument("--emulator-port", type=int, default=4566)
    parser.add_argument(
        "--endpoint-url",
        default=None,
        help="iam-report: the running sandbox's emulator (default: the one `python -m local up` started)",
    )
    parser.add_argument("--json", action="store_true", help="iam-report: the raw report as JSON")
    parser.add_argument("--api-port", type=int, default=8000)
    parser.add_argument("--hour-every", type=float, default=None, metavar="SECONDS")
    parser.add_argument("--cdk-out", type=Path, default=None, help="cloud assembly (default: ./cdk.out)")
    parser.add_argument(
        "--payments",
        type=int,  # also converts DEMO_PAYMENTS; without either, the demo's own default
        default=os.environ.get("DEMO_PAYMENTS"),
        help="demo: how many payments (default: DEMO_PAYMENTS, else local.demo.DEFAULT_PAYMENTS)",
    )
    parser.add_argument(
        "--operations",
        type=int,
        default=int(os.environ.get("CHAOS_OPERATIONS", "10000")),
        help="chaos: how many operations (default: CHAOS_OPERATIONS, else 10000)",
    )
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=float(os.environ.get("CHAOS_FAULT_RATE", "0.1")),
        help="chaos: the share of calls, batches and invocations faulted (see local.chaos; default 0.1)",
    )
    parser.add_argument(
        "--seed", type=int, default=int(os.environ.get("CHAOS_SEED", "1")), help="chaos: the draws' seed"
    )
    parser.add_argument("--production-clock", action="store_true", help="keep the templates' backoff timings")
    parser.add_argument(
        "--no-state",
        action="store_true",
        help="write no .sandbox/state.json: `python -m ops` and `make smoke STAGE=local` do not find it",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="where the run writes what it would write to .sandbox: state.json (up), the caller profiles, "
        "logs/, the demo's transcript and IAM report (a run beside a developer's sandbox, as CI's are)",
    )
    parser.add_argument(
        "--deliver-twice",
        action="append",
        default=[],
        metavar="FUNCTION",
        help="chaos: invoke every batch twice for functions whose logical name contains FUNCTION "
        "('*' for all; repeatable)",
    )
    parser.add_argument(
        "--scheduled-time",
        default=None,
        metavar="ISO-8601",
        help="fire-schedule: the <aws.scheduler.scheduled-time> (default: the schedule's latest occurrence)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="fire-schedule: wait this long for the API destination calls of an event-bus schedule "
        "(0: do not wait; an SQS-target schedule has none)",
    )
    parser.add_argument(
        "--console-port", type=int, default=8600, help="up, demo: the console's port (taken: a free one)"
    )
    parser.add_argument("--no-console", action="store_true", help="up, demo: start no console")
    parser.add_argument(
        "--console-allow-redrive",
        action="store_true",
        help="up, demo: let the console redrive DLQs (dry run, reason and confirm still required)",
    )
    return parser.parse_args(argv)


def _console(args: argparse.Namespace, sandbox: Sandbox) -> Any:
    """The operations console on this sandbox (``ops.console``), its URL printed; None with --no-console."""
    if args.no_console:
        return None
    from ops.console import start_console

    console = start_console(
        sandbox.endpoint,
        templates=sandbox.config.cdk_out,
        port=args.console_port,
        allow_redrive=args.console_allow_redrive,
    )
    print(console.banner(), flush=True)
    return console


def _config(args: argparse.Namespace) -> SandboxConfig:
    config = SandboxConfig(
        emulator_port=args.emulator_port,
        api_port=args.api_port,
        hour_every=args.hour_every,
        fast_clock=not args.production_clock,
        deliver_twice=tuple(args.deliver_twice),
        write_state=not args.no_state,
    )
    if args.cdk_out is not None:
        config.cdk_out = args.cdk_out.resolve()
    if args.state_dir is not None:
        config.state_dir = args.state_dir.resolve()
        config.log_dir = config.state_dir / "logs"
    return config


def _up(args: argparse.Namespace) -> int:
    sandbox = Sandbox(_config(args))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    console = None
    try:
        sandbox.start()
        print(f"\nAPI:      {sandbox.api_url}   (AWS_IAM routes: sign as relay-local-client, see above)")
        for spec in sandbox.topology.apis:
            print(f"          {spec.name}: {', '.join(r.route_key for r in spec.routes)}")
        print(f"emulator: {sandbox.endpoint}")
        print(f"AWS CLI:  {cli_hint(sandbox.endpoint)}")
        console = _console(args, sandbox)
        for schedule in sandbox.topology.schedules:
            print(
                f"schedule: {schedule.name} {schedule.expression}   "
                f"(python -m local fire-schedule {schedule.name})"
            )
        print("Ctrl-C stops everything.\n")
        while not stop.is_set():
            print(f"\r{status_line(snapshot(sandbox.state()))}   ", end="", flush=True)
            stop.wait(2)
    except KeyboardInterrupt:
        pass
    finally:
        print("\nstopping…", flush=True)
        if console is not None:
            console.close()
        sandbox.close()
    return 0


def _status() -> int:
    if not STATE_FILE.exists():
        print("no sandbox running (start one with `python -m local up`)", file=sys.stderr)
        return 1
    state = json.loads(STATE_FILE.read_text())
    snap = snapshot(state)
    print(f"API {', '.join(state['apiUrls'])}   emulator {state['endpoint']}")
    for api in state.get("apis", []):
        print(f"  {api['name']:40s} {', '.join(api['routes'])}")
    for schedule in state.get("schedules", []):
        print(f"  schedule {schedule['name']:31s} {schedule['expression']} {schedule['timezone']}")
    print(status_line(snap))
    for name, queue in snap["queues"].items():
        print(f"  {name:55s} queued {queue['visible']:5d}  in flight {queue['inFlight']:5d}")
    for name, depth in snap["dlqs"].items():
        print(f"  {name:55s} DLQ depth {depth:5d}")
    return 0


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


class _Tee:
    """stdout, and a copy of every write in the demo's transcript (``local.demo_readme.TRANSCRIPT``)."""

    def __init__(self, stream: Any, copy: Any) -> None:
        self.stream, self.copy = stream, copy

    def write(self, text: str) -> int:
        self.copy.write(text)
        return int(self.stream.write(text))

    def flush(self) -> None:
        self.copy.flush()
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _demo(args: argparse.Namespace) -> int:
    from local.demo import run_demo
    from local.demo_readme import TRANSCRIPT

    # SIGTERM (CI timeouts, `timeout`) must shut down as cleanly as Ctrl-C.
    signal.signal(signal.SIGTERM, _interrupt)

    config = _config(args)
    # readme-sample reads the default place; a run given --state-dir keeps its transcript there.
    path = TRANSCRIPT if args.state_dir is None else config.state_dir / TRANSCRIPT.name
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as transcript:
        real, sys.stdout = sys.stdout, _Tee(sys.stdout, transcript)
        try:
            started = time.time()
            sandbox = Sandbox(config)
            console = None
            try:
                sandbox.start()
                console = _console(args, sandbox)
                code = (
                    run_demo(sandbox) if args.payments is None else run_demo(sandbox, payments=args.payments)
                )
            except KeyboardInterrupt:
                code = 130
            finally:
                if console is not None:
                    console.close()
                sandbox.close()
            print(f"\ndemo {'PASSED' if code == 0 else 'FAILED'} in {time.time() - started:.0f} s")
        finally:
            sys.stdout = real
    return code


def _readme_sample() -> int:
    from local.demo_readme import README, TRANSCRIPT, write_readme

    if not TRANSCRIPT.exists():
        print(f"error: no demo transcript at {TRANSCRIPT}: run make demo first", file=sys.stderr)
        return 2
    write_readme()
    print(f"{README.name}: the demo-output block rewritten from {TRANSCRIPT}")
    return 0


def _chaos(args: argparse.Namespace) -> int:
    from local.chaos import CHAOS_WORKERS, CLOCK, TIME_SCALE, run_chaos

    signal.signal(signal.SIGTERM, _interrupt)
    if not 0.0 <= args.fault_rate <= 1.0 or args.operations < 1:
        print("chaos: --fault-rate must be from 0 to 1 and --operations at least 1", file=sys.stderr)
        return 2
    started = time.time()
    config = _config(args)
    config.time_scale = TIME_SCALE
    config.max_workers_per_function = CHAOS_WORKERS
    config.clock_overrides = dict(CLOCK)
    config.trace_everything = False  # the run reads no trace: the templates' sampling
    sandbox = Sandbox(config)
    try:
        sandbox.start()
        code = run_chaos(sandbox, operations=args.operations, fault_rate=args.fault_rate, seed=args.seed)
    except KeyboardInterrupt:
        code = 130
    finally:
        sandbox.close()
    print(f"\nchaos {'PASSED' if code == 0 else 'FAILED'} in {time.time() - started:.0f} s")
    return code


def _fire_schedule(args: argparse.Namespace) -> int:
    from emulator.control import fire_remote

    if not STATE_FILE.exists():
        print("no sandbox running (start one with `python -m local up`)", file=sys.stderr)
        return 1
    state = json.loads(STATE_FILE.read_text())
    if not state.get("control"):
        print("the running sandbox has no control endpoint (restart it)", file=sys.stderr)
        return 1
    status, answer = fire_remote(state["control"], args.name, args.scheduled_time, args.wait)
    if status != 200:
        print(f"fire-schedule: {answer.get('message', answer)}", file=sys.stderr)
        return 2
    lines, code = firing_report(answer["firings"])
    for line in lines:
        print(line)
    return code


def firing_report(firings: list[dict[str, Any]]) -> tuple[list[str], int]:
    """What ``fire-schedule`` prints for the control endpoint's firings, and its exit code (1 when a
    target refused the schedule or an API destination call failed)."""
    lines: list[str] = []
    code = 0
    for firing in firings:
        to_queue = firing.get("targetKind") == "sqs"
        target = str(firing.get("target") or "").replace("/", ":").rsplit(":", 1)[-1]
        head = f"{firing['schedule']} @ {firing['scheduledTime']}:"
        if firing["error"]:
            code = 1
            call = "SendMessage" if to_queue else "PutEvents"
            where = "sent to the schedule's DLQ" if firing["deadLettered"] else "dropped (no DLQ)"
            lines.append(f"{head} {call} to {target} failed, {where} ({firing['error']})")
            continue
        if to_queue:
            # Nothing further to wait for: the message is on the queue, its consumer takes it from there.
            lines.append(f"{head} message {firing['messageId']} on queue {target}")
            continue
        lines.append(f"{head} event {firing['eventId']} on the bus {target}")
        for delivery in firing.get("deliveries", []):
            outcome = "delivered" if delivery["delivered"] else "NOT delivered"
            if delivery["deadLettered"]:
                outcome += ", sent to the rule's DLQ"
            lines.append(
                f"  rule {delivery['rule']}: attempts {delivery['attempts']} → {outcome} {delivery['error']}"
            )
            if not delivery["delivered"]:
                code = 1
    return lines, code


def _iam_report(args: argparse.Namespace) -> int:
    from emulator.iam_report import fetch_report, format_report

    endpoint = args.endpoint_url
    if endpoint is None:
        if not STATE_FILE.exists():
            hint = "start one with `python -m local up`, or pass --endpoint-url"
            print(f"no sandbox running ({hint})", file=sys.stderr)
            return 1
        endpoint = json.loads(STATE_FILE.read_text())["endpoint"]
    try:
        report = fetch_report(endpoint)
    except OSError as exc:
        print(f"iam-report: the sandbox's emulator at {endpoint} did not answer: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(format_report(report)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["smoke"]:  # ops smoke's own command line, with a sandbox started when none runs
        from local.smoke import main as smoke

        return smoke(argv[1:])
    args = parse_args(argv)
    if args.command == "up":
        return _up(args)
    if args.command == "status":
        return _status()
    if args.command == "demo":
        return _demo(args)
    if args.command == "chaos":
        return _chaos(args)
    if args.command == "iam-report":
        return _iam_report(args)
    if args.command == "readme-sample":
        return _readme_sample()
    return _fire_schedule(args)


if __name__ == "__main__":
    sys.exit(main())
