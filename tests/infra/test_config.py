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


def test_big_batches_need_a_batching_window():
    with pytest.raises(ConfigError, match="batch_size > 10 requires batching_window_seconds >= 1"):
        parse_stage_config(
            "dev", {}, {"dev": {"consumers": {"batch_size": 50, "batching_window_seconds": 0}}}
        )


def test_unknown_stage_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"stage 'qa' is not defined .* \(known: dev, prod\)"):
        parse_stage_config("qa", {}, {"dev": {}, "prod": {}})
