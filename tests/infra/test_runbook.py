"""Every alarm tells the operator what to run, and what it names exists (``python -m ops --help``)."""

from __future__ import annotations

import re
from typing import Any

COMMAND = re.compile(r"python -m ops ([a-z-]+)(?: ([a-z-]+))?")


def _descriptions(app_templates: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {
        f"{stack}/{logical_id}": resource["Properties"].get("AlarmDescription", "")
        for stack, template in app_templates.items()
        for logical_id, resource in template.get("Resources", {}).items()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
    }


def _commands() -> dict[str, set[str]]:
    """Each ops command and its sub-commands, from the CLI's own parser."""
    import argparse

    from ops.__main__ import build_parser

    parser, problems = build_parser()
    assert not problems, problems
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found: dict[str, set[str]] = {}
    for name, sub in commands.choices.items():
        nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        found[name] = set(nested[0].choices) if nested else set()
    return found


def test_every_alarm_names_an_ops_command_that_exists(app_templates: dict[str, dict[str, Any]]) -> None:
    commands = _commands()
    descriptions = _descriptions(app_templates)
    assert len(descriptions) > 40
    for alarm, text in descriptions.items():
        named = COMMAND.findall(text)
        assert named, f"{alarm}: its description names no `python -m ops …` command: {text!r}"
        for command, sub in named:
            assert command in commands, f"{alarm}: `python -m ops {command}` does not exist"
            if commands[command]:
                assert sub in commands[command], f"{alarm}: `python -m ops {command} {sub}` does not exist"
