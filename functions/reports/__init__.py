"""The reports service: "publish accepted" is not business success -- verification by read-back is.

Layers, each in its own place:

* entry points -- ``handlers/``: ``verifier`` (ReportGenerated -> read the report back from the public
  report API, compare its sha256, record VERIFIED / MISMATCH / UNREACHABLE once) and ``notifier``
  (ReportGenerated -> report-ready webhook, at most once per report);
* domain -- ``verification`` (with the report API client), ``notification``, the event model in
  ``events``;
* data access -- ``store`` (the only module that knows the verifications table's attribute names),
  ``_http`` (bounded HTTP reads of a report);
* contract -- ``subscriptions`` (the event type and filter; the CDK stack imports it too);
* wiring -- ``settings`` and ``wiring``.
"""
