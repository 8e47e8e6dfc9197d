"""Every function's environment is built from its declaration in ``functions/<service>/settings.py``
(``relay.settings.FunctionEnvironment``), the one the function checks at cold start: each required
setting is set, nothing undeclared is, and each variable name is written once."""

from __future__ import annotations

import importlib
from typing import Any

from relay.settings import FunctionEnvironment

# Set by the constructs for the kernel and Powertools, not by a service's settings.
KERNEL = {
    "RELAY_STAGE",
    "RELAY_QUEUE_URL",
    "RELAY_DLQ_URL",
    "RELAY_VISIBILITY_TIMEOUT_SECONDS",
    "RELAY_BACKOFF_BASE_SECONDS",
    "RELAY_RETRY_BUDGET_SECONDS",
    "RELAY_PARKED_LEDGER_TABLE",
}


def declarations(service: str) -> dict[str, FunctionEnvironment[Any]]:
    module = importlib.import_module(f"{service}.settings")
    return {
        name.lower().replace("_", "-"): value
        for name, value in vars(module).items()
        if isinstance(value, FunctionEnvironment)
    }


def env_names(declared: FunctionEnvironment[Any], fields: tuple[str, ...]) -> set[str]:
    return {declared.settings.env_name(field) for field in fields}


def test_each_function_environment_is_exactly_its_declaration(
    app_templates: dict[str, dict[str, Any]],
) -> None:
    checked = 0
    for stack, template in app_templates.items():
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] != "AWS::Lambda::Function":
                continue
            properties = resource["Properties"]
            handler = properties.get("Handler", "")
            if not handler.endswith(".handler") or "." not in handler.removesuffix(".handler"):
                continue  # a CDK-provided function (log retention, bucket notifications), not ours
            service, *_, module = handler.removesuffix(".handler").split(".")
            variables = set((properties.get("Environment") or {}).get("Variables", {}))
            service_vars = {
                v for v in variables if not v.startswith(("POWERTOOLS_", "OTEL_")) and v not in KERNEL
            }
            matching = [
                d
                for d in declarations(service).values()
                if env_names(d, d.required) <= service_vars <= env_names(d, (*d.required, *d.optional))
            ]
            assert matching, (
                f"{stack}/{logical_id} ({handler}) has {sorted(service_vars)}, which no declaration in "
                f"{service}/settings.py matches"
            )
            assert module.replace("_", "-") in {d.function for d in matching}, (
                f"{stack}/{logical_id}: {handler} is not built from its own declaration"
            )
            checked += 1
    assert checked >= 16
