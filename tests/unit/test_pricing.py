"""The billing rule (``bench.pricing``): the spans the sandbox meters at its keep-everything sampling are
priced at the share each function's template keeps."""

from __future__ import annotations

from bench.pricing import Measured, billed_as, breakdown, price

GB = 1024**3


def _spans(caller: str, size: float) -> dict[str, object]:
    return {"caller": caller, "service": "xray", "action": "OTLP spans", "billed": size, "empty": 0}


def test_spans_are_priced_as_logs_ingestion_at_the_templates_sampled_share() -> None:
    line, key = billed_as("xray", "OTLP spans", "relay-dev-payments-PaymentWorker")
    assert key == "xray.spans_byte" and "sampled" in line
    assert price(key, GB) == 0.5  # CloudWatch Logs ingestion per GB
    measured = Measured(
        flow="payments",
        operations=1,
        requests=[_spans("relay-dev-api", GB), _spans("relay-dev-publisher", GB)],
        trace_sample_rates={"relay-dev-api": 0.05, "relay-dev-publisher": 0.5},
    )
    (figure,) = [v for k, v in breakdown(measured, 10, lambda _f: 0.25).items() if k.startswith("X-Ray")]
    assert figure == 0.5 * 0.05 + 0.5 * 0.5
    # A function the model does not know is priced as exported (every span), not as free.
    unknown = Measured(flow="p", operations=1, requests=[_spans("relay-dev-new", GB)])
    assert [v for k, v in breakdown(unknown, 10, lambda _f: 0.25).items() if k.startswith("X-Ray")] == [0.5]
