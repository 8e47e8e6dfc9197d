"""Fakes of the external HTTP systems (legacy payment system, invoice API, shipping API, public
report API, report-ready webhook) with fault knobs.

Real HTTP servers on 127.0.0.1, used by tests and the local sandbox::

    with LegacyPaymentsFake(LegacyPaymentKnobs(accept_then_complete_after=2)) as payments:
        client = LegacyPaymentsClient(base_url=payments.base_url)
        ...
        assert payments.charges() == {"op-1:payment": 1}

Run one in the foreground with ``python -m local.fakes legacy-payments --port 8101``.
"""

from local.fakes._server import FakeService, FaultKnobs, KnobError, knobs_from_env
from local.fakes.invoice_api import InvoiceApiFake, InvoiceKnobs
from local.fakes.legacy_payments import LegacyPaymentKnobs, LegacyPaymentsFake
from local.fakes.report_api import ReportApiFake, ReportApiKnobs
from local.fakes.shipping_api import ShippingApiFake, ShippingKnobs
from local.fakes.webhook import WebhookFake, WebhookKnobs

__all__ = [
    "FakeService",
    "FaultKnobs",
    "InvoiceApiFake",
    "InvoiceKnobs",
    "KnobError",
    "LegacyPaymentKnobs",
    "LegacyPaymentsFake",
    "ReportApiFake",
    "ReportApiKnobs",
    "ShippingApiFake",
    "ShippingKnobs",
    "WebhookFake",
    "WebhookKnobs",
    "knobs_from_env",
]
