"""The sandbox's scaled clock (``time_scale``, what chaos runs at): the functions' partner timeouts are
scaled with the functions' own timeouts, as the templates state them, so one hung partner call does not
time out a whole batch where on AWS it would not; an unscaled stage leaves them as deployed."""

from __future__ import annotations

from pathlib import Path

from emulator.provision import FunctionSpec
from local.chaos import TIME_SCALE, TIMEOUT_SLEEP_SECONDS
from local.sandbox import PARTNER_TIMEOUTS, Sandbox, SandboxConfig


def _spec(environment: dict[str, str]) -> FunctionSpec:
    return FunctionSpec(
        name="relay-dev-payments-PaymentWorkerFunction4E210E59",
        logical_id="PaymentWorkerFunction4E210E59",
        stack="relay-dev-payments",
        handler="handler.handler",
        code_dir=Path("."),
        layer_dirs=[],
        environment=environment,
        timeout=60,
        memory=256,
        arn="arn:aws:lambda:us-east-1:123456789012:function:x",
    )


def test_partner_timeouts_follow_the_stages_time_scale_and_the_chaos_hang_outlasts_them() -> None:
    spec = _spec({"LEGACY_TIMEOUT_SECONDS": "10", "HTTP_TIMEOUT_SECONDS": "5", "OTHER": "7"})
    scaled = Sandbox(SandboxConfig(time_scale=TIME_SCALE), log=lambda *_: None)
    env = scaled.function_environment(spec.name, spec)
    assert env["LEGACY_TIMEOUT_SECONDS"] == "3.33" and env["HTTP_TIMEOUT_SECONDS"] == "1.67"
    assert "OTHER" not in env and "NOTICE_TIMEOUT_SECONDS" not in env  # only what the template has
    # A chaos hang is still longer than every scaled client timeout: the fault stays a timeout.
    assert TIMEOUT_SLEEP_SECONDS > max(float(env[v]) for v in PARTNER_TIMEOUTS if v in env)

    plain = Sandbox(SandboxConfig(), log=lambda *_: None)
    assert not set(plain.function_environment(spec.name, spec)) & set(PARTNER_TIMEOUTS)
