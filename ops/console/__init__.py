"""``python -m ops console``: the operations console in the browser, on the same code as the commands.

The sandbox starts one (``make local``, ``make demo`` print its URL); against a deployed stage or a
running sandbox, ``python -m ops console [--local | --endpoint-url URL | --stage S --region R]``.
It is read-only unless started with ``--allow-redrive``: then a DLQ can be redriven from the page, by
``ops dlq redrive``'s engine, after a dry run, with a reason, on an explicit confirm (``ops.console.jobs``).
The pages and what each reads: ``ops.console.views``; the server: ``ops.console.server``;
docs/console.md.
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import Any

from ops.redrive import DEFAULT_AUDIT_FILE


def register(subparsers: Any, add_connection_arguments: Any, connect: Any) -> None:
    parser = subparsers.add_parser(
        "console",
        help="the operations console in the browser (127.0.0.1 only; read-only unless --allow-redrive)",
        description="Serve the operations console on 127.0.0.1: operations and orders with their step "
        "timelines, queues and DLQs with their parked messages (from the ledger: nothing is received), "
        "the sandbox's IAM report and request meter, charts. Read-only unless --allow-redrive.",
    )
    parser.add_argument("--port", type=int, default=8600, help="the port (default 8600; 0: any free one)")
    parser.add_argument(
        "--allow-redrive",
        action="store_true",
        help="let the page redrive a DLQ and replay a stranded operation (dry run, reason and confirm "
        "still required; audited as ops dlq redrive and ops replay are)",
    )
    parser.add_argument(
        "--audit-file",
        type=Path,
        default=DEFAULT_AUDIT_FILE,
        help=f"the redrives' JSON-lines audit trail, as ops dlq redrive's (default {DEFAULT_AUDIT_FILE})",
    )
    add_connection_arguments(parser)

    def run(args: argparse.Namespace) -> int:
        from ops.console.jobs import Redrives
        from ops.console.server import Console

        app = connect(args)
        redrives = Redrives(app, allowed=args.allow_redrive, audit_file=args.audit_file)
        console = Console(app, port=args.port, redrives=redrives).start()
        print(console.banner(), flush=True)
        print("Ctrl-C stops it.", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            console.close()
        return 0

    parser.set_defaults(run=run)


def start_console(
    endpoint: str,
    *,
    templates: Path | None = None,
    port: int = 8600,
    allow_redrive: bool = False,
    audit_file: Path = DEFAULT_AUDIT_FILE,
    stage: str = "dev",
) -> Any:
    """A console on the sandbox whose emulator is at ``endpoint``, started (``python -m local up`` and
    ``demo``): the stage as ``python -m ops --endpoint-url`` sees it. Returns the ``Console``."""
    from ops.app import DEFAULT_TEMPLATES, App
    from ops.console.jobs import Redrives
    from ops.console.server import Console
    from ops.paths import use_function_code

    use_function_code()
    app = App(stage=stage, endpoint_url=endpoint, templates=templates or DEFAULT_TEMPLATES)
    redrives = Redrives(app, allowed=allow_redrive, audit_file=audit_file)
    return Console(app, port=port, redrives=redrives).start()
