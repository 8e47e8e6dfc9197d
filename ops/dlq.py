"""``python -m ops dlq sample|redrive``: read why messages were parked, and move them back.

Both commands receive from a DLQ, which SQS cannot do without raising each message's receive count and
hiding it for a while (``ops/parked.py``: what a parked message says, and reading without taking), so
both say so and ask first (``--yes`` skips the question). ``sample`` shows each message's reasons and
identities with its body reduced to its field names (``--show-body`` to print it). ``redrive`` runs the
redrive engine (``ops/redrive.py``): ``--dry-run`` only counts; otherwise a verified first batch
(``--first N``), then the rest with SQS's move task (``--rate``), or one by one with ``--filter``; every run
needs a ``--reason`` and is appended to ``--audit-file``. Exit codes: 0 done, 1 stopped, 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ops.app import App, OpsError, QueueInfo, add_connection_arguments, connect
from ops.parked import STREAM_FAILURE, Parked, Reader, Received, check_samplable, depth, read_parked
from ops.redrive import (
    DEFAULT_AUDIT_FILE,
    EXIT_OK,
    EXIT_STOPPED,
    SCAN_VISIBILITY_SECONDS,
    Redrive,
    RedriveOptions,
    filters_text,
)

SAMPLE_VISIBILITY_SECONDS = 30  # how long a sampled message is hidden at most (released at once)
FILTER_KEYS = ("errorClass", "eventType")


# -- asking first, and sampling -------------------------------------------------------------------


def confirm(warning: str, *, assume_yes: bool, out: Callable[[str], None] = print) -> bool:
    out(warning)
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        raise OpsError("not a terminal, so nothing can be confirmed: pass --yes to go ahead")
    answer = input("Continue? Type 'yes': ")
    return answer.strip().lower() == "yes"


def sample_warning(dlq: QueueInfo, n: int, *, visibility: int) -> str:
    return (
        f"WARNING: sampling RECEIVES up to {n} message(s) from {dlq.name}: each one's receive count goes up "
        f"by one, and it is hidden from every other reader for up to {visibility} s (it is released at "
        "once after reading). "
        + (
            "The queue has no RedrivePolicy of its own, so nothing is moved by it."
            if not dlq.has_redrive_policy
            else "The queue HAS a RedrivePolicy (--force): receives count towards it."
        )
    )


def sample(app: App, dlq: QueueInfo, n: int) -> list[Parked]:
    """Read up to ``n`` messages (held for at most SAMPLE_VISIBILITY_SECONDS, released at once)."""
    reader = Reader(app, dlq, visibility=SAMPLE_VISIBILITY_SECONDS)
    messages: list[Received] = []
    extra: list[Received] = []
    try:
        messages, extra = reader.scan(n)
        return [read_parked(m) for m in messages]
    finally:
        reader.release([*messages, *extra])


def describe(parked: Parked, index: int, total: int, *, show_body: bool, prefix: str) -> list[str]:
    lines = [
        f"message {index}/{total}  {parked.message_id}  "
        f"(received {parked.receive_count}×, sent {parked.sent_at})"
    ]
    if not parked.reasons and parked.route != STREAM_FAILURE:
        lines.append("  no reason attributes: moved here by a redrive policy (maxReceiveCount), not parked")
    for name, value in parked.reasons.items():
        if name == "sourceQueue":
            value = value.rstrip("/").rsplit("/", 1)[-1].removeprefix(f"{prefix}-")
        lines.append(f"  {name:<18} {value}")
    lines.append(f"  {'eventType':<18} {parked.event_type or '-'}")
    lines.append(f"  {'eventId':<18} {parked.event_id or '-'}")
    ids = ", ".join(f"{k}={v}" for k, v in parked.ids.items()) or "-"
    lines.append(f"  {'ids':<18} {ids}")
    lines.append(f"  {'correlationId':<18} {parked.correlation_id or '-'}")
    lines.append(f"  {'route':<18} {parked.route}" + (f"; {parked.problem}" if parked.problem else ""))
    if show_body:
        lines.append(f"  {'body':<18} {parked.body}")
    else:
        lines.append(f"  {'body':<18} REDACTED, fields only: {parked.shape}  (--show-body to print it)")
    return lines


# -- the commands ---------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    dlq = subparsers.add_parser(
        "dlq",
        help="sample a DLQ (why messages were parked) or redrive it",
        description="Read why messages were parked, and move them back to their source queue.",
    )
    commands = dlq.add_subparsers(dest="dlq_command", metavar="{sample,redrive}", required=True)

    sample_parser = commands.add_parser(
        "sample",
        help="show N parked messages: reason, eventType, eventId, ids, correlationId; body redacted",
        description="Receive up to N messages from a DLQ, show each one's reason (the relay.* attributes), "
        "eventType, eventId, business ids and correlationId, with the body reduced to its field names; "
        "then release them (ChangeMessageVisibility 0). Receiving raises each message's receive count and "
        "hides it for up to 30 s: it asks first (--yes to skip).",
    )
    sample_parser.add_argument(
        "dlq", metavar="DLQ", help="e.g. payments-payment-requests-dlq or payment-requests-dlq"
    )
    sample_parser.add_argument("-n", type=int, default=5, help="how many messages (default 5, at most 100)")
    sample_parser.add_argument(
        "--show-body", action="store_true", help="print bodies (they may hold personal data)"
    )
    sample_parser.add_argument("--yes", action="store_true", help="do not ask before receiving")
    sample_parser.add_argument(
        "--force", action="store_true", help="sample a queue that has its own RedrivePolicy"
    )
    sample_parser.add_argument("--json", action="store_true", help="print JSON")
    add_connection_arguments(sample_parser)
    sample_parser.set_defaults(func=run_sample)

    redrive = commands.add_parser(
        "redrive",
        help="move parked messages back: dry run, a verified first batch, then the rest",
        description="Move a DLQ's messages back to their source queue: first --first N by hand, verified "
        "(the consumer drained them, none was parked again, the business checks pass), then the rest with "
        "SQS's move task (cancelled if messages are parked again, or on Ctrl-C). --dry-run only counts. "
        "Every run appends an audit record to --audit-file. Exit 0 done, 1 stopped, 2 usage.",
    )
    redrive.add_argument(
        "dlq", metavar="DLQ", help="e.g. payments-payment-requests-dlq or payment-requests-dlq"
    )
    redrive.add_argument(
        "--reason", required=True, help="why (for the audit record): the fix that was deployed"
    )
    redrive.add_argument("--dry-run", action="store_true", help="read every message and count; move nothing")
    redrive.add_argument(
        "--first", type=int, default=5, metavar="N", help="the verified first batch (default 5)"
    )
    redrive.add_argument("--rate", type=int, metavar="M", help="messages per second (move task: 1-500)")
    redrive.add_argument(
        "--filter",
        action="append",
        metavar="KEY=VALUE",
        help="only errorClass=<class> or eventType=<type> (repeat: all must hold); moved one by one",
    )
    redrive.add_argument(
        "--verify-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long the first batch may take to be consumed (default 300)",
    )
    redrive.add_argument(
        "--poll", type=float, default=5.0, metavar="SECONDS", help="progress interval (default 5)"
    )
    redrive.add_argument(
        "--scan-limit",
        type=int,
        default=10_000,
        metavar="N",
        help="at most N messages read by a dry run (default 10000)",
    )
    redrive.add_argument(
        "--audit-file",
        type=Path,
        default=DEFAULT_AUDIT_FILE,
        help=f"JSON-lines audit trail (default {DEFAULT_AUDIT_FILE})",
    )
    redrive.add_argument("--yes", action="store_true", help="do not ask before receiving and moving")
    redrive.add_argument(
        "--force", action="store_true", help="redrive a queue that has its own RedrivePolicy"
    )
    add_connection_arguments(redrive)
    redrive.set_defaults(func=run_redrive)


def run_sample(args: argparse.Namespace) -> int:
    if not 1 <= args.n <= 100:
        raise OpsError("-n takes 1 to 100")
    app = connect(args)
    dlq = app.find_queue(args.dlq, dlq=True)
    check_samplable(dlq, force=args.force)
    # With --json the warning goes to stderr, so stdout stays one JSON document.
    out: Callable[[str], None] = (lambda text: print(text, file=sys.stderr)) if args.json else print
    if not confirm(
        sample_warning(dlq, args.n, visibility=SAMPLE_VISIBILITY_SECONDS), assume_yes=args.yes, out=out
    ):
        out("not sampled")
        return EXIT_STOPPED
    visible, in_flight, _ = depth(app, dlq)
    parked = sample(app, dlq, args.n)
    if args.json:
        print(
            json.dumps(
                {
                    "dlq": dlq.name,
                    "visible": visible,
                    "inFlight": in_flight,
                    "messages": [p.to_json(show_body=args.show_body) for p in parked],
                }
            )
        )
        return EXIT_OK
    print(f"{dlq.name}: {visible} visible, {in_flight} in flight; sampled {len(parked)} (released)")
    for i, p in enumerate(parked, 1):
        for line in describe(p, i, len(parked), show_body=args.show_body, prefix=app.prefix):
            print(line)
    return EXIT_OK


def run_redrive(args: argparse.Namespace) -> int:
    if not args.reason.strip():
        raise OpsError("--reason must say why (it goes into the audit record)")
    if args.first < 1:
        raise OpsError("--first takes N >= 1")
    if args.rate is not None and not 1 <= args.rate <= 500:
        raise OpsError("--rate takes 1 to 500 messages a second (SQS's move task limit)")
    filters = parse_filters(args.filter)
    app = connect(args)
    dlq = app.find_queue(args.dlq, dlq=True)
    check_samplable(dlq, force=args.force)
    options = RedriveOptions(
        reason=args.reason.strip(),
        dry_run=args.dry_run,
        first=args.first,
        rate=args.rate,
        filters=filters,
        verify_timeout=args.verify_timeout,
        poll_seconds=args.poll,
        scan_limit=args.scan_limit,
        audit_file=args.audit_file,
        assume_yes=args.yes,
        force=args.force,
    )
    redrive = Redrive(app, dlq, options)
    if not confirm(redrive_warning(redrive), assume_yes=args.yes):
        print("nothing done")
        return EXIT_STOPPED
    return redrive.run()


def parse_filters(values: Sequence[str] | None) -> dict[str, str]:
    filters: dict[str, str] = {}
    for value in values or ():
        key, sep, wanted = value.partition("=")
        if not sep or key not in FILTER_KEYS or not wanted:
            raise OpsError(f"--filter {value!r}: expected errorClass=<class> or eventType=<type>")
        filters[key] = wanted
    return filters


def redrive_warning(redrive: Redrive) -> str:
    dlq = redrive.dlq
    visible, in_flight, _ = depth(redrive.app, dlq)
    source = redrive.redrive_source
    to = source.short if source else "each message's relay.sourceQueue"
    options = redrive.options
    if options.dry_run:
        return (
            f"WARNING: a dry run RECEIVES EVERY message of {dlq.name} (~{visible + in_flight}, at most "
            f"{options.scan_limit}) to count them: each one's receive count goes up by one and it is hidden "
            f"for up to {SCAN_VISIBILITY_SECONDS} s while the DLQ is read, then released. Nothing is moved."
        )
    rest = (
        f"then the other matching ones one by one ({filters_text(options.filters)})"
        if options.filters
        else "then the rest with SQS's move task"
    )
    return (
        f"WARNING: this MOVES messages from {dlq.name} (~{visible + in_flight} there) to {to}: first "
        f"{options.first}, verified, {rest}. Receiving raises receive counts and hides messages while they "
        f"are read. Reason: {options.reason}"
    )
