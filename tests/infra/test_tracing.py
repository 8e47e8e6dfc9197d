"""Tracing, read off the synthesized app: every function has active tracing (Lambda records each invocation
in X-Ray), its role may send trace data (``xray:PutTraceSegments`` also authorizes the kernel's
OpenTelemetry spans on X-Ray's OTLP endpoint, relay.tracing), and no function's environment turns the
OpenTelemetry SDK off on AWS."""

from __future__ import annotations

from typing import Any

XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def _functions(app_templates: dict[str, dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (stack, logical_id, template)
        for stack, template in sorted(app_templates.items())
        for logical_id, resource in sorted(template["Resources"].items())
        if resource["Type"] == "AWS::Lambda::Function"
    ]


def _actions_on_every_resource(template: dict[str, Any], function_id: str) -> set[str]:
    """The actions the function's role is granted on ``*``."""
    resources = template["Resources"]
    role = resources[function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    granted: set[str] = set()
    for resource in resources.values():
        if resource["Type"] != "AWS::IAM::Policy" or {"Ref": role} not in resource["Properties"]["Roles"]:
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            targets = (
                statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            )
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if statement["Effect"] == "Allow" and "*" in targets:
                granted |= set(actions)
    return granted


def test_every_function_has_active_tracing(app_templates: dict[str, dict[str, Any]]) -> None:
    functions = _functions(app_templates)
    assert len(functions) >= 16
    untraced = [
        f"{stack}/{function_id}: {template['Resources'][function_id]['Properties'].get('TracingConfig')}"
        for stack, function_id, template in functions
        if template["Resources"][function_id]["Properties"].get("TracingConfig") != {"Mode": "Active"}
    ]
    assert not untraced, "without TracingConfig Active, X-Ray records nothing:\n" + "\n".join(untraced)


def test_every_function_role_may_send_its_trace_segments(app_templates: dict[str, dict[str, Any]]) -> None:
    missing = [
        f"{stack}/{function_id}: {sorted(XRAY_ACTIONS - _actions_on_every_resource(template, function_id))}"
        for stack, function_id, template in _functions(app_templates)
        if not XRAY_ACTIONS <= _actions_on_every_resource(template, function_id)
    ]
    assert not missing, "active tracing needs both X-Ray actions on *:\n" + "\n".join(missing)


def test_no_function_turns_its_tracer_off(app_templates: dict[str, dict[str, Any]]) -> None:
    # The tests set OTEL_SDK_DISABLED (no OTLP endpoint); AWS must not. Nor the retired Tracer's switch.
    disabled = [
        f"{stack}/{function_id}"
        for stack, function_id, template in _functions(app_templates)
        if {"OTEL_SDK_DISABLED", "POWERTOOLS_TRACE_DISABLED"}
        & set(template["Resources"][function_id]["Properties"].get("Environment", {}).get("Variables", {}))
    ]
    assert not disabled, disabled


def test_every_function_samples_whole_traces_at_the_stages_rate(
    app_templates: dict[str, dict[str, Any]],
) -> None:
    # Parent-based: the API's root span decides, every consumer follows the traceparent's sampled flag,
    # so a trace is kept or dropped whole; 1 % by default (defaults.CONSUMERS.trace_sample_rate).
    from infra.constructs import defaults

    wrong = {
        f"{stack}/{function_id}": (
            variables.get("OTEL_TRACES_SAMPLER"),
            variables.get("OTEL_TRACES_SAMPLER_ARG"),
        )
        for stack, function_id, template in _functions(app_templates)
        for variables in [
            template["Resources"][function_id]["Properties"].get("Environment", {}).get("Variables", {})
        ]
        if (variables.get("OTEL_TRACES_SAMPLER"), variables.get("OTEL_TRACES_SAMPLER_ARG"))
        != ("parentbased_traceidratio", f"{defaults.CONSUMERS.trace_sample_rate:g}")
    }
    assert not wrong, wrong
