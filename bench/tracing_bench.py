"""Tracing cold start: import + first traced invocation in fresh processes, interleaved, medians: a boto3-only
handler and relay.tracing (OpenTelemetry), and the retired X-Ray SDK path (Powertools Tracer) when
aws-xray-sdk is installed (it left uv.lock with issue 48; the before/after pair is in docs/measurements.md).
Figures only, never asserted; ``make bench`` runs it. Run from the repo root: ``python bench/tracing_bench.py
[rounds]``."""

import importlib.util
import os
import statistics
import subprocess
import sys
import time

from bench_size import scaled  # bench/, the script's own directory

BOTO = "import boto3\n"
BEFORE = """
import boto3
from aws_lambda_powertools.tracing import Tracer
t = Tracer(service='bench')
@t.capture_lambda_handler(capture_response=False)
def handler(e, c): return {}
"""
AFTER = """
import boto3
from relay.observability import trace_handler
@trace_handler
def handler(e, c): return {}
"""
FIRST = "\nclass C: function_name='bench'\nhandler({}, C())\n"


def run(code, env):
    s = time.perf_counter()
    # stderr: the exporter says it could not reach the closed port; the bench measures, it does not export
    subprocess.run([sys.executable, "-c", code], check=True, env=env, stderr=subprocess.DEVNULL)
    return time.perf_counter() - s


base = {
    **os.environ,
    "PYTHONPATH": "layers/relay/python",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "x",
    "AWS_SECRET_ACCESS_KEY": "x",
    "POWERTOOLS_SERVICE_NAME": "bench",
}
base.pop("OTEL_SDK_DISABLED", None)
base.pop("POWERTOOLS_TRACE_DISABLED", None)
after_env = {**base, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}
cases = {
    "boto3_only_import": (BOTO, base),
    "xray_sdk_import": (BEFORE, base),
    "otel_import": (AFTER, after_env),
    "xray_sdk_import_and_first_invocation": (BEFORE + FIRST, base),
    "otel_import_and_first_invocation": (AFTER + FIRST, after_env),
}
if importlib.util.find_spec("aws_xray_sdk") is None:
    print("xray_sdk: not installed (the retired path is measured only where aws-xray-sdk is)")
    cases = {k: v for k, v in cases.items() if not k.startswith("xray_sdk")}
samples = {k: [] for k in cases}
for c, e in cases.values():
    run(c, e)
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else scaled(7, 1)):
    for k, (c, e) in cases.items():
        samples[k].append(run(c, e))
med = {k: statistics.median(v) for k, v in samples.items()}
for k, v in med.items():
    print(f"{k}_ms: {v * 1000:.0f}  (x{v / med['boto3_only_import']:.2f} boto3-only)")
print(f"otel_import_ratio: {med['otel_import'] / med['boto3_only_import']:.2f}  (goal <= 1.3)")
