"""Builds the whole Relay app; `app.py` and the infra tests share it so tests check what ships."""

from __future__ import annotations

from aws_cdk import App, Environment, Tags, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import StageConfig, cdk_json_context, load_stage_config
from infra.stacks.base import RelayStack
from infra.stacks.core import CoreStack
from infra.stacks.loyalty import LoyaltyStack
from infra.stacks.orders import OrdersStack
from infra.stacks.payments import PaymentsStack
from infra.stacks.reports import ReportsStack
from infra.stacks.scores import ScoresStack
from infra.validation import RelayGuards


def build_app(app: App, config: StageConfig | None = None, *, nag: bool = True) -> dict[str, RelayStack]:
    if app.node.try_get_context("aws:cdk:enable-path-metadata") is None:
        # The CLI sets this; a plain `python app.py` (tests) would otherwise omit aws:cdk:path and the
        # guards could only name logical ids.
        app.node.set_context("aws:cdk:enable-path-metadata", True)
    # The CLI passes cdk.json's feature flags; an app built without it (tests, `python app.py`) takes them
    # from cdk.json, so every synth builds the templates `cdk deploy` would.
    for flag, value in cdk_json_context().items():
        if flag.startswith("@aws-cdk") and app.node.try_get_context(flag) is None:
            app.node.set_context(flag, value)
    config = config or load_stage_config(app)
    env = Environment(account=config.account, region=config.region)
    core = CoreStack(app, f"{config.prefix}-core", config=config, env=env)
    stacks: dict[str, RelayStack] = {"core": core}
    platform = core.platform
    payments = PaymentsStack(app, f"{config.prefix}-payments", config=config, platform=platform, env=env)
    stacks["payments"] = payments
    reports = ReportsStack(app, f"{config.prefix}-reports", config=config, platform=platform, env=env)
    stacks["reports"] = reports
    stacks["scores"] = ScoresStack(
        app,
        f"{config.prefix}-scores",
        config=config,
        platform=platform,
        verifications=reports.verifications,
        env=env,
    )
    stacks["orders"] = OrdersStack(
        app,
        f"{config.prefix}-orders",
        config=config,
        platform=platform,
        payment_events=payments.topic,
        env=env,
    )
    stacks["loyalty"] = LoyaltyStack(
        app, f"{config.prefix}-loyalty", config=config, platform=platform, env=env
    )
    _known_consumers(app, config)
    Tags.of(app).add("app", "relay")
    Tags.of(app).add("stage", config.stage)
    if nag:
        # cdk-nag 3 is a policy-validation plugin; the Aspects form of cdk-nag 2 fails with it.
        Validations.of(app).add_plugins(AwsSolutionsChecks(app), RelayGuards())
    else:
        Validations.of(app).add_plugins(RelayGuards())
    return stacks


def _known_consumers(app: App, config: StageConfig) -> None:
    """A stage config that caps a consumer by a name no consumer has (a typo) fails synth, naming them."""
    from infra.config import ConfigError
    from infra.constructs.queue_consumer import QueueConsumer, consumer_name

    built = {
        consumer_name(c.node.scope, c.node.id)  # type: ignore[arg-type]
        for c in app.node.find_all()
        if isinstance(c, QueueConsumer)
    }
    unknown = sorted(set(config.consumers.max_concurrency_by_consumer) - built)
    if unknown:
        raise ConfigError(
            f"consumers.max_concurrency_by_consumer names no consumer: {', '.join(unknown)}. "
            f"Consumers: {', '.join(sorted(built))}"
        )
