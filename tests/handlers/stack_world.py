"""The handler tests' AWS, provisioned from the synthesized stacks -- never written out by hand.

Each world (``orders/world.py``, ``payments/pipeline.py``, ...) asks for a service; ``provision()``
deploys that service's stack, and the stacks it imports values from, into moto's in-process
``mock_aws`` with the sandbox's own provisioner (``emulator.provision``): the same tables (keys, indexes,
streams), topics, queues (DLQs, redrive, visibility), subscriptions (filter policies, raw delivery)
and buckets that ``cdk deploy`` creates, resolved the same way. A resource changed in a stack is
changed in the handler tests too. The functions' environment comes from the templates as well
(``StackWorld.env``), resolved by the provisioner; the worlds override only what points outside AWS
(the fakes' URLs) and the test knobs.

The templates come from a synth of the app as the infra tests build it (``build_app``: the stage
cdk.json names, cdk-nag off, the Relay guards on, asset bundling skipped), run in a subprocess and
cached under ``.pytest_cache/relay-assemblies/<key>``; the key hashes every source the app is built
from (``local.sandbox.SOURCE_PATHS``, by content) and the CDK library's version, so a session with
unchanged sources reuses the assembly and any change synthesizes again (~7-12 s). ``cdk.out`` is not
used: its freshness can only be guessed from mtimes, and ``make synth STAGE=prod`` writes another
stage into it. ``RELAY_TEST_ASSEMBLY=<dir>`` uses a given assembly instead, unchecked (for a moment
when the infra does not synthesize).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moto import mock_aws

from emulator.provision import FunctionSpec, Provisioner, Topology
from emulator.server import client
from emulator.templates import Stack, load_stacks
from local.sandbox import SOURCE_PATHS

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".pytest_cache" / "relay-assemblies"
KEEP = 3  # cached assemblies kept (the newest), so switching branches back and forth stays cheap

# Run in a subprocess so the test process never starts jsii's Node runtime.
_SYNTH = """
import sys
from aws_cdk import App
from infra.app_builder import build_app

app = App(outdir=sys.argv[1], context={"aws:cdk:enable-path-metadata": True, "aws:cdk:bundling-stacks": []})
build_app(app, nag=False)
app.synth()
"""

# Seconds spent getting the templates and provisioning worlds in this session (printed by conftest).
COSTS: dict[str, Any] = {"assembly": 0.0, "assembly_source": "", "provision": 0.0, "worlds": 0}


def source_key() -> str:
    """A hash of what the synthesized app depends on: the sources by content, and the CDK version."""
    digest = hashlib.sha256(importlib.metadata.version("aws-cdk-lib").encode())
    files: list[Path] = []
    for name in SOURCE_PATHS:
        path = ROOT / name
        if path.is_file():
            files.append(path)
        for root, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", ".mypy_cache")]
            files.extend(Path(root, n) for n in names if not n.endswith(".pyc"))
    for file in sorted(files):
        digest.update(f"{file.relative_to(ROOT)}\0".encode() + file.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def _synth(outdir: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "20",
    }
    result = subprocess.run(
        [sys.executable, "-c", _SYNTH, str(outdir)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"synthesizing the app for the handler tests failed (exit {result.returncode}); the handler "
            f"tests build their AWS resources from the templates, so fix the synth first:\n"
            f"{result.stderr[-4000:]}"
        )
    # Bundling is skipped (no pip run for the dependency layer): a layer whose bundle was not built
    # gets an empty stand-in, so the provisioner can record the functions that carry it. The handler
    # tests import the functions from the source tree, not from the assets.
    for template in outdir.glob("*.template.json"):
        for resource in json.loads(template.read_text())["Resources"].values():
            if resource["Type"] == "AWS::Lambda::LayerVersion":
                key = str(resource["Properties"]["Content"]["S3Key"]).removesuffix(".zip")
                (outdir / f"asset.{key}").mkdir(exist_ok=True)


@functools.cache
def assembly() -> Path:
    """The synthesized app for the current sources: from the cache, or synthesized now."""
    started = time.perf_counter()
    chosen = os.environ.get("RELAY_TEST_ASSEMBLY")
    if chosen:
        # An explicit choice (e.g. cdk.out while the infra is mid-edit and does not synthesize): used
        # as it is, never checked against the sources.
        COSTS["assembly_source"] = f"RELAY_TEST_ASSEMBLY={chosen}, not checked against the sources"
        return Path(chosen).resolve()
    target = CACHE / source_key()
    COSTS["assembly_source"] = f"cached, {target.relative_to(ROOT)}"
    if not (target / "manifest.json").is_file():
        COSTS["assembly_source"] = f"synthesized, {target.relative_to(ROOT)}"
        CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".synth-", dir=CACHE))
        try:
            _synth(staging)
            try:
                staging.rename(target)  # atomic: a concurrent session sees all of it or none
            except OSError:
                if not (target / "manifest.json").is_file():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        entries = sorted((p for p in CACHE.iterdir() if p.is_dir() and not p.name.startswith(".")),
                         key=lambda p: p.stat().st_mtime)  # fmt: skip
        for old in entries[:-KEEP]:
            shutil.rmtree(old, ignore_errors=True)
    else:
        os.utime(target)  # most recently used
    COSTS["assembly"] += time.perf_counter() - started
    return target


@functools.cache
def _stacks() -> tuple[Stack, ...]:
    return tuple(load_stacks(assembly()))


def stacks_for(service: str) -> list[Stack]:
    """The service's stack and every stack it imports values from, in deployment order."""
    stacks = _stacks()
    by_export = {name: stack for stack in stacks for name in stack.exports()}
    wanted: set[str] = set()
    pending = [next(s for s in stacks if s.name.endswith(f"-{service}"))]
    while pending:
        stack = pending.pop()
        if stack.name not in wanted:
            wanted.add(stack.name)
            pending.extend(by_export[name] for name in stack.imports())
    return [s for s in stacks if s.name in wanted]


@dataclass(frozen=True)
class Subscription:
    """An SNS subscription as provisioned (its attributes read back from moto)."""

    topic_arn: str
    queue_arn: str
    raw: bool
    filter_policy: dict[str, Any] | None


@dataclass
class Consumer:
    """A queue a function of the service consumes (its event source mapping), and the DLQ it parks
    into (the function's RELAY_DLQ_URL, which the stack points at the queue's redrive target)."""

    name: str  # the queue's name without the stack prefix: "payment-requests"
    url: str
    arn: str
    dlq_url: str
    dlq_arn: str
    function: FunctionSpec


@dataclass
class StackWorld:
    """What ``provision()`` created, with lookups by what the tests know (a handler, a queue's short
    name), and the functions' environment with the test's ``overrides`` (fakes' URLs, knobs) on top."""

    service: str
    stack: str  # the service stack's name: "relay-dev-payments"
    stacks: list[str]  # every stack provisioned (the service's last)
    topology: Topology
    overrides: dict[str, str] = field(default_factory=dict)
    _subscriptions: list[Subscription] | None = None

    # functions and their environment -------------------------------------------------------------

    def function(self, handler: str) -> FunctionSpec:
        """The service's function whose handler is ``handler`` ("payments.handlers.api.handler")."""
        found = [f for f in self._functions() if f.handler == handler]
        if len(found) != 1:
            raise LookupError(f"{self.stack}: {len(found)} functions with handler {handler}")
        return found[0]

    def _functions(self) -> list[FunctionSpec]:
        return [f for f in self.topology.functions.values() if f.stack == self.stack]

    def _shared(self) -> dict[str, str]:
        values: dict[str, set[str]] = {}
        for spec in self._functions():
            for name, value in spec.environment.items():
                values.setdefault(name, set()).add(value)
        return {name: next(iter(v)) for name, v in values.items() if len(v) == 1}

    def env(self) -> dict[str, str]:
        """The service's functions' variables that each function setting them sets alike (tables,
        bucket, topic, settings), then the overrides; ones that differ per function (RELAY_QUEUE_URL,
        ...) are ``consumer_env``'s."""
        return {**self._shared(), **self.overrides}

    def function_env(self, function: FunctionSpec) -> dict[str, str]:
        """What ``function`` sets differently from the service's other functions, then the overrides
        of those variables: what to put on top of ``env()`` to run it."""
        shared = self._shared()
        own = {k: v for k, v in function.environment.items() if k not in shared}
        return {k: self.overrides.get(k, v) for k, v in own.items()}

    def output(self, key: str) -> str:
        """The service stack's output ``key``, resolved as DescribeStacks would."""
        (stack,) = (s for s in self.topology.stacks if s.name == self.stack)
        return next(o.value for o in stack.outputs if o.key == key)

    # queues, topics, subscriptions ---------------------------------------------------------------

    def consumers(self) -> dict[str, Consumer]:
        """Every SQS queue of the service's stack that a function consumes, by short name."""
        found: dict[str, Consumer] = {}
        for mapping in self.topology.mappings:
            function = self.topology.functions.get(mapping.function)
            if mapping.kind != "sqs" or function is None or function.stack != self.stack:
                continue
            queue = mapping.source_arn.rsplit(":", 1)[-1]
            short = queue.removeprefix(f"{self.stack}-")
            dlq_url = function.environment["RELAY_DLQ_URL"]
            found[short] = Consumer(
                name=short,
                url=self.topology.queues[queue],
                arn=mapping.source_arn,
                dlq_url=dlq_url,
                dlq_arn=f"{mapping.source_arn.rsplit(':', 1)[0]}:{dlq_url.rsplit('/', 1)[-1]}",
                function=function,
            )
        return dict(sorted(found.items()))

    def queue_for(self, handler: str) -> str:
        """The short name of the queue ``handler``'s function consumes."""
        name = self.function(handler).name
        (short,) = [short for short, c in self.consumers().items() if c.function.name == name]
        return short

    def stream_arn(self, table: str) -> str:
        return self.topology.tables[table]

    def topic_name(self, arn: str) -> str:
        """A topic's name without its stack's prefix: "payment-events"."""
        name = arn.rsplit(":", 1)[-1]
        (stack,) = [stack for stack in self.stacks if name.startswith(f"{stack}-")]
        return name.removeprefix(f"{stack}-")

    def subscriptions(self) -> list[Subscription]:
        """Every SQS subscription in moto, with the attributes SNS delivers by."""
        if self._subscriptions is None:
            sns = aws("sns")
            found = []
            for page in sns.get_paginator("list_subscriptions").paginate():
                for sub in page["Subscriptions"]:
                    if sub["Protocol"] != "sqs":
                        continue
                    attributes = sns.get_subscription_attributes(SubscriptionArn=sub["SubscriptionArn"])
                    attrs = attributes["Attributes"]
                    policy = attrs.get("FilterPolicy")
                    found.append(
                        Subscription(
                            topic_arn=sub["TopicArn"],
                            queue_arn=sub["Endpoint"],
                            raw=attrs.get("RawMessageDelivery") == "true",
                            filter_policy=json.loads(policy) if policy else None,
                        )
                    )
            self._subscriptions = found
        return self._subscriptions

    def subscription(self, queue_arn: str) -> Subscription:
        (found,) = [s for s in self.subscriptions() if s.queue_arn == queue_arn]
        return found


@functools.cache
def aws(service: str) -> Any:
    """One boto3 client per service for the whole session: a client made once answers from whichever
    ``mock_aws`` is active when it sends (making a client costs more than provisioning with it)."""
    return client(service, None)


# The property that holds a resource's physical name, by type.
NAME_PROPERTIES = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SecretsManager::Secret": "Name",
}


@functools.cache
def _named(service: str, names: tuple[tuple[str, str], ...]) -> list[Stack]:
    """The stacks for ``service``, the service's template with the resources that ``names``' function
    variables refer to (``Ref``) given those physical names."""
    stacks = stacks_for(service)
    if not names:
        return stacks
    service_stack = stacks[-1]
    template = copy.deepcopy(service_stack.template)
    resources = template["Resources"]
    for variable, name in names:
        refs = {
            str(function["Properties"]["Environment"]["Variables"][variable]["Ref"])
            for function in resources.values()
            if function["Type"] == "AWS::Lambda::Function"
            and variable in function["Properties"].get("Environment", {}).get("Variables", {})
        }
        if len(refs) != 1:
            raise LookupError(f"{service_stack.name}: {variable} refers to {sorted(refs) or 'nothing'}")
        resource = resources[refs.pop()]
        resource["Properties"][NAME_PROPERTIES[resource["Type"]]] = name
    return [*stacks[:-1], Stack(service_stack.name, template, service_stack.path)]


def provision(
    service: str, overrides: dict[str, str] | None = None, *, names: Mapping[str, str] | None = None
) -> StackWorld:
    """Deploy ``service`` (and what it imports) into moto. Call inside ``mock_aws``.

    ``names``: a physical name for the resource a function variable refers to ({"ORDERS_TABLE":
    "orders-orders"}), for a test that spells a name out, or needs to know one the stack leaves to
    CloudFormation. What refers to it by Ref or GetAtt (other functions' variables, policies) follows."""
    stacks = _named(service, tuple(sorted((names or {}).items())))  # synthesizes, first time
    started = time.perf_counter()
    topology = Provisioner(None, assembly(), clients=aws).provision(stacks)
    COSTS["provision"] += time.perf_counter() - started
    COSTS["worlds"] += 1
    return StackWorld(service, stacks[-1].name, [s.name for s in stacks], topology, dict(overrides or {}))


@functools.cache
def plan(service: str, *, names: tuple[tuple[str, str], ...] = ()) -> StackWorld:
    """The world ``provision(service)`` builds, provisioned once into a throwaway moto: what the
    worlds' module constants (table, bucket and queue names) are read from when they are imported.
    Names are deterministic, so every test's world has the same ones; what is not (stream and
    secret ARNs) the worlds read from their own ``provision()``."""
    with mock_aws():
        world = provision(service, names=dict(names))
        world.subscriptions()
    return world
