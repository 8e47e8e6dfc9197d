"""The HTTP API: every route of every ``AWS::ApiGatewayV2::Route`` served on 127.0.0.1.

Requests become API Gateway v2 payload format 2.0 events and responses are mapped back the way API
Gateway does it (https://docs.aws.amazon.com/apigateway/latest/developerguide/
http-api-develop-integrations-lambda.html): a dict with ``statusCode`` is used as is (headers,
cookies, base64 bodies); any other return value becomes a 200 JSON body. A function error answers
500 ``{"message":"Internal Server Error"}``, a timeout 503, an unknown route 404
``{"message":"Not Found"}``. Route selection prefers the most specific match, then ``ANY``,
then ``$default``, as API Gateway does.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from local.provision import HttpApiSpec, RouteSpec
from local.runtime import Runtime

TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript")


@dataclass
class _Route:
    spec: RouteSpec
    method: str
    pattern: re.Pattern[str] | None
    literal_segments: int


def _compile(spec: RouteSpec) -> _Route:
    if spec.route_key == "$default":
        return _Route(spec, "ANY", None, -1)
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
    return _Route(spec, method.upper(), re.compile(f"^{regex or '/'}$"), literal)


class HttpApi:
    """One HTTP API on one port."""

    def __init__(self, spec: HttpApiSpec, runtime: Runtime, port: int) -> None:
        self.spec = spec
        self.runtime = runtime
        self.port = port
        self.routes = [_compile(r) for r in spec.routes]
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def match(self, method: str, path: str) -> tuple[RouteSpec, dict[str, str]] | None:
        candidates: list[tuple[int, int, RouteSpec, dict[str, str]]] = []
        for route in self.routes:
            if route.pattern is None:
                candidates.append((0, -1, route.spec, {}))
                continue
            found = route.pattern.match(path)
            if found and route.method in (method, "ANY"):
                exact_method = 2 if route.method == method else 1
                candidates.append((exact_method, route.literal_segments, route.spec, found.groupdict()))
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
    ) -> dict[str, Any]:
        content_type = headers.get("content-type", "")
        is_text = not body or content_type.startswith(TEXT_TYPES) or "charset" in content_type
        cookies = [c.strip() for c in headers.get("cookie", "").split(";") if c.strip()]
        query_params: dict[str, str] = {}
        for pair in query.split("&") if query else []:
            key, _, value = pair.partition("=")
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
                "apiId": self.spec.api_id,
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
            "isBase64Encoded": not is_text,
        }
        if cookies:
            event["cookies"] = cookies
        if query_params:
            event["queryStringParameters"] = query_params
        if params:
            event["pathParameters"] = params
        if body:
            event["body"] = body.decode("utf-8") if is_text else base64.b64encode(body).decode()
        return event

    def handle(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], list[str], bytes]:
        parts = urlsplit(target)
        matched = self.match(method, parts.path)
        if matched is None:
            return 404, {"content-type": "application/json"}, [], b'{"message":"Not Found"}'
        route, params = matched
        event = self.event(route, params, method, parts.path, parts.query, headers, body)
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

    def start(self) -> None:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    status, out_headers, cookies, data = api.handle(self.command, self.path, headers, body)
                except Exception as exc:  # the local glue failing must still answer, like API Gateway
                    status, out_headers, cookies = 500, {"content-type": "application/json"}, []
                    data = json.dumps({"message": f"Internal Server Error (sandbox: {exc})"}).encode()
                self.send_response(status)
                for name, value in out_headers.items():
                    if name not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(name, value)
                for cookie in cookies:
                    self.send_header("set-cookie", cookie)
                self.send_header("apigw-requestid", uuid.uuid4().hex[:16])
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name=f"http-{self.port}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
