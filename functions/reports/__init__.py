"""The reports service: "publish accepted" is not business success -- verification by read-back is.

Entry points (one module each, thin): ``verifier`` (ReportGenerated -> read the report back from the
public report API, compare its sha256, record VERIFIED / MISMATCH / UNREACHABLE once) and
``notifier`` (ReportGenerated -> report-ready webhook, at most once per report). The domain lives in
``verification`` and ``notification``, the event model in ``events``, the HTTP client in ``_http``,
and ``store`` is the only module that knows the verifications table's attribute names.
"""
