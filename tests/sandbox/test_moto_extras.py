"""The sandbox declares moto without its ``server`` extra (which brings every service's dependencies,
docker included) and names what its services need instead (pyproject.toml, group ``sandbox``). Each
module the emulator loads for those services imports here, in a fresh interpreter, so a dependency that
the narrowing dropped fails this test rather than a request in the middle of a demo."""

from __future__ import annotations

import json
import subprocess
import sys

# The server, CloudFormation's provisioning, and every service the app's stacks and code call.
SERVICES = (
    "dynamodb", "dynamodbstreams", "s3", "sqs", "sns", "events", "scheduler", "awslambda", "iam", "sts",
    "secretsmanager", "cloudwatch", "logs", "kms", "apigatewayv2", "cloudformation",
)  # fmt: skip
# Imported by a service on first use, not at load: each named with the call that needs it.
LAZY = {
    "jsonpath_ng": "EventBridge input paths and transformers",
    "py_partiql_parser": "DynamoDB ExecuteStatement and S3 Select",
    "flask_cors": "the moto server's CORS",
}

PROBE = """
import importlib, json, sys
modules = ["moto.server", "moto.moto_server.werkzeug_app", "moto.cloudformation.parsing"]
for service in {services!r}:
    modules += [f"moto.{{service}}.models", f"moto.{{service}}.responses", f"moto.{{service}}.urls"]
failed = {{}}
for name in modules + {lazy!r}:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = f"{{type(exc).__name__}}: {{exc}}"
print(json.dumps({{"failed": failed, "docker": "docker" in sys.modules}}))
"""


def test_the_services_the_sandbox_runs_load_without_moto_server_extras() -> None:
    probe = PROBE.format(services=SERVICES, lazy=list(LAZY))
    answer = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    result = json.loads(answer.stdout.strip().splitlines()[-1])

    assert result["failed"] == {}, "declare these in pyproject.toml's sandbox group, then make lock"
    assert result["docker"] is False  # moto imports docker only to run Lambda in containers: never here
