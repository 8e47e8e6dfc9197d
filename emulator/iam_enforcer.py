"""IAM enforcement inside the emulator process: every request signed with a function's credentials is
authorized against that function's synthesized role and the resource's policy before moto sees it.

- The sandbox gives each function its own access key (``emulator.runtime``) and, after provisioning,
  PUTs the IAM model (``emulator.provision.IamModel``) to ``/_relay/iam/model``. Requests signed with any
  other key (the sandbox's own glue, tests, the operator's CLI) are not restricted, like an
  administrator's in a sandbox account.
- A denied request gets the answer AWS gives, in the service's protocol, so botocore raises the same
  ``ClientError`` code: ``AccessDeniedException`` (DynamoDB, Streams, Secrets Manager, KMS, EventBridge),
  ``AccessDenied`` (SQS, through the query-compatibility header; S3; STS), ``AuthorizationError`` (SNS).
  A HEAD is answered 403 without a body, as S3 does. A GetObject/HeadObject of a key that does not exist
  is 403, not 404, when the caller may not ``s3:ListBucket`` the bucket, as S3 does.
- SNS's delivery to an SQS subscription is authorized against the queue's policy, as the principal
  ``sns.amazonaws.com`` with ``aws:SourceArn`` = the topic: without the policy, AWS's SNS cannot deliver.
  A refused delivery goes to the subscription's DLQ when it has one (as SNS does for a client-side
  error), else it is dropped, and is recorded as a denial either way.
- Every denial is logged (function, action, resource) and kept; ``GET /_relay/iam/report`` returns, per
  function, the grants it used and never used and the calls denied (``python -m local iam-report``).

The condition context: ``aws:SecureTransport`` is true for functions' calls, because Lambda's SDK calls
AWS over TLS and the loopback HTTP here stands in for that; ``aws:PrincipalArn``, ``aws:PrincipalAccount``,
``aws:PrincipalType``, ``aws:RequestedRegion``; and, for SNS's deliveries, ``aws:SourceArn`` and
``aws:SourceAccount``.
"""

from __future__ import annotations

import io
import json
import re
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from emulator.iam import Caller, Decision, Principal, Statement, decide, grants, matches, parse_policy
from emulator.iam_requests import UNAUTHORIZED_ACTIONS, Check, Request, Unmodelled, checks_for
from emulator.tallies import delivered, rule_outcomes

CONTROL_PREFIX = "/_relay/iam/"
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")
_JSON_DENIAL_TYPES = {
    "dynamodb": "com.amazon.coral.service#AccessDeniedException",
    "secretsmanager": "AccessDeniedException",
    "kms": "AccessDeniedException",
    "events": "AccessDeniedException",
}


@dataclass
class _Function:
    principal: Principal
    used: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (policy, action, resource)
    # "operation action resource" allowed: the API operation that asked (a TransactWriteItems' Put is
    # authorized as dynamodb:PutItem; this tells it from a PutItem request)
    operation_calls: Counter[str] = field(default_factory=Counter)
    # (action, resource) -> the grants it uses: the same few calls repeat thousands of times a run.
    grant_keys: dict[tuple[str, str], list[tuple[str, str, str]]] = field(default_factory=dict)


@dataclass
class _State:
    account: str = ""
    region: str = ""
    functions: dict[str, _Function] = field(default_factory=dict)  # access key -> function
    resource_policies: dict[str, list[Statement]] = field(default_factory=dict)  # ARN -> statements
    enforced_queues: frozenset[str] = frozenset()  # queue ARNs whose policy SNS deliveries must pass
    # role ARN -> (its policies, the services its trust policy lets assume it): SNS's Firehose
    # subscription role, a Firehose stream's role
    service_roles: dict[str, tuple[Principal, frozenset[str]]] = field(default_factory=dict)
    denials: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def loaded(self) -> bool:
        return bool(self.functions)


STATE = _State()


def load_model(model: dict[str, Any]) -> _State:
    """Build the enforcement state from ``IamModel.to_json()`` (raises ``PolicyError`` on a policy the
    sandbox cannot evaluate faithfully)."""
    state = _State(account=str(model["account"]), region=str(model["region"]))
    for entry in model["functions"]:
        role_name = entry["role"].rsplit("/", 1)[-1]
        caller = Caller(
            name=entry["function"],
            arn=f"arn:aws:sts::{state.account}:assumed-role/{role_name}/{entry['function']}",
            account=state.account,
            role_arn=entry["role"],
        )
        statements = [
            s for policy in entry["policies"] for s in parse_policy(policy["document"], policy["name"])
        ]
        state.functions[entry["accessKeyId"]] = _Function(Principal(caller, statements))
    for arn, policies in model["resourcePolicies"].items():
        state.resource_policies[arn] = [
            s for p in policies for s in parse_policy(p["document"], p["name"], resource_policy=True)
        ]
    state.enforced_queues = frozenset(model.get("queues", []))
    for entry in model.get("serviceRoles", []):
        role_name = entry["role"].rsplit("/", 1)[-1]
        caller = Caller(
            name=role_name,
            arn=f"arn:aws:sts::{state.account}:assumed-role/{role_name}/service",
            account=state.account,
            role_arn=entry["role"],
        )
        statements = [s for p in entry["policies"] for s in parse_policy(p["document"], p["name"])]
        state.service_roles[entry["role"]] = (Principal(caller, statements), frozenset(entry["services"]))
    return state


def _resource_policy(state: _State, resource: str) -> list[Statement] | None:
    policy = state.resource_policies.get(resource)
    if policy is None and resource.startswith("arn:aws:s3:::") and "/" in resource:
        policy = state.resource_policies.get(resource.split("/", 1)[0])
    return policy


def _context(caller: Caller, region: str, extra: dict[str, str] | None = None) -> dict[str, list[str]]:
    context = {
        "aws:securetransport": ["true"],
        "aws:requestedregion": [region],
        "aws:principalaccount": [caller.account],
        "aws:currenttime": [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())],
        "aws:epochtime": [str(int(time.time()))],
    }
    if caller.role_arn:
        context["aws:principalarn"] = [caller.role_arn]
        context["aws:principaltype"] = ["AssumedRole"]
    for key, value in (extra or {}).items():
        context[key.lower()] = [value]
    return context


def _record_denial(state: _State, function: str, check: Check, decision: Decision, message: str) -> None:
    entry = {
        "at": time.time(),
        "function": function,
        "action": check.action,
        "resource": check.resource,
        "operation": check.operation,
        "reason": decision.reason,
        "message": message,
    }
    with state.lock:
        state.denials.append(entry)
    print(f"IAM denied: {function}: {check.action} on {check.resource} ({decision.reason})", file=sys.stderr)


def _calls(operation_calls: Counter[str]) -> Counter[str]:
    """ "action resource" allowed, whichever operation asked."""
    calls: Counter[str] = Counter()
    for key, n in operation_calls.items():
        calls[key.split(" ", 1)[1]] += n
    return calls


def _record_use(fn: _Function, check: Check, decision: Decision) -> None:
    keys = fn.grant_keys.get((check.action, check.resource))
    if keys is None:
        keys = [
            (statement.source, action, resource)
            for statement in decision.by
            for action, resource in grants(statement)
            if matches(action, check.action, ignore_case=True) and matches(resource, check.resource)
        ]
        fn.grant_keys[(check.action, check.resource)] = keys
    for key in keys:
        fn.used[key] += 1
    fn.operation_calls[f"{check.operation} {check.action} {check.resource}"] += 1


def authorize(state: _State, fn: _Function, checks: Iterable[Check]) -> tuple[Check, Decision] | None:
    """The first denied check of a request, or None when every one is allowed."""
    caller = fn.principal.caller
    context = _context(caller, state.region)
    allowed: list[tuple[Check, Decision]] = []
    for check in checks:
        if check.action in UNAUTHORIZED_ACTIONS:
            continue
        decision = decide(
            fn.principal,
            caller,
            check.action,
            check.resource,
            context,
            _resource_policy(state, check.resource),
        )
        if not decision.allowed:
            return check, decision
        allowed.append((check, decision))
    with state.lock:
        for check, decision in allowed:
            _record_use(fn, check, decision)
    return None


def denial_message(caller: Caller, check: Check, decision: Decision) -> str:
    resource = f'"{check.resource}"' if check.action.startswith("s3:") else check.resource
    action = check.action
    if action.startswith("sns:"):
        action = "SNS:" + action[4:]
    return (
        f"User: {caller.arn} is not authorized to perform: {action} on resource: {resource} {decision.reason}"
    )


def denied_response(service: str, method: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """The answer AWS gives a denied request, in ``service``'s protocol."""
    request_id = str(uuid.uuid4())
    if service in _JSON_DENIAL_TYPES or service == "sqs":
        headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": request_id}
        if service == "sqs":
            # SQS speaks JSON, and botocore takes the code from the query-compatibility header.
            headers["x-amzn-query-error"] = "AccessDenied;Sender"
            sqs_body = {"__type": "com.amazon.coral.service#AccessDeniedException", "message": message}
            return 403, headers, json.dumps(sqs_body).encode()
        key = "Message" if service == "dynamodb" else "message"
        return 400, headers, json.dumps({"__type": _JSON_DENIAL_TYPES[service], key: message}).encode()
    if service == "xray":  # REST-JSON: the error type in a header
        headers = {
            "Content-Type": "application/json",
            "x-amzn-ErrorType": "AccessDeniedException",
            "x-amzn-RequestId": request_id,
        }
        return 403, headers, json.dumps({"Message": message}).encode()
    escaped = message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    if service == "s3":
        headers = {"Content-Type": "application/xml", "x-amz-request-id": request_id}
        if method == "HEAD":
            return 403, headers, b""
        s3_body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>{escaped}'
            f"</Message><RequestId>{request_id}</RequestId><HostId>{request_id}</HostId></Error>"
        )
        return 403, headers, s3_body.encode()
    code = "AuthorizationError" if service == "sns" else "AccessDenied"
    query_body = (
        f'<ErrorResponse xmlns="https://{service}.amazonaws.com/doc/"><Error><Type>Sender</Type>'
        f"<Code>{code}</Code><Message>{escaped}</Message></Error><RequestId>{request_id}</RequestId>"
        "</ErrorResponse>"
    )
    return 403, {"Content-Type": "text/xml", "x-amzn-RequestId": request_id}, query_body.encode()


def _secret_arn(account: str, region: str) -> Callable[[str], str | None]:
    def resolve(secret_id: str) -> str | None:
        if secret_id.startswith("arn:"):
            return secret_id
        try:
            from moto.secretsmanager.models import secretsmanager_backends

            return str(secretsmanager_backends[account][region].describe_secret(secret_id).arn)
        except Exception:  # an unknown secret: moto answers ResourceNotFound after the check
            return None

    return resolve


def _dead_letter_sources(dlq_arn: str) -> list[str]:
    """The ARNs of the queues whose redrive policy targets ``dlq_arn`` (a redrive without a
    DestinationArn sends to them)."""
    try:
        from moto.sqs.models import sqs_backends

        _, _, _, region, account, name = dlq_arn.split(":")
        backend = sqs_backends[account][region]
        return [str(queue.queue_arn) for queue in backend.list_dead_letter_source_queues(name)]
    except Exception:  # not a queue ARN, or no such queue: moto answers the error after the check
        return []


def _object_exists(account: str, bucket: str, key: str) -> bool:
    try:
        from moto.s3.models import s3_backends

        return s3_backends[account]["global"].get_object(bucket, key) is not None
    except Exception:
        return False


def _credential(environ: dict[str, Any]) -> tuple[str, str, str] | None:
    """(access key, region, service) of a SigV4-signed request (header or presigned query)."""
    found = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
    if found:
        return found.group(1), found.group(2), found.group(3)
    query = environ.get("QUERY_STRING", "")
    if "X-Amz-Credential=" in query:
        from urllib.parse import parse_qs

        credential = parse_qs(query).get("X-Amz-Credential", [""])[0].split("/")
        if len(credential) == 5:
            return credential[0], credential[2], credential[3]
    return None


def _request(environ: dict[str, Any], service: str, region: str, account: str) -> Request:
    body = b""
    stream = environ.get("wsgi.input")
    if service != "s3" or "delete" in environ.get("QUERY_STRING", ""):
        if isinstance(stream, io.BytesIO):
            body = stream.getvalue()
        elif stream is not None:
            # The raw socket stream: read exactly the body (a bare read() waits for EOF).
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = stream.read(length) if length > 0 else b""
            environ["wsgi.input"] = io.BytesIO(body)
    headers = {
        key[5:].replace("_", "-").lower(): str(value)
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    return Request(
        service=service,
        method=str(environ.get("REQUEST_METHOD", "GET")),
        path=str(environ.get("PATH_INFO", "")),
        query=str(environ.get("QUERY_STRING", "")),
        headers=headers,
        body=body,
        region=region,
        account=account,
    )


def _body_cut(environ: dict[str, Any], request: Request) -> bool:
    """True when a request's body is shorter than it said, or absent where every SDK call sends one:
    a JSON-protocol call always carries at least ``{}`` and a query-protocol call its ``Action``."""
    if request.service == "s3":
        return False  # the enforcer reads an S3 body only for DeleteObjects; moto answers the rest
    declared = int(environ.get("CONTENT_LENGTH") or 0)
    if declared > len(request.body):
        return True
    return request.method == "POST" and not request.body


def _retryable_failure(service: str) -> tuple[int, dict[str, str], bytes]:
    """The 500 each protocol answers for an internal failure; botocore retries any 500."""
    message = "the request body did not arrive in full; retry"
    request_id = str(uuid.uuid4())
    if service == "dynamodb":
        body = {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": message}
        headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": request_id}
        return 500, headers, json.dumps(body).encode()
    if service in _JSON_DENIAL_TYPES or service == "sqs":
        headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": request_id}
        if service == "sqs":
            headers["x-amzn-query-error"] = "InternalFailure;Receiver"
        return 500, headers, json.dumps({"__type": "InternalFailure", "message": message}).encode()
    query_body = (
        f'<ErrorResponse xmlns="https://{service}.amazonaws.com/doc/"><Error><Type>Receiver</Type>'
        f"<Code>InternalFailure</Code><Message>{message}</Message></Error><RequestId>{request_id}"
        "</RequestId></ErrorResponse>"
    )
    return 500, {"Content-Type": "text/xml", "x-amzn-RequestId": request_id}, query_body.encode()


def _respond(start_response: Any, status: int, headers: dict[str, str], body: bytes) -> list[bytes]:
    reason = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found"}.get(status, "Error")
    start_response(f"{status} {reason}", [*headers.items(), ("Content-Length", str(len(body)))])
    return [body]


def _control(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    global STATE
    what = environ.get("PATH_INFO", "")[len(CONTROL_PREFIX) :]
    method = environ.get("REQUEST_METHOD", "GET")
    try:
        if what == "model" and method == "PUT":
            stream = environ["wsgi.input"]
            STATE = load_model(json.loads(stream.read(int(environ.get("CONTENT_LENGTH") or 0))))
            body: Any = {"functions": len(STATE.functions), "resourcePolicies": len(STATE.resource_policies)}
        elif what == "report" and method == "GET":
            body = report(STATE)
        elif what == "service-call" and method == "POST":
            stream = environ["wsgi.input"]
            ask = json.loads(stream.read(int(environ.get("CONTENT_LENGTH") or 0)))
            allowed = service_may(STATE, ask["service"], ask["sourceArn"], ask["action"], ask["resource"])
            body = {"allowed": allowed}
        elif what == "denials" and method == "GET":
            with STATE.lock:
                body = list(STATE.denials)
        elif what == "bus" and method == "GET":
            body = rule_outcomes()
        else:
            return _respond(
                start_response, 404, {"Content-Type": "application/json"}, b'{"message":"Not Found"}'
            )
    except (ValueError, KeyError) as exc:
        payload = json.dumps({"message": f"{type(exc).__name__}: {exc}"}).encode()
        return _respond(start_response, 400, {"Content-Type": "application/json"}, payload)
    return _respond(start_response, 200, {"Content-Type": "application/json"}, json.dumps(body).encode())


def report(state: _State) -> dict[str, Any]:
    """Per function: every granted (action, resource) with its use count, and the calls denied."""
    functions = []
    with state.lock:
        denials = list(state.denials)
        for fn in state.functions.values():
            granted = []
            for statement in fn.principal.statements:
                if statement.effect != "Allow":
                    continue
                for action, resource in grants(statement):
                    granted.append(
                        {
                            "policy": statement.source,
                            "action": action,
                            "resource": resource,
                            "uses": fn.used[(statement.source, action, resource)],
                        }
                    )
            caller = fn.principal.caller
            functions.append(
                {
                    "function": caller.name,
                    "role": caller.role_arn,
                    "calls": dict(_calls(fn.operation_calls)),
                    "operation_calls": dict(fn.operation_calls),
                    "grants": granted,
                    "denied": dict(
                        Counter(
                            f"{d['action']} {d['resource']}" for d in denials if d["function"] == caller.name
                        )
                    ),
                }
            )
    service_denials = Counter(
        f"{d['function']}: {d['action']} {d['resource']}"
        for d in denials
        if d["function"] not in {f["function"] for f in functions}
    )
    return {"functions": functions, "serviceDenials": dict(service_denials)}


def _handle(original: Callable[..., Any]) -> Callable[..., Any]:
    def __call__(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO", "").startswith(CONTROL_PREFIX):
            return _control(environ, start_response)
        state = STATE
        if not state.loaded:
            return original(self, environ, start_response)
        credential = _credential(environ)
        fn = state.functions.get(credential[0]) if credential else None
        if fn is None or credential is None:
            return original(self, environ, start_response)
        _, region, service = credential
        request = _request(environ, service, region, state.account)
        if _body_cut(environ, request):
            # The body did not arrive in full (the client's connection was cut mid-request under
            # chaos): not an IAM question, and reading it would ask the wrong one (a PutEvents without
            # entries names the default bus). Answered as the service's retryable 500.
            return _respond(start_response, *_retryable_failure(service))
        caller = fn.principal.caller
        try:
            checks = checks_for(
                request,
                secret_arn=_secret_arn(state.account, region),
                dead_letter_sources=_dead_letter_sources,
            )
        except Unmodelled as exc:
            check = Check(f"{service}:?", request.path or "*", "?")
            decision = Decision(
                False, reason=f"(the sandbox cannot authorize {exc}; extend emulator/iam_requests.py)"
            )
            message = f"User: {caller.arn} made a request the sandbox cannot authorize: {exc}"
            _record_denial(state, caller.name, check, decision, message)
            return _respond(start_response, *denied_response(service, request.method, message))
        denied = authorize(state, fn, checks)
        if denied is None and service == "s3":
            denied = _missing_object_without_list(state, fn, checks)
        if denied is not None:
            check, decision = denied
            message = denial_message(caller, check, decision)
            _record_denial(state, caller.name, check, decision, message)
            return _respond(start_response, *denied_response(service, request.method, message))
        return original(self, environ, start_response)

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    return __call__


def _missing_object_without_list(
    state: _State, fn: _Function, checks: list[Check]
) -> tuple[Check, Decision] | None:
    """S3 answers 403, not 404, for a missing key when the caller may not list the bucket."""
    if len(checks) != 1 or checks[0].operation not in ("GetObject", "HeadObject"):
        return None
    bucket, _, key = checks[0].resource.removeprefix("arn:aws:s3:::").partition("/")
    if _object_exists(state.account, bucket, key):
        return None
    caller = fn.principal.caller
    list_check = Check("s3:ListBucket", f"arn:aws:s3:::{bucket}", checks[0].operation)
    decision = decide(
        fn.principal,
        caller,
        list_check.action,
        list_check.resource,
        _context(caller, state.region),
        _resource_policy(state, list_check.resource),
    )
    return None if decision.allowed else (list_check, decision)


def _guard_sns_delivery(original: Callable[..., Any]) -> Callable[..., Any]:
    def publish(self: Any, message: str, message_id: str, *args: Any, **kwargs: Any) -> Any:
        state = STATE
        if self.protocol != "sqs" or self.endpoint not in state.enforced_queues:
            return original(self, message, message_id, *args, **kwargs)
        matcher = getattr(self, "_filter_policy_matcher", None)
        attributes = (
            kwargs.get("message_attributes")
            if "message_attributes" in kwargs
            else (args[1] if len(args) > 1 else None)
        )
        if matcher is not None and not matcher.matches(attributes, message):
            return None
        topic = self.topic.arn
        if _sns_may_send(state, topic, self.endpoint):
            delivered("sns", topic)
            return original(self, message, message_id, *args, **kwargs)
        dlq = json.loads(self.attributes.get("RedrivePolicy") or "{}").get("deadLetterTargetArn")
        if dlq and _sns_may_send(state, topic, dlq):
            from moto.sqs.models import sqs_backends

            region = dlq.split(":")[3]
            sqs_backends[self.account_id][region].send_message(dlq.rsplit(":", 1)[-1], message)
        return None

    publish.__wrapped__ = original  # type: ignore[attr-defined]
    return publish


def _sns_may_send(state: _State, topic_arn: str, queue_arn: str) -> bool:
    return service_may(state, "sns.amazonaws.com", topic_arn, "sqs:SendMessage", queue_arn)


def service_may(state: _State, service: str, source_arn: str, action: str, resource: str) -> bool:
    """May an AWS service principal (SNS delivering for a topic, EventBridge dead-lettering for a
    rule) do ``action`` on ``resource``? Only the resource's policy can allow it; a denial is recorded.
    Resources the model does not know (made outside the templates) are not restricted."""
    if resource not in state.resource_policies and resource not in state.enforced_queues:
        return True
    caller = Caller(name=service, arn=service, account=state.account, service=service)
    source = {"aws:SourceArn": source_arn, "aws:SourceAccount": state.account}
    context = _context(caller, state.region, source)
    check = Check(action, resource, f"{service} for {source_arn}")
    decision = decide(None, caller, action, resource, context, _resource_policy(state, resource))
    if not decision.allowed:
        message = f"{service} cannot {action} on {resource} for {source_arn}: {decision.reason}"
        _record_denial(state, f"{service} ({source_arn.rsplit(':', 1)[-1]})", check, decision, message)
    return decision.allowed


def service_role_may(service: str, role_arn: str, source_arn: str, action: str, resource: str) -> bool:
    """May ``service`` (SNS delivering for a topic, Firehose writing for a stream), acting as the role
    ``role_arn`` it was given, do ``action`` on ``resource``? The role's trust policy must name the
    service, and its policies (with the resource's policy) must allow the action; a denial is recorded.
    Roles the model does not know (made outside the templates) are not restricted."""
    state = STATE
    entry = state.service_roles.get(role_arn)
    if not state.loaded or entry is None:
        return True
    principal, services = entry
    check = Check(action, resource, f"{service} for {source_arn}")
    caller = principal.caller
    who = f"{service} as {role_arn.rsplit('/', 1)[-1]} ({source_arn.rsplit(':', 1)[-1]})"
    if service not in services:
        decision = Decision(False, reason=f"because the role's trust policy does not let {service} assume it")
    else:
        context = _context(
            caller, state.region, {"aws:SourceArn": source_arn, "aws:SourceAccount": state.account}
        )
        decision = decide(principal, caller, action, resource, context, _resource_policy(state, resource))
    if not decision.allowed:
        _record_denial(state, who, check, decision, f"{who} cannot {action} on {resource}: {decision.reason}")
    return decision.allowed


def install() -> Callable[[], None]:
    """Enforce IAM in this moto server process (a no-op until the sandbox PUTs a model); returns a
    function that removes the enforcement (tests run a moto server in their own process)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication
    from moto.sns.models import Subscription

    from emulator.patches import firehose_delivery

    firehose_delivery.ROLE_CHECK = service_role_may
    originals = (DomainDispatcherApplication.__call__, Subscription.publish)
    DomainDispatcherApplication.__call__ = _handle(originals[0])  # type: ignore[method-assign]
    Subscription.publish = _guard_sns_delivery(originals[1])  # type: ignore[method-assign]

    def remove() -> None:
        global STATE
        DomainDispatcherApplication.__call__ = originals[0]  # type: ignore[method-assign]
        Subscription.publish = originals[1]  # type: ignore[method-assign]
        firehose_delivery.ROLE_CHECK = None
        STATE = _State()

    return remove
