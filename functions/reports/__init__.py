"""The reports service: "publish accepted" is not business success -- verification by read-back is.

Layers, each in its own place:

* entry points -- ``handlers/``: ``verifier`` (ReportGenerated -> read the report back from the public
  report API, compare its sha256, record VERIFIED / MISMATCH / UNREACHABLE once) and ``notifier``
  (ReportGenerated -> report-ready webhook, at most once per report);
* domain -- ``verification``, ``notification``, the event model in ``events``;
* data access and partners -- ``store`` (the only module that knows the verifications table's
  attribute names), ``_http`` (the report API client);
* wiring -- ``settings`` and ``wiring``.
"""
