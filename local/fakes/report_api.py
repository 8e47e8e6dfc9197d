"""Fake of the public report API: serves the bytes of published reports, with read-back faults.

The verifier reads every generated report back from here and compares its sha256 with the one the
producer announced. The knobs produce what a real publication pipeline does to a reader:

* ``invisible_reads=N``: a published report answers 404 for its first N reads (publication or CDN
  lag); ``publish(..., invisible_reads=N)`` sets it for one report;
* ``tamper_ids``: these reports are served with different bytes (a corrupted or substituted upload).

HTTP API (business calls pass through the common fault knobs of ``FaultKnobs`` first):
    GET  /reports/{reportId}        200 the report's bytes (application/octet-stream); 404 unknown/invisible
    POST /_admin/reports            {reportId, content | contentBase64, invisibleReads?}
                                    -> 201 {reportId, sha256, size}
    GET  /_admin/reports            {reportId: {sha256, size, reads}}
    GET  /_admin/calls | /_admin/knobs, POST /_admin/knobs | /_admin/reset
"""

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

from local.fakes._server import (
    FakeService,
    FaultKnobs,
    JsonObject,
    KnobError,
    Request,
    Response,
    _Handler,
    error_response,
    json_response,
)

TAMPER_SUFFIX = b"\n<!-- tampered by the report API fake -->\n"


@dataclass(frozen=True)
class ReportApiKnobs(FaultKnobs):
    invisible_reads: int = 0
    """Every published report answers 404 for its first N reads (unless published with its own N)."""
    tamper_ids: frozenset[str] = frozenset()
    """Reports served with different bytes than were published."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.invisible_reads < 0:
            raise KnobError("knob invisible_reads must be 0 (visible at once) or more")


@dataclass(frozen=True)
class RawResponse(Response):
    """A response whose body is sent as-is (the fakes' base Response is always JSON)."""

    raw: bytes = b""
    content_type: str = "application/octet-stream"


@dataclass
class _Report:
    content: bytes
    sha256: str
    invisible_reads: int | None
    reads: int = 0


def sha256_hex(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


class ReportApiFake(FakeService[ReportApiKnobs]):
    """``with ReportApiFake(ReportApiKnobs(invisible_reads=2)) as api: sha = api.publish("r-1", b"...")``"""

    name: ClassVar[str] = "report-api"
    knobs_type: ClassVar[type[FaultKnobs]] = ReportApiKnobs

    def __init__(
        self,
        knobs: ReportApiKnobs | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        quiet: bool = True,
    ) -> None:
        super().__init__(knobs, host=host, port=port, quiet=quiet)
        self._reports: dict[str, _Report] = {}

    def start(self) -> str:
        base_url = super().start()
        # Serve raw bytes: swapped before anyone knows the port, so no request sees the JSON handler.
        assert self._server is not None
        self._server.RequestHandlerClass = _RawHandler
        return base_url

    # publishing and inspection ----------------------------------------------------------------

    def publish(self, report_id: str, content: bytes, *, invisible_reads: int | None = None) -> str:
        """Make ``content`` available at ``/reports/{report_id}``; returns its sha256 (hex)."""
        if not report_id or "/" in report_id:
            raise ValueError(f"report id {report_id!r} must be non-empty and contain no '/'")
        if invisible_reads is not None and invisible_reads < 0:
            raise ValueError("invisible_reads must be 0 or more")
        digest = sha256_hex(content)
        with self.lock:
            self._reports[report_id] = _Report(bytes(content), digest, invisible_reads)
        return digest

    def reads(self) -> dict[str, int]:
        """GETs of each published report so far (invisible ones included)."""
        with self.lock:
            return {report_id: report.reads for report_id, report in self._reports.items()}

    def admin_views(self) -> dict[str, JsonObject]:
        return {
            "reports": {
                report_id: {"sha256": report.sha256, "size": len(report.content), "reads": report.reads}
                for report_id, report in self._reports.items()
            }
        }

    def reset_state(self) -> None:
        self._reports.clear()

    def call_key(self, request: Request) -> str | None:
        segments = request.segments
        if len(segments) == 2 and segments[0] == "reports":
            return segments[1]
        return None

    # routes -----------------------------------------------------------------------------------

    def dispatch(self, request: Request) -> Response:
        if request.method == "POST" and request.path.rstrip("/") == "/_admin/reports":
            return self._admin_publish(request)
        return super().dispatch(request)

    def handle(self, request: Request) -> Response:
        segments = request.segments
        if request.method == "GET" and len(segments) == 2 and segments[0] == "reports":
            return self._read(segments[1])
        return error_response(404, "NotFound", f"no route {request.method} {request.path}")

    def _read(self, report_id: str) -> Response:
        with self.lock:
            knobs = self._knobs
            report = self._reports.get(report_id)
            if report is None:
                return error_response(404, "ReportNotFound", f"no report {report_id}")
            report.reads += 1
            invisible = knobs.invisible_reads if report.invisible_reads is None else report.invisible_reads
            if report.reads <= invisible:
                return error_response(404, "ReportNotFound", f"no report {report_id} (not visible yet)")
            content = report.content + TAMPER_SUFFIX if report_id in knobs.tamper_ids else report.content
        return RawResponse(status=200, raw=content)

    def _admin_publish(self, request: Request) -> Response:
        try:
            body = request.json()
        except ValueError:
            return error_response(400, "InvalidJson", "POST /_admin/reports takes a JSON object")
        if not isinstance(body, dict) or not isinstance(body.get("reportId"), str):
            return error_response(400, "ValidationError", "reportId (string) is required")
        content = _content_of(body)
        if content is None:
            return error_response(400, "ValidationError", "content (text) or contentBase64 is required")
        invisible = body.get("invisibleReads")
        if invisible is not None and (not isinstance(invisible, int) or invisible < 0):
            return error_response(400, "ValidationError", "invisibleReads must be an integer >= 0")
        try:
            digest = self.publish(body["reportId"], content, invisible_reads=invisible)
        except ValueError as exc:
            return error_response(400, "ValidationError", str(exc))
        return json_response(201, {"reportId": body["reportId"], "sha256": digest, "size": len(content)})


def _content_of(body: dict[str, Any]) -> bytes | None:
    if isinstance(body.get("content"), str):
        return str(body["content"]).encode("utf-8")
    if isinstance(body.get("contentBase64"), str):
        try:
            return base64.b64decode(body["contentBase64"], validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


class _RawHandler(_Handler):
    """The fakes' request handler, but a RawResponse is written as bytes with its own content type."""

    def _serve(self) -> None:
        from urllib.parse import parse_qs, urlsplit

        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        request = Request(
            method=self.command,
            path=url.path,
            query=parse_qs(url.query),
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        response = self.server.service.dispatch(request)
        if response.drop:
            self.close_connection = True
            return
        if isinstance(response, RawResponse):
            payload, content_type = response.raw, response.content_type
        else:
            import json

            payload = b"" if response.body is None else json.dumps(response.body).encode("utf-8")
            content_type = "application/json"
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            self.close_connection = True
