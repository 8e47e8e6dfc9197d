"""SigV4 for the callers of Relay's HTTP APIs: every route but `POST /score-snapshots` is `AWS_IAM`, so
API Gateway answers 403 to a request that is not signed for `execute-api` by an identity allowed
`execute-api:Invoke` on the route. The demo, the chaos driver, the e2e tests, schemathesis, `make smoke`
and the README's examples all sign here, the same way against AWS and against the sandbox (which verifies
the signature and the grant as API Gateway does, `emulator/sigv4_verify.py`).

    import boto3, requests
    from ops.sigv4 import SigV4

    auth = SigV4(boto3.Session(profile_name="relay-local-client").get_credentials(), "us-east-1")
    requests.post(f"{api}/payments", json=body, headers={"Idempotency-Key": key}, auth=auth)

botocore's own `SigV4Auth` computes the signature, over the exact bytes sent (method, path, query, the
headers, the payload's sha256): nothing here re-implements the algorithm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote_to_bytes, urlsplit, urlunsplit

import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

SERVICE = "execute-api"


def sigv4_url(url: str) -> str:
    """`url` with its query in SigV4's encoding: each name and value percent-encoded but for `-_.~`,
    a space as %20. botocore signs the query exactly as the URL writes it, while AWS decodes and encodes
    it again before it checks the signature, so a URL that writes a value another way (`requests`
    writes a space as `+` and leaves `:`, `,`, `'` and others bare) is refused with a signature that does
    not match. Sending this form makes the two agree; the values the server reads are unchanged (a raw
    `+` is a space to it, as to `requests`)."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = "&".join(f"{key}={value}" for key, value in query_pairs(parts.query))
    return urlunsplit(parts._replace(query=query))


def query_pairs(raw_query: str) -> list[tuple[str, str]]:
    """Each name and value of a query as AWS reads it for SigV4, in the order written: decoded to its
    bytes (never to text: a value need not be UTF-8), then percent-encoded but for `-_.~`. A raw `+` is a
    space (form encoding, what `requests`' params= writes), so `a+b` and `a%20b` are one value, signed
    as %20; a literal plus arrives as %2B. requests-aws4auth reads `+` the same way, and API Gateway
    accepts its signatures (tedder/requests-aws4auth#54). The sandbox's verifier sorts these pairs into
    its canonical query (`emulator/sigv4_verify.py`)."""

    def encode(text: str) -> str:
        return quote(unquote_to_bytes(text.replace("+", " ")), safe="-_.~")

    pairs = (part.partition("=") for part in raw_query.split("&")) if raw_query else ()
    return [(encode(key), encode(value)) for key, _, value in pairs]


def signed_headers(
    credentials: Any,
    region: str,
    method: str,
    url: str,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
) -> dict[str, str]:
    """The request's headers with `Authorization`, `X-Amz-Date` (and `X-Amz-Security-Token` for temporary
    credentials) added. `credentials` is botocore's (refreshable ones are frozen for this one request).
    `url` is signed as written: send `sigv4_url(url)` and sign that (`SigV4` does both)."""
    frozen = (
        credentials.get_frozen_credentials()
        if hasattr(credentials, "get_frozen_credentials")
        else credentials
    )
    request = AWSRequest(method=method, url=url, data=body or b"", headers=dict(headers or {}))
    SigV4Auth(frozen, SERVICE, region).add_auth(request)
    return dict(request.headers.items())


class SigV4(requests.auth.AuthBase):
    """`requests` auth that signs each prepared request for `execute-api` (`auth=SigV4(creds, region)`)."""

    def __init__(self, credentials: Any, region: str) -> None:
        if credentials is None:
            raise ValueError(
                "no AWS credentials to sign with: set AWS_PROFILE (the sandbox writes the profile "
                "relay-local-client, see `make local`) or the usual AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
            )
        self.credentials = credentials
        self.region = region

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        body = request.body
        if isinstance(body, str):
            data = body.encode()
        elif isinstance(body, bytes) or body is None:
            data = body or b""
        else:
            raise TypeError("SigV4 signs a body it can read whole (bytes or str), not a stream")
        # What requests will send is signed: the headers it set so far, but no hop-by-hop one.
        headers = {
            k: v if isinstance(v, str) else v.decode()
            for k, v in request.headers.items()
            if k.lower() != "connection"
        }
        method, url = request.method or "GET", sigv4_url(request.url or "")
        request.url = url
        request.headers.update(signed_headers(self.credentials, self.region, method, url, headers, data))
        return request
