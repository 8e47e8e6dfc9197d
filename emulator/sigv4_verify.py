"""API Gateway's `AWS_IAM` authorization of a request, for the sandbox's HTTP API (`emulator.http_api`).

A route with `AuthorizationType: AWS_IAM` admits a request only when it is SigV4-signed for `execute-api`
in the API's region by a known key (with its session token, for temporary credentials), within the
clock-skew window, over exactly what was received, and the signer's identity policies allow
`execute-api:Invoke` on the route's ARN
(`arn:aws:execute-api:<region>:<account>:<api-id>/<stage>/<METHOD>/<path>`, the request's own path,
as the ARN format reference gives it; explicit deny first). Pure: no I/O,
unit-tested directly.

The answers. AWS says IAM authorization of HTTP APIs "is similar to that for REST APIs" and documents the
REST API's texts only (the "troubleshoot HTTP 403 errors" and "IAM SigV4 mismatch" knowledge-center
articles, the IAM User Guide's "Troubleshoot signing"); those are the texts used here, each a 403 with
`{"message": ...}` and the `x-amzn-ErrorType` AWS lists:

- no signature: MissingAuthenticationTokenException, "Missing Authentication Token";
- a malformed Authorization: IncompleteSignatureException, "Authorization header requires 'Credential'
  parameter. … Authorization=…" (or "'x' not a valid key=value pair (missing equal-sign) …");
- a signature that does not match: InvalidSignatureException, "The request signature we calculated does
  not match the signature you provided. …", with the canonical string and the string-to-sign;
- outside the 5-minute window: InvalidSignatureException, "Signature expired: <date> is now earlier than
  <date> (<now> - 5 min.)";
- an unknown key, or a session's key without its token (or with another): UnrecognizedClientException,
  "The security token included in the request is invalid.";
- no grant: AccessDeniedException, "User: <arn> is not authorized to perform: execute-api:Invoke on
  resource: <arn> because no identity-based policy allows the execute-api:Invoke action".

One report of an HTTP API (aws/aws-cdk#21182) saw `{"message":"Forbidden"}` for a signer without the grant;
the status, 403, is the same either way, and it is what a client acts on.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, unquote_to_bytes

from emulator.callers import Identity
from emulator.iam import decide


def query_pairs(raw_query: str) -> list[tuple[str, str]]:
    """Each name and value of a query as AWS reads it for SigV4, in the order written: decoded to its
    bytes (never to text: a value need not be UTF-8), then percent-encoded but for `-_.~`. A raw `+` is a
    space (form encoding), so `a+b` and `a%20b` are one value; a literal plus arrives as %2B. API Gateway
    reads a query this way; a client may sign it so too (an app's signer is its own, the emulator's is
    AWS's side)."""

    def encode(text: str) -> str:
        return quote(unquote_to_bytes(text.replace("+", " ")), safe="-_.~")

    pairs = (part.partition("=") for part in raw_query.split("&")) if raw_query else ()
    return [(encode(key), encode(value)) for key, _, value in pairs]


ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "execute-api"
SKEW = timedelta(minutes=5)
_PARAM = re.compile(r"^\s*([A-Za-z]+)=(.*?)\s*$")


@dataclass(frozen=True)
class Refusal:
    error_type: str
    message: str

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        headers = {"content-type": "application/json", "x-amzn-errortype": self.error_type}
        return 403, headers, json.dumps({"message": self.message}, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Verified:
    identity: Identity
    resource: str


def route_arn(region: str, account: str, api_id: str, stage: str, method: str, path: str) -> str:
    return f"arn:aws:execute-api:{region}:{account}:{api_id}/{stage}/{method.upper()}/{path.lstrip('/')}"


def canonical_uri(raw_path: str) -> str:
    # Every service but S3 encodes the path's segments twice: once by the client for the URL, once more
    # for the canonical request (the IAM User Guide; botocore's SigV4Auth does the same).
    return quote(raw_path or "/", safe="/~")


def canonical_query(raw_query: str) -> str:
    # Each name and value as AWS reads it (ops.sigv4.query_pairs, which the clients send), sorted by
    # name, then value.
    return "&".join(f"{k}={v}" for k, v in sorted(query_pairs(raw_query)))


def _parse_authorization(header: str) -> tuple[dict[str, str], list[str]]:
    """The Credential/SignedHeaders/Signature parameters, and what is missing or malformed."""
    _, _, rest = header.partition(" ")
    params: dict[str, str] = {}
    problems: list[str] = []
    for part in rest.split(","):
        if not part.strip():
            continue
        found = _PARAM.match(part)
        if found is None:
            problems.append(
                f"'{part.strip()}' not a valid key=value pair (missing equal-sign) in Authorization header: "
                f"'{header}'."
            )
            continue
        params[found.group(1)] = found.group(2)
    return params, problems


def verify(
    *,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Mapping[str, str],
    body: bytes,
    region: str,
    api_id: str,
    stage: str,
    identities: Iterable[Identity],
    now: datetime | None = None,
) -> Verified | Refusal:
    """The signer and the route ARN it may invoke, or API Gateway's refusal."""
    lowered = {k.lower(): v for k, v in headers.items()}
    authorization = lowered.get("authorization", "")
    if not authorization:
        return Refusal("MissingAuthenticationTokenException", "Missing Authentication Token")
    params, problems = _parse_authorization(authorization)
    if problems:
        return Refusal("IncompleteSignatureException", problems[0])
    missing = [
        f"Authorization header requires '{p}' parameter."
        for p in ("Credential", "Signature", "SignedHeaders")
        if p not in params
    ]
    amz_date = lowered.get("x-amz-date", "")
    if not amz_date and "date" not in lowered:
        missing.append("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
    if missing:
        return Refusal("IncompleteSignatureException", " ".join(missing) + f" Authorization={authorization}")
    scope = params["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        return Refusal(
            "IncompleteSignatureException",
            f"Credential should be scoped to a valid region. Credential={params['Credential']}",
        )
    key_id, date, scope_region, scope_service, _ = scope
    # The scope errors every SigV4 service answers (a key signed for another region or service).
    if scope_region != region:
        return Refusal(
            "InvalidSignatureException",
            f"Credential should be scoped to a valid region, not '{scope_region}'. ",
        )
    if scope_service != SERVICE:
        return Refusal(
            "InvalidSignatureException", f"Credential should be scoped to correct service: '{SERVICE}'. "
        )
    identity = next((i for i in identities if i.access_key_id == key_id), None)
    if identity is None:
        return Refusal(
            "UnrecognizedClientException", "The security token included in the request is invalid."
        )
    # A session's key is valid only with its token, and a token only with its session's key.
    if (lowered.get("x-amz-security-token") or None) != identity.session_token:
        return Refusal(
            "UnrecognizedClientException", "The security token included in the request is invalid."
        )
    try:
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return Refusal(
            "IncompleteSignatureException", f"Date must be in ISO-8601 'basic format'. Got '{amz_date}'."
        )
    current = now or datetime.now(UTC)
    stamp = "%Y%m%dT%H%M%SZ"
    if signed_at < current - SKEW:
        return Refusal(
            "InvalidSignatureException",
            f"Signature expired: {signed_at.strftime(stamp)} is now earlier than "
            f"{(current - SKEW).strftime(stamp)} ({current.strftime(stamp)} - 5 min.)",
        )
    if signed_at > current + SKEW:
        return Refusal(
            "InvalidSignatureException",
            f"Signature not yet current: {signed_at.strftime(stamp)} is still later than "
            f"{(current + SKEW).strftime(stamp)} ({current.strftime(stamp)} + 5 min.)",
        )
    signed_names = params["SignedHeaders"].split(";")
    canonical_headers = "".join(f"{n}:{' '.join(lowered.get(n, '').split())}\n" for n in signed_names)
    payload_hash = lowered.get("x-amz-content-sha256") or hashlib.sha256(body).hexdigest()
    canonical = "\n".join(
        [method.upper(), canonical_uri(raw_path), canonical_query(raw_query), canonical_headers,
         params["SignedHeaders"], payload_hash]
    )  # fmt: skip
    credential_scope = f"{date}/{scope_region}/{SERVICE}/aws4_request"
    string_to_sign = "\n".join(
        [ALGORITHM, amz_date, credential_scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{identity.secret_access_key}".encode()
    for part in (date, scope_region, SERVICE, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, params["Signature"]):
        return Refusal(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. Check your AWS "
            "Secret Access Key and signing method. Consult the service documentation for details.\n\n"
            f"The Canonical String for this request should have been\n'{canonical}'\n\n"
            f"The String-to-Sign should have been\n'{string_to_sign}'\n",
        )
    resource = route_arn(region, identity.account, api_id, stage, method, raw_path)
    principal = identity.principal
    decision = decide(principal, principal.caller, "execute-api:Invoke", resource, {})
    if not decision.allowed:
        return Refusal(
            "AccessDeniedException",
            f"User: {identity.arn} is not authorized to perform: execute-api:Invoke on resource: {resource} "
            f"{decision.reason}",
        )
    return Verified(identity, resource)
