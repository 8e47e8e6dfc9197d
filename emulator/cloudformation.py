"""CloudFormation's ``DescribeStacks`` for the stacks the sandbox provisioned, inside the emulator process.

The AWS rule it restores: once ``cdk deploy`` has run, ``DescribeStacks`` answers each stack with its
status and its ``Outputs`` resolved (a stage's API URLs, table and queue names), and a client that finds
a stage from its outputs (``python -m ops smoke``) needs nothing else. The sandbox deploys ``cdk.out``
itself, through the service APIs (``emulator.provision``), not through moto's CloudFormation, so moto's
CloudFormation holds no stack and would answer "does not exist" for every one of them.

- The sandbox, once it has provisioned, PUTs what it deployed to ``/_relay/cloudformation/stacks``
  (``publish``): each stack's name, id, creation time, parameters and outputs, resolved by the same
  resolver that provisioned the resources (``emulator.templates.Resolver``), as CloudFormation resolves
  them. ``GET`` answers the list (``published``).
- A ``DescribeStacks`` request (the query protocol: ``Action=DescribeStacks`` in a form body or the
  query string), signed for ``cloudformation``, is answered here in AWS's XML when it names a published
  stack (by name or stack id) of the region it is signed for, or names none (then every published stack
  of that region: one page, no ``NextToken``). A name the sandbox did not publish goes to moto's own
  CloudFormation, which answers what AWS answers for a stack that does not exist: 400
  ``ValidationError`` "Stack with id X does not exist". A stack made through moto's CloudFormation API
  is found by its name, but a ``DescribeStacks`` without a name lists only the published stacks.
- Every other CloudFormation action is moto's.

This module knows nothing of Relay: any set of stacks can be published.
"""

from __future__ import annotations

import io
import json
import threading
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

CONTROL_PATH = "/_relay/cloudformation/stacks"
XMLNS = "http://cloudformation.amazonaws.com/doc/2010-05-15/"
# What `cdk deploy` passes: the templates create IAM roles (some named) and may use macros.
CDK_CAPABILITIES = ("CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND")


@dataclass(frozen=True)
class StackOutput:
    key: str
    value: str
    description: str | None = None
    export_name: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "OutputKey": self.key,
            "OutputValue": self.value,
            **({"Description": self.description} if self.description is not None else {}),
            **({"ExportName": self.export_name} if self.export_name is not None else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StackOutput:
        return cls(
            key=str(data["OutputKey"]),
            value=str(data["OutputValue"]),
            description=data.get("Description"),
            export_name=data.get("ExportName"),
        )


@dataclass(frozen=True)
class StackDescription:
    """One deployed stack as DescribeStacks describes it."""

    name: str
    stack_id: str  # arn:aws:cloudformation:<region>:<account>:stack/<name>/<id>
    created: str  # ISO 8601, UTC
    outputs: tuple[StackOutput, ...] = ()
    parameters: tuple[tuple[str, str], ...] = ()  # (ParameterKey, ParameterValue)
    description: str | None = None
    status: str = "CREATE_COMPLETE"
    termination_protection: bool = False
    capabilities: tuple[str, ...] = CDK_CAPABILITIES

    @property
    def region(self) -> str:
        return self.stack_id.split(":")[3]

    def to_json(self) -> dict[str, Any]:
        return {
            "StackName": self.name,
            "StackId": self.stack_id,
            "CreationTime": self.created,
            "StackStatus": self.status,
            "Description": self.description,
            "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in self.parameters],
            "Outputs": [o.to_json() for o in self.outputs],
            "EnableTerminationProtection": self.termination_protection,
            "Capabilities": list(self.capabilities),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StackDescription:
        return cls(
            name=str(data["StackName"]),
            stack_id=str(data["StackId"]),
            created=str(data["CreationTime"]),
            status=str(data.get("StackStatus", "CREATE_COMPLETE")),
            description=data.get("Description"),
            parameters=tuple(
                (str(p["ParameterKey"]), str(p["ParameterValue"])) for p in data.get("Parameters", [])
            ),
            outputs=tuple(StackOutput.from_json(o) for o in data.get("Outputs", [])),
            termination_protection=bool(data.get("EnableTerminationProtection", False)),
            capabilities=tuple(str(c) for c in data.get("Capabilities", CDK_CAPABILITIES)),
        )


# -- the sandbox's side: hand the stacks to the emulator ---------------------------------------------------


def publish(endpoint: str, stacks: Iterable[StackDescription], *, timeout: float = 30.0) -> int:
    """Make the emulator at ``endpoint`` answer DescribeStacks for ``stacks`` (replacing what it held);
    returns how many it holds."""
    body = json.dumps([s.to_json() for s in stacks]).encode()
    request = urllib.request.Request(
        endpoint.rstrip("/") + CONTROL_PATH,
        data=body,
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return int(json.loads(response.read())["stacks"])


def published(endpoint: str, *, timeout: float = 30.0) -> list[StackDescription]:
    with urllib.request.urlopen(endpoint.rstrip("/") + CONTROL_PATH, timeout=timeout) as response:
        return [StackDescription.from_json(s) for s in json.loads(response.read())]


# -- inside the emulator process -----------------------------------------------------------------------------


@dataclass
class _State:
    stacks: list[StackDescription] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


STATE = _State()


def _xml(text: object) -> str:
    return escape(str(text), {'"': "&quot;"})


def _member(tag: str, value: object) -> str:
    return f"<{tag}>{_xml(value)}</{tag}>"


def stack_xml(stack: StackDescription) -> str:
    """One ``<member>`` of ``DescribeStacksResult/Stacks``, in the order AWS writes the fields."""
    parts = [_member("StackName", stack.name), _member("StackId", stack.stack_id)]
    if stack.description is not None:
        parts.append(_member("Description", stack.description))
    if stack.parameters:
        parameters = "".join(
            f"<member>{_member('ParameterKey', k)}{_member('ParameterValue', v)}</member>"
            for k, v in stack.parameters
        )
        parts.append(f"<Parameters>{parameters}</Parameters>")
    parts += [
        _member("CreationTime", stack.created),
        _member("StackStatus", stack.status),
        _member("DisableRollback", "false"),
        "<NotificationARNs/>",
    ]
    if stack.capabilities:
        capabilities = "".join(_member("member", c) for c in stack.capabilities)
        parts.append(f"<Capabilities>{capabilities}</Capabilities>")
    if stack.outputs:
        outputs = []
        for output in stack.outputs:
            fields = [_member("OutputKey", output.key), _member("OutputValue", output.value)]
            if output.description is not None:
                fields.append(_member("Description", output.description))
            if output.export_name is not None:
                fields.append(_member("ExportName", output.export_name))
            outputs.append(f"<member>{''.join(fields)}</member>")
        parts.append(f"<Outputs>{''.join(outputs)}</Outputs>")
    parts += [
        "<Tags/>",
        _member("EnableTerminationProtection", str(stack.termination_protection).lower()),
        "<DriftInformation><StackDriftStatus>NOT_CHECKED</StackDriftStatus></DriftInformation>",
    ]
    return f"<member>{''.join(parts)}</member>"


def describe_stacks_xml(stacks: Iterable[StackDescription], request_id: str) -> str:
    members = "".join(stack_xml(s) for s in stacks)
    return (
        f'<DescribeStacksResponse xmlns="{XMLNS}"><DescribeStacksResult><Stacks>{members}</Stacks>'
        f"</DescribeStacksResult><ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
        "</DescribeStacksResponse>"
    )


def answer(
    stacks: Iterable[StackDescription], region: str, stack_name: str | None
) -> list[StackDescription] | None:
    """The stacks DescribeStacks answers with, or None when ``stack_name`` is not a published stack of
    ``region`` (moto then answers)."""
    in_region = [s for s in stacks if s.region == region]
    if not stack_name:
        return in_region
    found = [s for s in in_region if stack_name in (s.name, s.stack_id)]
    return found or None


def _body(environ: dict[str, Any]) -> bytes:
    """The request body, left readable for moto (the raw socket stream is replaced by a copy)."""
    stream = environ.get("wsgi.input")
    if isinstance(stream, io.BytesIO):
        return stream.getvalue()
    if stream is None:
        return b""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = stream.read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def _respond(start_response: Any, status: str, content_type: str, body: bytes, **headers: str) -> list[bytes]:
    start_response(
        status,
        [("Content-Type", content_type), ("Content-Length", str(len(body))), *headers.items()],
    )
    return [body]


def _control(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    method = environ.get("REQUEST_METHOD", "GET")
    if method == "PUT":
        try:
            document = json.loads(_body(environ) or b"[]")
            stacks = [StackDescription.from_json(s) for s in document]
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            payload = json.dumps({"message": f"{type(exc).__name__}: {exc}"}).encode()
            return _respond(start_response, "400 Bad Request", "application/json", payload)
        with STATE.lock:
            STATE.stacks = stacks
        return _respond(
            start_response, "200 OK", "application/json", json.dumps({"stacks": len(stacks)}).encode()
        )
    if method == "GET":
        with STATE.lock:
            payload = json.dumps([s.to_json() for s in STATE.stacks]).encode()
        return _respond(start_response, "200 OK", "application/json", payload)
    payload = json.dumps({"message": f"{CONTROL_PATH}: GET or PUT"}).encode()
    return _respond(start_response, "405 Method Not Allowed", "application/json", payload)


def _handle(original: Callable[..., Any]) -> Callable[..., Any]:
    from emulator.iam_enforcer import _credential

    def __call__(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO", "") == CONTROL_PATH:
            return _control(environ, start_response)
        credential = _credential(environ)
        if credential is None or credential[2] != "cloudformation":
            return original(self, environ, start_response)
        with STATE.lock:
            stacks = list(STATE.stacks)
        if not stacks:
            return original(self, environ, start_response)
        form = parse_qs(_body(environ).decode("utf-8", errors="replace"))
        query = parse_qs(str(environ.get("QUERY_STRING", "")))
        params = {k: v[0] for k, v in {**query, **form}.items() if v}
        if params.get("Action") != "DescribeStacks":
            return original(self, environ, start_response)
        found = answer(stacks, credential[1], params.get("StackName"))
        if found is None:
            return original(self, environ, start_response)
        request_id = str(uuid.uuid4())
        body = describe_stacks_xml(found, request_id).encode()
        return _respond(start_response, "200 OK", "text/xml", body, **{"x-amzn-RequestId": request_id})

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    return __call__


def install() -> Callable[[], None]:
    """Answer DescribeStacks for published stacks in this moto server process (a no-op until the sandbox
    publishes some); returns a function that removes it (tests run a moto server in their own process)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.__call__
    DomainDispatcherApplication.__call__ = _handle(original)  # type: ignore[method-assign]

    def remove() -> None:
        global STATE
        DomainDispatcherApplication.__call__ = original  # type: ignore[method-assign]
        STATE = _State()

    return remove
