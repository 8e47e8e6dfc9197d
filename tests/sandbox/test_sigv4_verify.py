"""API Gateway's AWS_IAM check as the sandbox makes it (emulator/sigv4_verify.py): requests signed by botocore
(ops/sigv4.py, what every client of Relay uses) verify; every way a request can fail gets its 403."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest

from emulator import callers
from emulator.sigv4_verify import Refusal, Verified, canonical_query, route_arn, verify
from ops.sigv4 import signed_headers

REGION, ACCOUNT, API = "us-east-1", "123456789012", "a1b2c3d4e5"
URL = "http://127.0.0.1:8000/payments?b=2&a=1"
BODY = json.dumps({"amount": "12.50"}).encode()
IDENTITIES = callers.provision(REGION, ACCOUNT, [API])
CLIENT, DENIED = IDENTITIES[callers.CLIENT], IDENTITIES[callers.DENIED]


def _signed(identity=CLIENT, *, url=URL, body=BODY, method="POST", region=REGION, service_region=None):
    headers = {"Content-Type": "application/json", "Host": urlsplit(url).netloc}
    return signed_headers(identity.credentials(), service_region or region, method, url, headers, body)


def _verify(headers, *, url=URL, body=BODY, method="POST", now=None):
    parts = urlsplit(url)
    return verify(
        method=method,
        raw_path=parts.path,
        raw_query=parts.query,
        headers=headers,
        body=body,
        region=REGION,
        api_id=API,
        stage="$default",
        identities=IDENTITIES.values(),
        now=now,
    )


def _refusal(result) -> tuple[str, str]:
    assert isinstance(result, Refusal), result
    status, headers, body = result.answer()
    assert status == 403
    assert headers["x-amzn-errortype"] == result.error_type
    return result.error_type, json.loads(body)["message"]


def test_a_request_the_client_signed_verifies_with_the_route_arn_it_invokes():
    result = _verify(_signed())
    assert isinstance(result, Verified)
    assert result.identity.arn == f"arn:aws:iam::{ACCOUNT}:user/relay-local-client"
    assert result.resource == route_arn(REGION, ACCOUNT, API, "$default", "POST", "/payments")
    assert result.resource == f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{API}/$default/POST/payments"


def test_an_unsigned_request_is_missing_its_authentication_token():
    assert _refusal(_verify({"Content-Type": "application/json"})) == (
        "MissingAuthenticationTokenException",
        "Missing Authentication Token",
    )


@pytest.mark.parametrize(
    ("authorization", "expected"),
    [
        ("Bearer abc", "'abc' not a valid key=value pair (missing equal-sign) in Authorization header"),
        (
            "AWS4-HMAC-SHA256 Credential=AKIA/20261203/us-east-1/execute-api/aws4_request",
            "Authorization header requires 'Signature' parameter. Authorization header requires "
            "'SignedHeaders' parameter.",
        ),
    ],
)
def test_a_malformed_authorization_header_is_an_incomplete_signature(authorization, expected):
    headers = {**_signed(), "Authorization": authorization}
    error_type, message = _refusal(_verify(headers))
    assert error_type == "IncompleteSignatureException"
    assert expected in message


def test_a_changed_body_path_or_header_no_longer_matches_its_signature():
    headers = _signed()
    error_type, message = _refusal(_verify(headers, body=BODY.replace(b"12.50", b"99.50")))
    assert error_type == "InvalidSignatureException"
    assert message.startswith(
        "The request signature we calculated does not match the signature you provided."
    )
    assert "The Canonical String for this request should have been\n'POST\n/payments\na=1&b=2\n" in message
    assert (
        _refusal(_verify(headers, url=URL.replace("/payments", "/orders")))[0] == "InvalidSignatureException"
    )
    tampered = {**headers, "Content-Type": "text/plain"}
    assert _refusal(_verify(tampered))[0] == "InvalidSignatureException"


def test_another_secret_for_the_same_key_does_not_verify():
    forged = callers.Identity(CLIENT.name, CLIENT.access_key_id, "not-the-secret", ACCOUNT, CLIENT.policy)
    assert _refusal(_verify(_signed(forged)))[0] == "InvalidSignatureException"


def test_a_signature_older_than_five_minutes_has_expired():
    headers = _signed()
    signed_at = datetime.strptime(headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert isinstance(_verify(headers, now=signed_at + timedelta(minutes=4)), Verified)
    error_type, message = _refusal(_verify(headers, now=signed_at + timedelta(minutes=6)))
    assert error_type == "InvalidSignatureException"
    assert message.startswith(f"Signature expired: {headers['X-Amz-Date']} is now earlier than ")
    assert message.endswith(" - 5 min.)")
    assert _refusal(_verify(headers, now=signed_at - timedelta(minutes=6)))[1].startswith(
        "Signature not yet current"
    )


def test_an_unknown_key_is_an_invalid_security_token():
    stranger = callers.Identity("someone", "AKIAUNKNOWN000000000", "secret", ACCOUNT)
    assert _refusal(_verify(_signed(stranger))) == (
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
    )


def test_a_sessions_key_verifies_with_its_token_only():
    import dataclasses

    session = callers.Identity(
        "relay-local-client-session", "ASIAEXAMPLESESSION01", "secret", ACCOUNT, CLIENT.policy, "token-1"
    )
    identities = [*IDENTITIES.values(), session]

    def verify_as(headers):
        parts = urlsplit(URL)
        return verify(
            method="POST", raw_path=parts.path, raw_query=parts.query, headers=headers, body=BODY,
            region=REGION, api_id=API, stage="$default", identities=identities,
        )  # fmt: skip

    signed = _signed(session)
    assert signed["X-Amz-Security-Token"] == "token-1"
    assert isinstance(verify_as(signed), Verified)
    without = _signed(dataclasses.replace(session, session_token=None))
    other = _signed(dataclasses.replace(session, session_token="token-2"))
    for headers in (without, other):
        assert _refusal(verify_as(headers)) == (
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        )
    # A long-term key sent with a token it never had is refused the same way.
    assert _refusal(_verify(_signed(dataclasses.replace(CLIENT, session_token="made-up"))))[0] == (
        "UnrecognizedClientException"
    )


def test_a_key_signed_for_another_region_is_refused():
    error_type, message = _refusal(_verify(_signed(service_region="eu-west-1")))
    assert (error_type, message) == (
        "InvalidSignatureException",
        "Credential should be scoped to a valid region, not 'eu-west-1'. ",
    )


def test_a_signer_without_execute_api_invoke_is_not_authorized():
    error_type, message = _refusal(_verify(_signed(DENIED)))
    assert error_type == "AccessDeniedException"
    assert message == (
        f"User: arn:aws:iam::{ACCOUNT}:user/relay-local-denied is not authorized to perform: "
        f"execute-api:Invoke on resource: "
        f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{API}/$default/POST/payments "
        "because no identity-based policy allows the execute-api:Invoke action"
    )


def test_the_clients_grant_covers_its_own_api_only():
    other = callers.provision(REGION, ACCOUNT, ["zzzzzzzzzz"])[callers.CLIENT]
    other = callers.Identity(
        CLIENT.name, CLIENT.access_key_id, CLIENT.secret_access_key, ACCOUNT, other.policy
    )
    identities = {**IDENTITIES, callers.CLIENT: other}
    parts = urlsplit(URL)
    result = verify(
        method="POST", raw_path=parts.path, raw_query=parts.query, headers=_signed(), body=BODY,
        region=REGION, api_id=API, stage="$default", identities=identities.values(),
    )  # fmt: skip
    assert _refusal(result)[0] == "AccessDeniedException"


def test_a_curl_style_signature_over_host_and_date_only_verifies():
    # curl --aws-sigv4 signs host, the headers given with -H, and x-amz-date: fewer than botocore.
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="GET", url="http://127.0.0.1:8000/operations/op-1", data=b"")
    request.headers["Host"] = "127.0.0.1:8000"
    SigV4Auth(CLIENT.credentials(), "execute-api", REGION).add_auth(request)
    sent = {**dict(request.headers.items()), "User-Agent": "curl/7.88.1", "Accept": "*/*"}
    assert "user-agent" not in sent["Authorization"]  # unsigned headers may be added on the way
    assert isinstance(
        _verify(sent, url="http://127.0.0.1:8000/operations/op-1", body=b"", method="GET"), Verified
    )


def test_the_canonical_query_sorts_and_encodes_each_name_and_value():
    assert canonical_query("to=2026-12-03T00:00:00Z&from=a%20b") == "from=a%20b&to=2026-12-03T00%3A00%3A00Z"
    # Repeated names, and values that are not UTF-8, keep their bytes (schemathesis sends both).
    assert canonical_query("limit=%F2%BA&limit=3&limit=") == "limit=&limit=%F2%BA&limit=3"


def test_a_signed_query_with_repeated_names_and_raw_bytes_verifies():
    url = "http://127.0.0.1:8000/agents/a/scores?limit=&limit=%F2%BA%8A%83I&limit=3"
    headers = _signed(url=url, body=b"", method="GET")
    assert isinstance(_verify(headers, url=url, body=b"", method="GET"), Verified)


def test_a_plus_in_the_query_is_a_space_and_a_literal_plus_is_percent_encoded():
    assert canonical_query("a=b+c") == canonical_query("a=b%20c") == "a=b%20c"
    assert canonical_query("a=b%2Bc") == "a=b%2Bc"


def test_a_query_requests_writes_its_own_way_is_signed_as_aws_reads_it():
    # requests writes a space as `+` and leaves `:` `,` `'` `!` bare; botocore signs the URL as written, AWS
    # encodes the query again before it checks. SigV4 (the auth every client uses) sends SigV4's form.
    import requests

    from ops.sigv4 import SigV4

    params = {"to": "2026-12-03T00:00:00+00:00", "q": "it's a, b!", "x": "é\x10"}
    prepared = requests.Request("GET", "http://127.0.0.1:8000/agents/a/scores", params=params).prepare()
    assert "+" in (prepared.url or "")
    SigV4(CLIENT.credentials(), REGION)(prepared)
    sent = prepared.url or ""
    assert "+" not in sent and "%2B00%3A00" in sent and "it%27s%20a%2C%20b%21" in sent
    received = {**prepared.headers, "Host": "127.0.0.1:8000"}  # urllib3 adds Host as it sends
    assert isinstance(_verify(received, url=sent, body=b"", method="GET"), Verified)
    # What botocore would have signed over requests' own URL does not verify (as on AWS).
    unnormalized = _signed(url="http://127.0.0.1:8000/agents/a/scores?q=a+b", body=b"", method="GET")
    refused = _verify(unnormalized, url="http://127.0.0.1:8000/agents/a/scores?q=a+b", body=b"", method="GET")
    assert _refusal(refused)[0] == "InvalidSignatureException"
