"""Every AWS request the emulator serves, counted by caller, service and action, with what AWS bills
them by (``python -m local cost`` / ``make cost`` reads it; ``bench/cost.py`` prices it).

Installed in the emulator process outermost (before IAM enforcement), it sees each request once:

* the **caller** is the function whose access key signed it (``emulator.iam.access_key_for``), or
  ``glue:<part> (<function>)`` when the managed glue made the call with that function's role (an
  event source mapping's ReceiveMessage, DeleteMessageBatch, GetRecords: ``relay-glue/esm`` in the
  User-Agent, ``emulator.server.client(glue=...)``), or ``other`` (the demo driver, ops, provisioning);
* per (caller, service, action): requests, the billed units AWS counts for that service
  (``billed``: SQS and SNS requests per 64 KB chunk of payload, EventBridge entries per 64 KB,
  DynamoDB write units per 1 KB item written (x2 in a transaction) and read units per 4 KB read
  (strongly consistent 1, eventually consistent 0.5, transactional 2)), and for ReceiveMessage and
  a stream's GetRecords how many came back empty (idle polling);
* per (caller, service, action) also the ``entries`` the requests carried: a PublishBatch's,
  SendMessageBatch's, DeleteMessageBatch's or PutEvents' entries, a ReceiveMessage's messages, a
  transaction's or a batch write's items (one a request for the rest), so the capacity model counts
  messages, not requests;
* an OTLP export to X-Ray's traces endpoint (``emulator.traces``) as action ``OTLP spans``, billed by
  its uncompressed bytes (CloudWatch ingests spans as logs, priced per GB) with its spans as entries
  (a refused export: its request, no bytes);
* what never crosses HTTP is counted where it happens: SNS deliveries to SQS (``emulator.iam_enforcer``
  guards them) and the bus's deliveries to SQS targets (``emulator.bus_delivery``), via ``delivered``
  (action ``Deliver to SQS``; AWS charges neither).

DynamoDB writes are measured on the items as stored, before and after (``WriteMeasure``), as
DynamoDB bills them: a put or an update by the larger of the item's two sizes (an update of one
attribute of a 3 KB item is 3 units), a delete by the deleted item, x2 in a transaction, plus the
writes of the global secondary indexes the change touches. Reads are measured by the answer's JSON, a
little above DynamoDB's own measure (attribute names + values), so the read units are an upper bound.

``GET /_relay/iam/meter`` answers the counts; ``DELETE /_relay/iam/meter`` starts them again.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from typing import Any

from emulator import iam_enforcer
from emulator.server import GLUE_AGENT
from emulator.sqs_admin import json_response
from emulator.tallies import add, reset, snapshot

CHUNK = 64 * 1024
PATH = iam_enforcer.CONTROL_PREFIX + "meter"


def _caller(access_key: str | None, user_agent: str) -> str:
    if access_key is None:
        return "other"
    fn = iam_enforcer.STATE.functions.get(access_key)
    name = str(fn.principal.caller.name) if fn is not None else "other"
    marker = user_agent.find(GLUE_AGENT + "/")
    if marker >= 0:
        part = user_agent[marker + len(GLUE_AGENT) + 1 :].split(" ", 1)[0]
        return f"glue:{part} ({name})"
    return name


def _chunks(size: int) -> int:
    return max(1, math.ceil(size / CHUNK))


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def _action(environ: dict[str, Any], service: str, body: bytes) -> str:
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target:
        return target.rsplit(".", 1)[-1]
    if service == "s3":
        method = str(environ.get("REQUEST_METHOD", "GET"))
        return {"PUT": "PutObject", "GET": "GetObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(
            method, method
        )
    from urllib.parse import parse_qs

    query = parse_qs(body.decode("utf-8", errors="replace")) or parse_qs(str(environ.get("QUERY_STRING", "")))
    return (query.get("Action") or ["?"])[0]


_STREAM_ACTIONS = frozenset({"GetRecords", "GetShardIterator", "DescribeStream", "ListStreams"})
# Actions whose billed units depend on the answer (what was read): only theirs is collected.
_ANSWER_MEASURED = frozenset(
    {"ReceiveMessage", "GetRecords", "GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
)


def _write_units(size: int, *, transactional: bool = False) -> float:
    return max(1, math.ceil(size / 1024)) * (2 if transactional else 1)


def _read_units(size: int, *, consistent: bool, transactional: bool = False) -> float:
    units = max(1, math.ceil(size / 4096))
    return units * (2 if transactional else 1 if consistent else 0.5)


def _dynamodb(action: str, request: dict[str, Any], answer: dict[str, Any]) -> float:
    """The request/capacity units one DynamoDB call is billed."""
    if action == "PutItem":
        return _write_units(_size(request.get("Item")))
    if action in ("UpdateItem", "DeleteItem"):
        return _write_units(_size(request.get("Key")) + _size(request.get("ExpressionAttributeValues", {})))
    if action == "TransactWriteItems":
        total = 0.0
        for item in request.get("TransactItems", []):
            ((_kind, body),) = item.items()
            payload = body.get("Item") or {**body.get("Key", {}), **body.get("ExpressionAttributeValues", {})}
            total += _write_units(_size(payload), transactional=True)
        return total
    if action == "BatchWriteItem":
        return sum(
            _write_units(_size(r.get("PutRequest", {}).get("Item") or r.get("DeleteRequest", {}).get("Key")))
            for rs in request.get("RequestItems", {}).values()
            for r in rs
        )
    consistent = bool(request.get("ConsistentRead"))
    if action == "GetItem":
        return _read_units(_size(answer.get("Item", {})), consistent=consistent)
    if action in ("Query", "Scan"):
        return _read_units(sum(_size(i) for i in answer.get("Items", [])), consistent=consistent)
    if action == "TransactGetItems":
        return sum(
            _read_units(_size(r.get("Item", {})), consistent=True, transactional=True)
            for r in answer.get("Responses", [])
        )
    if action == "BatchGetItem":
        return sum(
            _read_units(_size(i), consistent=consistent)
            for items in answer.get("Responses", {}).values()
            for i in items
        )
    return 1.0


# -- DynamoDB writes, measured on the stored items ---------------------------------------------------

_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
_KB = 1024


def _write_targets(action: str, request: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, table, body) of each item a write request touches."""
    if action in ("PutItem", "UpdateItem", "DeleteItem"):
        return [(action[: -len("Item")], str(request.get("TableName")), request)]
    if action == "TransactWriteItems":
        return [
            (kind, str(body.get("TableName")), body)
            for entry in request.get("TransactItems", [])
            for kind, body in entry.items()
        ]
    if action == "BatchWriteItem":
        return [
            (kind[: -len("Request")], table, body)
            for table, entries in request.get("RequestItems", {}).items()
            for entry in entries
            for kind, body in entry.items()
        ]
    return []


# An item as stored: its size and, per global secondary index it is in, (index key, projection, size).
Stored = tuple[int, dict[str, tuple[str, str, int]]] | None


def _stored(backend: Any, table_name: str, kind: str, body: dict[str, Any]) -> Stored:
    table = backend.get_table(table_name)
    if kind == "Put":
        names = [n for n in (table.hash_key_attr, table.range_key_attr) if n]
        key = {n: body["Item"][n] for n in names if n in body.get("Item", {})}
    else:
        key = body.get("Key") or {}
    item = backend.get_item(table_name, key)
    if item is None:
        return None
    entries: dict[str, tuple[str, str, int]] = {}
    for index in table.global_indexes:
        if all(name in item.attrs for name in index.schema_key_attrs):
            projected = index.project(item)
            index_key = json.dumps([item.attrs[n].to_json() for n in index.schema_key_attrs])
            entries[index.name] = (
                index_key,
                json.dumps(projected.to_json(), sort_keys=True),
                projected.size(),
            )
    return int(item.size()), entries


def _units(size: int) -> int:
    return max(1, math.ceil(size / _KB))


def _index_units(before: Stored, after: Stored) -> int:
    """What the global secondary indexes bill for one item's change (the Developer Guide's rules: a new
    entry 1 write, a changed index key 2, a removed entry 1, changed projected attributes 1)."""
    old, new = (before or (0, {}))[1], (after or (0, {}))[1]
    units = 0
    for name in set(old) | set(new):
        was, now = old.get(name), new.get(name)
        if was is None and now is not None:
            units += _units(now[2])
        elif was is not None and now is None:
            units += _units(was[2])
        elif was is not None and now is not None:
            if was[0] != now[0]:
                units += _units(was[2]) + _units(now[2])
            elif was[1] != now[1]:
                units += _units(now[2])
    return units


class WriteMeasure:
    """A DynamoDB write billed as DynamoDB bills it, from the stored items before and after: a put or
    an update by the larger of the item's two sizes, a delete by the deleted item's, a failed
    condition by the item it met (1 unit if none), x2 in a transaction; plus the global secondary
    indexes' writes. A ``ConditionCheck`` keeps the request's measure (``_dynamodb``)."""

    def __init__(self, backend: Any, action: str, request: dict[str, Any]) -> None:
        self.backend, self.action, self.request = backend, action, request
        self.targets = _write_targets(action, request)
        self.before = [self._stored(t) for t in self.targets]

    def _stored(self, target: tuple[str, str, dict[str, Any]]) -> Stored:
        kind, table, body = target
        if kind == "ConditionCheck":
            return None
        return _stored(self.backend, table, kind, body)

    def billed(self) -> float:
        transactional = self.action == "TransactWriteItems"
        total = 0.0
        for target, before in zip(self.targets, self.before, strict=True):
            kind, _table, body = target
            if kind == "ConditionCheck":
                total += _write_units(_size(body.get("Key", {})), transactional=True)
                continue
            after = self._stored(target)
            sizes = [s[0] for s in (before, after) if s is not None] or [0]
            size = sizes[0] if kind == "Delete" and before is not None else max(sizes)
            total += _units(size) * (2 if transactional else 1) + _index_units(before, after)
        return total


def write_measure(account: str, region: str, action: str, request: dict[str, Any]) -> WriteMeasure | None:
    """Before a DynamoDB write reaches the emulator: its items as stored (None if not a write, or if
    its tables cannot be read: then ``_dynamodb`` measures it from the request)."""
    if action not in _WRITES or not request:
        return None
    try:
        from moto.dynamodb.models import dynamodb_backends

        return WriteMeasure(dynamodb_backends[account][region], action, request)
    except Exception:  # an unknown table, a malformed request: the emulator answers it; measure by request
        return None


def _request_json(body: bytes) -> dict[str, Any]:
    """A JSON request body (DynamoDB's, SQS's JSON protocol), or {} for anything else."""
    try:
        parsed = json.loads(body) if body[:1] == b"{" else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _messages(answer_bytes: bytes) -> list[Any]:
    """The messages a ReceiveMessage answered."""
    try:
        return list(json.loads(answer_bytes).get("Messages", []))
    except (ValueError, AttributeError):
        return []


def _billed(
    service: str,
    action: str,
    body: bytes,
    answer_bytes: bytes,
    request: dict[str, Any] | None = None,
    messages: list[Any] | None = None,
) -> tuple[float, int]:
    """(billed units, 1 if an empty receive) of one request; ``request``: ``body`` already parsed;
    ``messages``: a ReceiveMessage's answer already parsed (``_messages``)."""
    if request is None:
        request = _request_json(body)
    if service == "sqs":
        if action == "SendMessage":
            return float(_chunks(len(str(request.get("MessageBody", ""))))), 0
        if action == "SendMessageBatch":
            return float(
                _chunks(sum(len(str(e.get("MessageBody", ""))) for e in request.get("Entries", [])))
            ), 0
        if action == "ReceiveMessage":
            if messages is None:
                messages = _messages(answer_bytes)
            return float(_chunks(sum(len(str(m.get("Body", ""))) for m in messages))), 0 if messages else 1
        return 1.0, 0
    if service == "dynamodbstreams" and action == "GetRecords":
        try:
            records = json.loads(answer_bytes).get("Records", [])
        except ValueError:
            records = []
        return 1.0, 0 if records else 1
    if service == "sns":
        return float(_chunks(len(body))), 0
    if service == "events" and action == "PutEvents":
        return float(sum(_chunks(_size(e)) for e in request.get("Entries", []))), 0
    if service == "dynamodb":
        try:
            answer = json.loads(answer_bytes) if answer_bytes[:1] == b"{" else {}
        except ValueError:
            answer = {}
        return _dynamodb(action, request, answer), 0
    return 1.0, 0


_BATCHES = {
    ("sns", "PublishBatch"): "PublishBatchRequestEntries",
    ("sqs", "SendMessageBatch"): "Entries",
    ("sqs", "DeleteMessageBatch"): "Entries",
    ("sqs", "ChangeMessageVisibilityBatch"): "Entries",
    ("events", "PutEvents"): "Entries",
    ("dynamodb", "TransactWriteItems"): "TransactItems",
    ("dynamodb", "TransactGetItems"): "TransactItems",
}


def _entries(
    service: str,
    action: str,
    body: bytes,
    answer_bytes: bytes,
    request: dict[str, Any],
    messages: list[Any] | None = None,
) -> int:
    """The messages, events or items one request carried (1 for a request of one); ``messages`` as
    in ``_billed``."""
    if service == "sqs" and action == "ReceiveMessage":
        return len(messages if messages is not None else _messages(answer_bytes))
    if service == "dynamodb" and action == "BatchWriteItem":
        return sum(len(v) for v in (request.get("RequestItems") or {}).values())
    if service == "dynamodb" and action == "BatchGetItem":
        return sum(len(v.get("Keys", [])) for v in (request.get("RequestItems") or {}).values())
    member = _BATCHES.get((service, action))
    if member is None:
        return 1
    if request:  # JSON protocols (SQS, EventBridge, DynamoDB)
        return len(request.get(member) or [])
    from urllib.parse import parse_qs  # SNS's query protocol: Member.member.N.Id, one per entry

    query = parse_qs(body.decode("utf-8", errors="replace"))
    return sum(1 for key in query if key.startswith(f"{member}.member.") and key.endswith(".Id"))


def _metered(original: Callable[..., Any]) -> Callable[..., Any]:
    def __call__(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        path = str(environ.get("PATH_INFO", ""))
        if path == PATH:
            if environ.get("REQUEST_METHOD") == "DELETE":
                reset()
            return json_response(start_response, "200 OK", snapshot())
        credential = iam_enforcer._credential(environ)
        if credential is None or path.startswith(iam_enforcer.CONTROL_PREFIX):
            return original(self, environ, start_response)
        access_key, region, service = credential
        request = iam_enforcer._request(environ, service, region, iam_enforcer.STATE.account)
        if service == "xray":
            return _spans_metered(original, self, environ, start_response, access_key)
        action = _action(environ, service, request.body)
        if service == "dynamodb" and action in _STREAM_ACTIONS:
            service = "dynamodbstreams"  # streams sign as dynamodb; AWS bills them apart
        parsed = _request_json(request.body)  # once: the write measure and the billing both read it
        writes = None
        if service == "dynamodb":
            writes = write_measure(iam_enforcer.STATE.account, region, action, parsed)
        answer = original(self, environ, start_response)
        body = b""
        if action in _ANSWER_MEASURED:
            answer = list(answer)
            body = b"".join(answer)
        # A receive's answer is read once, for its billed chunks and its message count.
        messages = _messages(body) if service == "sqs" and action == "ReceiveMessage" else None
        billed, empty = _billed(service, action, request.body, body, parsed, messages)
        if writes is not None:
            # An item changing under the measure (another thread): keep the request's measure.
            with contextlib.suppress(Exception):
                billed = writes.billed()
        add(
            _caller(access_key, str(environ.get("HTTP_USER_AGENT", ""))),
            service,
            action,
            billed=billed,
            empty=empty,
            entries=_entries(service, action, request.body, body, parsed, messages),
        )
        return answer

    __call__.__wrapped__ = original  # type: ignore[attr-defined]
    return __call__


def _spans_metered(
    original: Callable[..., Any], app: Any, environ: dict[str, Any], start_response: Any, key: str
) -> Any:
    from emulator.traces import ACCEPTED

    answer = original(app, environ, start_response)
    size, spans = environ.get(ACCEPTED, (0, 0))  # set by the collector when it kept the spans
    caller = _caller(key, str(environ.get("HTTP_USER_AGENT", "")))
    add(caller, "xray", "OTLP spans", billed=float(size), empty=0, entries=spans)
    return answer


def install() -> Callable[[], None]:
    """Meter every request this moto server process serves (install after ``iam_enforcer.install``,
    so the meter is outermost)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.__call__
    DomainDispatcherApplication.__call__ = _metered(original)  # type: ignore[method-assign]

    def remove() -> None:
        DomainDispatcherApplication.__call__ = original  # type: ignore[method-assign]
        reset()

    return remove
