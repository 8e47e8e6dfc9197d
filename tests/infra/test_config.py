from __future__ import annotations

import pytest

from infra.config import ConfigError, parse_stage_config


def test_stage_config_merges_defaults_and_stage_values():
    config = parse_stage_config(
        "prod",
        {"consumers": {"batch_size": 10, "max_concurrency": 5}},
        {"prod": {"consumers": {"max_concurrency": 20}, "deletion_protection": True}},
    )
    assert config.consumers.batch_size == 10
    assert config.consumers.max_concurrency == 20
    assert config.deletion_protection is True
    assert config.prefix == "relay-prod"


def test_bad_value_names_the_key_and_the_rule():
    with pytest.raises(
        ConfigError, match=r"stages\.dev\.queues\.max_receive_count: .*greater than or equal to 5"
    ):
        parse_stage_config("dev", {}, {"dev": {"queues": {"max_receive_count": 2}}})


def test_unknown_key_is_refused_as_a_typo():
    with pytest.raises(
        ConfigError, match=r"stages\.dev\.consumers\.batchsize: Extra inputs are not permitted"
    ):
        parse_stage_config("dev", {}, {"dev": {"consumers": {"batchsize": 5}}})


@pytest.mark.parametrize("service", ["payments", "orders"])
def test_a_renamed_key_is_refused_naming_the_new_one(service):
    with pytest.raises(ConfigError, match="legacy_request_keys was renamed request_key_items"):
        parse_stage_config("dev", {}, {"dev": {service: {"legacy_request_keys": True}}})
    config = parse_stage_config("dev", {}, {"dev": {service: {"request_key_items": True}}})
    assert getattr(config, service).request_key_items is True


def test_big_batches_need_a_batching_window():
    with pytest.raises(ConfigError, match="batch_size > 10 requires batching_window_seconds >= 1"):
        parse_stage_config(
            "dev", {}, {"dev": {"consumers": {"batch_size": 50, "batching_window_seconds": 0}}}
        )


def test_unknown_stage_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"stage 'qa' is not defined .* \(known: dev, prod\)"):
        parse_stage_config("qa", {}, {"dev": {}, "prod": {}})


def _app_with(**consumers: object) -> dict[str, object]:
    """The whole app built (no nag) with ``consumers`` overrides; the event source mappings by path."""
    from aws_cdk import App
    from stacks import stage_config

    from infra.app_builder import build_app

    base = stage_config().consumers.model_dump()
    config = stage_config(consumers={**base, **consumers})
    app = App(context={"aws:cdk:enable-path-metadata": True})
    build_app(app, config, nag=False)
    return {
        resource["Metadata"]["aws:cdk:path"]: resource["Properties"]
        for stack in app.synth().stacks
        for resource in stack.template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::EventSourceMapping" and "ScalingConfig" in resource["Properties"]
    }


def test_one_consumer_gets_its_own_concurrency_cap_and_the_others_keep_the_stages():
    mappings = _app_with(max_concurrency=5, max_concurrency_by_consumer={"payments.PaymentWorker": 150})

    caps = {path.split("/")[1]: m["ScalingConfig"]["MaximumConcurrency"] for path, m in mappings.items()}
    assert caps.pop("PaymentWorker") == 150
    assert set(caps.values()) == {5}


def test_a_concurrency_cap_for_a_consumer_that_does_not_exist_fails_synth_naming_it():
    with pytest.raises(ConfigError, match=r"payments\.PaymentWorkr.*Consumers: .*payments\.PaymentWorker"):
        _app_with(max_concurrency_by_consumer={"payments.PaymentWorkr": 50})


def test_a_read_shard_count_is_only_for_a_move_to_fewer_shards():
    parse_stage_config("dev", {}, {"dev": {"payments": {"deadline_shards": 8, "deadline_read_shards": 64}}})
    with pytest.raises(ConfigError, match="FEWER shards"):
        parse_stage_config(
            "dev", {}, {"dev": {"payments": {"deadline_shards": 64, "deadline_read_shards": 8}}}
        )
