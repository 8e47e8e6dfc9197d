"""Run one fake in the foreground until Ctrl-C.

    python -m local.fakes legacy-payments --port 8101 --knob accept_then_complete_after=2
    FAKE_FAIL_RATE_5XX=0.2 python -m local.fakes invoice-api --port 8102
    python -m local.fakes report-api --port 8103 --knob invisible_reads=2 --knob tamper_ids=r-7
    python -m local.fakes webhook --port 8104
    python -m local.fakes shipping-api --port 8105 --knob refuse_customers=cust-9

Knobs come from ``FAKE_<NAME>`` environment variables, then ``--knob NAME=VALUE`` (which wins).
They can still be changed while it runs: ``curl -X POST localhost:8101/_admin/knobs -d '{"outage": true}'``.
"""

import argparse
import json
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from local.fakes._server import FakeService, KnobError, knobs_from_env
from local.fakes.invoice_api import InvoiceApiFake, InvoiceKnobs
from local.fakes.legacy_payments import LegacyPaymentKnobs, LegacyPaymentsFake
from local.fakes.report_api import ReportApiFake, ReportApiKnobs
from local.fakes.shipping_api import ShippingApiFake, ShippingKnobs
from local.fakes.webhook import WebhookFake, WebhookKnobs

DEFAULT_PORTS = {
    "legacy-payments": 8101,
    "invoice-api": 8102,
    "report-api": 8103,
    "webhook": 8104,
    "shipping-api": 8105,
}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m local.fakes", description=__doc__.splitlines()[0])
    parser.add_argument("service", choices=sorted(DEFAULT_PORTS))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--port",
        type=int,
        help=(
            "default: 8101 legacy-payments, 8102 invoice-api, 8103 report-api, 8104 webhook, "
            "8105 shipping-api"
        ),
    )
    parser.add_argument(
        "--knob", action="append", default=[], metavar="NAME=VALUE", help="a knob setting; repeatable"
    )
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    return parser.parse_args(argv)


def build_fake(args: argparse.Namespace, environ: Mapping[str, str]) -> FakeService[Any]:
    """The fake named by ``args`` with knobs from the environment and ``--knob`` (not started)."""
    settings: dict[str, str] = {}
    for item in args.knob:
        name, sep, value = item.partition("=")
        if not sep:
            raise KnobError(f"--knob {item!r} is not NAME=VALUE")
        settings[name.strip()] = value
    port = args.port if args.port is not None else DEFAULT_PORTS[args.service]
    quiet = not args.verbose
    if args.service == "legacy-payments":
        payment_knobs = LegacyPaymentKnobs().replace(
            **{**knobs_from_env(LegacyPaymentKnobs, environ), **settings}
        )
        return LegacyPaymentsFake(payment_knobs, host=args.host, port=port, quiet=quiet)
    if args.service == "report-api":
        report_knobs = ReportApiKnobs().replace(**{**knobs_from_env(ReportApiKnobs, environ), **settings})
        return ReportApiFake(report_knobs, host=args.host, port=port, quiet=quiet)
    if args.service == "webhook":
        webhook_knobs = WebhookKnobs().replace(**{**knobs_from_env(WebhookKnobs, environ), **settings})
        return WebhookFake(webhook_knobs, host=args.host, port=port, quiet=quiet)
    if args.service == "shipping-api":
        shipping_knobs = ShippingKnobs().replace(**{**knobs_from_env(ShippingKnobs, environ), **settings})
        return ShippingApiFake(shipping_knobs, host=args.host, port=port, quiet=quiet)
    invoice_knobs = InvoiceKnobs().replace(**{**knobs_from_env(InvoiceKnobs, environ), **settings})
    return InvoiceApiFake(invoice_knobs, host=args.host, port=port, quiet=quiet)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        fake = build_fake(args, os.environ)
    except KnobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    base_url = fake.start()
    print(f"{fake.name} fake listening on {base_url}", flush=True)
    print(f"knobs: {json.dumps(fake.knobs.to_json())}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
