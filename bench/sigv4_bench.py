"""What API Gateway's AWS_IAM check costs a request in the sandbox: prints ``<name>: <value>`` lines,
asserts nothing.

The same request through the sandbox's HTTP API (``emulator.http_api.HttpApi.handle``, a runtime that
answers at once, so the route, the event and the response mapping are what is timed) on a route with
``NONE`` authorization and on the same route with ``AWS_IAM``, signed by the sandbox's client
(``ops.sigv4``, botocore's SigV4Auth); runs interleaved, medians of each, and their ratio. Also what
the client's signing costs, per request.

Run from the repo root: ``.venv/bin/python bench/sigv4_bench.py``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from bench_size import scaled  # noqa: E402  (bench/, the script's own directory)

from emulator import callers  # noqa: E402
from emulator.http_api import HttpApi  # noqa: E402
from emulator.provision import HttpApiSpec, RouteSpec  # noqa: E402
from emulator.runtime import InvokeResult  # noqa: E402
from emulator.server import ACCOUNT_ID, REGION  # noqa: E402
from ops.sigv4 import signed_headers  # noqa: E402

ROUNDS, PER_ROUND = scaled(15, 3), scaled(200, 20)
BODY = json.dumps({"paymentId": "pay-1", "amount": "12.50", "currency": "EUR"}).encode()


class Immediate:
    def invoke(self, function: str, event: dict[str, Any]) -> InvokeResult:
        return InvokeResult(True, payload={"statusCode": 202, "body": "{}"})


def _api(authorization: str, identities: list[callers.Identity]) -> HttpApi:
    spec = HttpApiSpec(
        name="bench", api_id="benchapi01", routes=[RouteSpec("POST /payments", "fn", authorization, "2.0")]
    )
    return HttpApi(spec, Immediate(), 0, callers=identities)  # type: ignore[arg-type]


def _per_request(call: Any) -> float:
    start = time.perf_counter()
    for _ in range(PER_ROUND):
        call()
    return (time.perf_counter() - start) / PER_ROUND * 1e6


def main() -> None:
    identities = callers.provision(REGION, ACCOUNT_ID, ["benchapi01"])
    client = identities[callers.CLIENT]
    open_api, iam_api = _api("NONE", []), _api("AWS_IAM", list(identities.values()))
    url = "http://127.0.0.1:8000/payments"
    base = {"Content-Type": "application/json", "Host": "127.0.0.1:8000"}
    headers = signed_headers(client.credentials(), REGION, "POST", url, base, BODY)
    assert iam_api.handle("POST", "/payments", headers, BODY)[0] == 202
    assert iam_api.handle("POST", "/payments", base, BODY)[0] == 403
    unsigned, signed, signing = [], [], []
    for _ in range(ROUNDS):
        unsigned.append(_per_request(lambda: open_api.handle("POST", "/payments", base, BODY)))
        signed.append(_per_request(lambda: iam_api.handle("POST", "/payments", headers, BODY)))
        signing.append(
            _per_request(lambda: signed_headers(client.credentials(), REGION, "POST", url, base, BODY))
        )
    u, s, g = (statistics.median(x) for x in (unsigned, signed, signing))
    print(f"http_api_handle_none_us: {u:.1f}")
    print(f"http_api_handle_aws_iam_us: {s:.1f}")
    print(f"aws_iam_verification_adds_us: {s - u:.1f}")
    print(f"aws_iam_over_none_ratio: {s / u:.2f}")
    print(f"client_signing_us: {g:.1f}")


if __name__ == "__main__":
    main()
