"""The HTTP API: every route of every ``AWS::ApiGatewayV2::Route`` served on 127.0.0.1.

Requests become API Gateway v2 payload format 2.0 events and responses are mapped back the way API
Gateway does it (https://docs.aws.amazon.com/apigateway/latest/developerguide/
http-api-develop-integrations-lambda.html): a dict with ``statusCode`` is used as is (headers,
cookies, base64 bodies); any other return value becomes a 200 JSON body. A function error answers
500 ``{"message":"Internal Server Error"}``, a timeout 503, an unknown route 404
``{"message":"Not Found"}``, whatever the method (``FOO /payments`` too: API Gateway has no 501 or
405). Route selection prefers the most specific match, then ``ANY``, then ``$default``, as API
Gateway does. Path parameters reach the function URL-decoded, as API Gateway documents
(https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-routes.html).

Request bodies (payload 2.0): a body whose media type is ``text/*``, ``application/json``,
``application/xml`` or ``application/javascript`` is delivered as text; any other, or none, is
delivered base64-encoded with ``isBase64Encoded`` true (the split verified against AWS and recorded in
https://github.com/ministackorg/ministack/pull/766; the AWS docs do not enumerate it). AWS does not
document what a text-typed body that is not UTF-8 becomes; the sandbox delivers its bytes
base64-encoded rather than altering them, so the function sees what the client sent. A body over API
Gateway's 10 MB payload quota answers 413 without invoking anything, and one whose event exceeds
Lambda's 6 MB synchronous invocation payload answers 413 ``{"message":"Request Too Long"}``, the
answers API Gateway was observed to give.

Every HTTP API of every stack is served on ONE port (``--api-port``): the payments and scores APIs
have disjoint routes, and one base URL is what a newcomer can remember. A route key that two APIs
both declare is served by the first API and reported as a clash at start (``clashes``).

Lambda authorizers (REQUEST, payload 2.0) run for real before the integration, as API Gateway
documents (https://docs.aws.amazon.com/apigateway/latest/developerguide/
http-api-lambda-authorizer.html): a request missing any identity source answers 401
``{"message":"Unauthorized"}`` without invoking the authorizer; ``isAuthorized: false`` (simple
responses) or a Deny policy answers 403 ``{"message":"Forbidden"}``; an authorizer error, timeout
or malformed answer 500 ``{"message":"Internal Server Error"}``. Results are cached per identity
source values for the authorizer's ``AuthorizerResultTtlInSeconds``, like API Gateway.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from emulator.callers import Identity
from emulator.provision import AuthorizerSpec, HttpApiSpec, RouteSpec
from emulator.runtime import Runtime
from emulator.server import REGION
from emulator.sigv4_verify import Refusal, Verified, verify

TEXT_MEDIA_TYPES = frozenset({"application/json", "application/xml", "application/javascript"})
# API Gateway's payload quota for HTTP APIs, and Lambda's for a synchronous invocation's event.
MAX_REQUEST_BYTES = 10 * 1024 * 1024
MAX_INVOKE_PAYLOAD_BYTES = 6 * 1024 * 1024
STAGE = "$default"  # the stage every Relay HTTP API deploys (infra/constructs/http_api.py)


def is_text_body(content_type: str) -> bool:
    """Whether API Gateway (HTTP API, payload 2.0) delivers a body of this Content-Type as text."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type.startswith("text/") or media_type in TEXT_MEDIA_TYPES


_JSON = {"content-type": "application/json"}
Answer = tuple[int, dict[str, str], list[str], bytes]
_TOO_LARGE = f"HTTP content length exceeded {MAX_REQUEST_BYTES} bytes.".encode()
_MAX_DRAINED = 64 * 1024 * 1024


@dataclass
class _Route:
    spec: RouteSpec
    method: str
    pattern: re.Pattern[str] | None
    literal_segments: int
    api: HttpApiSpec | None = None


def _compile(spec: RouteSpec, api: HttpApiSpec | None = None) -> _Route:
    if spec.route_key == "$default":
        return _Route(spec, "ANY", None, -1, api)
    method, _, path = spec.route_key.partition(" ")
    regex = ""
    literal = 0
    for segment in path.strip("/").split("/"):
        if segment.startswith("{") and segment.endswith("+}"):
            regex += f"/(?P<{segment[1:-2]}>.+)"
        elif segment.startswith("{") and segment.endswith("}"):
            regex += f"/(?P<{segment[1:-1]}>[^/]+)"
        elif segment:
            regex += "/" + re.escape(segment)
            literal += 1
    return _Route(spec, method.upper(), re.compile(f"^{regex or '/'}$"), literal, api)


def _identity_value(source: str, headers: dict[str, str], query: dict[str, str]) -> str | None:
    """The value of one identity source expression, or None when the request lacks it."""
    if source.startswith("$request.header."):
        value = headers.get(source.removeprefix("$request.header.").lower())
    elif source.startswith("$request.querystring."):
        value = query.get(source.removeprefix("$request.querystring."))
    else:
        # $context.* and $stageVariables.* are always present in API Gateway.
        return source
    return value if value else None


class HttpApi:
    """Every given HTTP API on one port (the first API wins a route key two APIs both declare)."""

    def __init__(
        self,
        specs: HttpApiSpec | list[HttpApiSpec],
        runtime: Runtime,
        port: int,
        *,
        callers: Iterable[Identity] = (),
    ) -> None:
        self.specs = specs if isinstance(specs, list) else [specs]
        # Who may sign for the AWS_IAM routes (emulator.callers); with none, every such request is refused.
        self.callers = list(callers)
        self.spec = self.specs[0] if self.specs else HttpApiSpec(name="none", api_id="none")
        self.runtime = runtime
        self.port = port
        self.routes: list[_Route] = []
        self.clashes: list[str] = []
        seen: dict[str, str] = {}
        for api in self.specs:
            for route in api.routes:
                if route.route_key in seen:
                    self.clashes.append(
                        f"{route.route_key} of {api.name} is not served: {seen[route.route_key]} has it"
                    )
                    continue
                seen[route.route_key] = api.name
                self.routes.append(_compile(route, api))
        self._auth_cache: dict[tuple[str, tuple[str, ...]], tuple[float, Answer | None, Any]] = {}
        self._auth_lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def match(self, method: str, path: str) -> tuple[RouteSpec, dict[str, str]] | None:
        found = self._match(method, path)
        return (found[0].spec, found[1]) if found else None

    def _match(self, method: str, path: str) -> tuple[_Route, dict[str, str]] | None:
        candidates: list[tuple[int, int, _Route, dict[str, str]]] = []
        for route in self.routes:
            if route.pattern is None:
                candidates.append((0, -1, route, {}))
                continue
            found = route.pattern.match(path)
            if found and route.method in (method, "ANY"):
                exact_method = 2 if route.method == method else 1
                candidates.append((exact_method, route.literal_segments, route, found.groupdict()))
        if not candidates:
            return None
        # A literal segment beats a variable, an exact method beats ANY; $default comes last.
        candidates.sort(key=lambda c: (c[1], c[0]), reverse=True)
        return candidates[0][2], candidates[0][3]

    def event(
        self,
        route: RouteSpec,
        params: dict[str, str],
        method: str,
        raw_path: str,
        query: str,
        headers: dict[str, str],
        body: bytes,
        api: HttpApiSpec | None = None,
    ) -> dict[str, Any]:
        api = api or self.spec
        text: str | None = None
        if body and is_text_body(headers.get("content-type", "")):
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                text = None  # delivered base64-encoded: the bytes as sent (see the module docstring)
        cookies = [c.strip() for c in headers.get("cookie", "").split(";") if c.strip()]
        query_params: dict[str, str] = {}
        for pair in query.split("&") if query else []:
            raw_key, _, raw_value = pair.partition("=")
            # API Gateway decodes the parameters (rawQueryString keeps them as sent).
            key, value = unquote(raw_key), unquote(raw_value)
            # Payload 2.0 joins repeated parameters with commas.
            query_params[key] = f"{query_params[key]},{value}" if key in query_params else value
        now = time.time()
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": route.route_key,
            "rawPath": raw_path,
            "rawQueryString": query,
            "headers": headers,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": api.api_id,
                "domainName": f"127.0.0.1:{self.port}",
                "domainPrefix": "127",
                "http": {
                    "method": method,
                    "path": raw_path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "127.0.0.1",
                    "userAgent": headers.get("user-agent", ""),
                },
                "requestId": uuid.uuid4().hex[:16],
                "routeKey": route.route_key,
                "stage": "$default",
                "time": datetime.now(UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "timeEpoch": int(now * 1000),
            },
            "isBase64Encoded": bool(body) and text is None,
        }
        if cookies:
            event["cookies"] = cookies
        if query_params:
            event["queryStringParameters"] = query_params
        if params:
            # API Gateway decodes URL-encoded request parameters before passing them on.
            event["pathParameters"] = {name: unquote(value) for name, value in params.items()}
        if body:
            event["body"] = text if text is not None else base64.b64encode(body).decode()
        return event

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(target)
        matched = self._match(method, parts.path)
        if matched is None:
            return 404, dict(_JSON), [], b'{"message":"Not Found"}'
        compiled, params = matched
        route = compiled.spec
        identity: Verified | None = None
        if route.authorization == "AWS_IAM":
            verdict = verify(
                method=method,
                raw_path=parts.path,
                raw_query=parts.query,
                headers=headers,
                body=body,
                region=REGION,
                api_id=(compiled.api or self.spec).api_id,
                stage=STAGE,
                identities=self.callers,
            )
            if isinstance(verdict, Refusal):
                status, refusal_headers, refusal_body = verdict.answer()
                return status, refusal_headers, [], refusal_body
            identity = verdict
        event = self.event(route, params, method, parts.path, parts.query, headers, body, compiled.api)
        if identity is not None:
            # Payload 2.0 carries the signer, as API Gateway fills requestContext.authorizer.iam.
            event["requestContext"]["authorizer"] = {
                "iam": {
                    "accessKey": identity.identity.access_key_id,
                    "accountId": identity.identity.account,
                    "userArn": identity.identity.arn,
                    "userId": identity.identity.access_key_id,
                    "callerId": identity.identity.access_key_id,
                    "principalOrgId": None,
                    "cognitoIdentity": None,
                }
            }
        if route.authorizer is not None:
            denied, context = self.authorize(route.authorizer, event, compiled.api or self.spec)
            if denied is not None:
                return denied
            event["requestContext"]["authorizer"] = {"lambda": context or {}}
        if len(json.dumps(event).encode()) > MAX_INVOKE_PAYLOAD_BYTES:
            return 413, dict(_JSON), [], b'{"message":"Request Too Long"}'
        result = self.runtime.invoke(route.function, event)
        if not result.ok:
            # API Gateway answers 500/503 without detail; the sandbox says why on its own output.
            print(
                f"HTTP {method} {parts.path}: {route.function} failed ({result.error_type}: "
                f"{result.error_message[:300]})",
                file=sys.stderr,
                flush=True,
            )
            if result.timed_out:
                return 503, {"content-type": "application/json"}, [], b'{"message":"Service Unavailable"}'
            return 500, {"content-type": "application/json"}, [], b'{"message":"Internal Server Error"}'
        payload = result.payload
        if not (isinstance(payload, dict) and "statusCode" in payload):
            # Payload 2.0: a response without statusCode is the body of a 200 JSON answer.
            return 200, {"content-type": "application/json"}, [], json.dumps(payload).encode()
        out_headers = {str(k).lower(): str(v) for k, v in (payload.get("headers") or {}).items()}
        for name, values in (payload.get("multiValueHeaders") or {}).items():
            out_headers[str(name).lower()] = ",".join(str(v) for v in values)
        raw = payload.get("body")
        if raw is None:
            data = b""
        elif payload.get("isBase64Encoded"):
            data = base64.b64decode(str(raw))
        else:
            data = (raw if isinstance(raw, str) else json.dumps(raw)).encode()
        return int(payload["statusCode"]), out_headers, [str(c) for c in payload.get("cookies") or []], data

    def authorize(
        self, authorizer: AuthorizerSpec, event: dict[str, Any], api: HttpApiSpec
    ) -> tuple[Answer | None, Any]:
        """(None, context) when the request may pass; (the 401/403/500 answer, None) otherwise."""
        query = event.get("queryStringParameters") or {}
        values = [_identity_value(s, event["headers"], query) for s in authorizer.identity_source]
        if any(v is None for v in values):
            return (401, dict(_JSON), [], b'{"message":"Unauthorized"}'), None
        identity = [str(v) for v in values]
        cache_key = (authorizer.authorizer_id, tuple(identity))
        now = time.monotonic()
        if authorizer.ttl_seconds > 0:
            with self._auth_lock:
                cached = self._auth_cache.get(cache_key)
            if cached is not None and cached[0] > now:
                return cached[1], cached[2]
        route_key = event["routeKey"]
        method, _, path = route_key.partition(" ")
        auth_event = {
            **{k: v for k, v in event.items() if k not in ("body", "isBase64Encoded")},
            "type": "REQUEST",
            "routeArn": f"arn:aws:execute-api:us-east-1:123456789012:{api.api_id}/$default/{method}{path}",
            "identitySource": identity,
        }
        result = self.runtime.invoke(authorizer.function, auth_event)
        if not result.ok:
            print(
                f"HTTP authorizer {authorizer.name} ({authorizer.function}) failed "
                f"({result.error_type}: {result.error_message[:300]})",
                file=sys.stderr,
                flush=True,
            )
            # An error is not cached: API Gateway calls the authorizer again on the next request.
            return (500, dict(_JSON), [], b'{"message":"Internal Server Error"}'), None
        allowed, context = _authorizer_verdict(result.payload, authorizer.simple_responses)
        answer: Answer | None
        if allowed is None:
            print(
                f"HTTP authorizer {authorizer.name}: malformed response {str(result.payload)[:200]}",
                file=sys.stderr,
                flush=True,
            )
            return (500, dict(_JSON), [], b'{"message":"Internal Server Error"}'), None
        answer = None if allowed else (403, dict(_JSON), [], b'{"message":"Forbidden"}')
        if authorizer.ttl_seconds > 0:
            with self._auth_lock:
                self._auth_cache[cache_key] = (now + authorizer.ttl_seconds, answer, context)
        return answer, context

    def start(self) -> None:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def __getattr__(self, name: str) -> Any:
                # http.server answers 501 for a method without a do_<METHOD>; API Gateway routes every
                # method, and answers 404 for one no route has.
                if name.startswith("do_"):
                    return self._serve
                raise AttributeError(name)

            def _read_body(self) -> bytes | Answer:
                """The request body, or the answer for one that cannot be read (``close_connection`` is
                set when the rest of the request was left unread)."""
                bad_request: Answer = (400, dict(_JSON), [], b'{"message":"Bad Request"}')
                too_large: Answer = (413, {"content-type": "text; charset=utf-8"}, [], _TOO_LARGE)
                if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
                    chunks: list[bytes] = []
                    size = 0
                    while True:
                        line = self.rfile.readline(1024).split(b";", 1)[0].strip()
                        try:
                            chunk_size = int(line, 16)
                        except ValueError:
                            self.close_connection = True
                            return bad_request
                        size += chunk_size
                        if size > MAX_REQUEST_BYTES:
                            self.close_connection = True
                            return too_large
                        if chunk_size == 0:
                            while self.rfile.readline(1024).strip():
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(chunk_size))
                        self.rfile.readline(1024)
                raw = (self.headers.get("content-length") or "0").strip()
                if not raw.isdigit():
                    self.close_connection = True
                    return bad_request
                length = int(raw)
                if length > MAX_REQUEST_BYTES:
                    # Read and dropped, so that a client still sending gets the answer; beyond 64 MiB
                    # the connection is closed instead.
                    left = min(length, _MAX_DRAINED)
                    while left > 0 and (chunk := self.rfile.read(min(left, 1024 * 1024))):
                        left -= len(chunk)
                    self.close_connection = length > _MAX_DRAINED or left > 0
                    return too_large
                return self.rfile.read(length) if length else b""

            def _serve(self) -> None:
                body = self._read_body()
                if not isinstance(body, bytes):
                    self._answer(*body)
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    answer = api.handle(self.command, self.path, headers, body)
                except Exception as exc:  # the local glue failing must still answer, like API Gateway
                    data = json.dumps({"message": f"Internal Server Error (sandbox: {exc})"}).encode()
                    answer = 500, {"content-type": "application/json"}, [], data
                self._answer(*answer)

            def _answer(
                self, status: int, out_headers: dict[str, str], cookies: list[str], data: bytes
            ) -> None:
                self.send_response(status)
                for name, value in out_headers.items():
                    if name not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(name, value)
                for cookie in cookies:
                    self.send_header("set-cookie", cookie)
                self.send_header("apigw-requestid", uuid.uuid4().hex[:16])
                self.send_header("content-length", str(len(data)))
                if self.close_connection:
                    self.send_header("connection", "close")
                self.end_headers()
                if self.command != "HEAD":  # a HEAD answer has the headers of its body, never the body
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        # Port 0: the system's choice, taken as it binds (a port picked first and bound later, after the
        # stage provisioned, could be taken by then by another stage on the machine).
        self.port = int(server.server_address[1])
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name=f"http-{self.port}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _authorizer_verdict(payload: Any, simple: bool) -> tuple[bool | None, Any]:
    """(allowed, context) from an authorizer's answer; (None, None) when it is malformed."""
    if not isinstance(payload, dict):
        return None, None
    if simple:
        allowed = payload.get("isAuthorized")
        if not isinstance(allowed, bool):
            return None, None
        return allowed, payload.get("context")
    # IAM policy response: allowed when some statement allows execute-api:Invoke and none denies.
    try:
        statements = payload["policyDocument"]["Statement"]
    except (KeyError, TypeError):
        return None, None
    effects = {str(s.get("Effect", "")) for s in statements if isinstance(s, dict)}
    return ("Allow" in effects and "Deny" not in effects), payload.get("context")
