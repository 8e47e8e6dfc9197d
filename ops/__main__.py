"""``python -m ops <command>``: the operations toolkit (``python -m ops --help`` lists the commands).

Built in: ``status`` (ops/status.py), ``dlq sample|redrive`` (ops/dlq.py), ``doctor`` (ops/doctor.py),
all on the connection and discovery of ops/app.py.

EXTENSION POINT: every other module of the ``ops`` package that defines ``register`` adds its
commands, with no edit here. ``register(subparsers)`` adds subparsers (``add_connection_arguments`` and
``connect`` come from ``ops.app``); ``register(subparsers, add_connection_arguments, connect)`` gets them
passed in. A command sets ``func`` (or ``run``) to a function of the parsed arguments that returns the
exit code. Planned there: ``operation`` and ``order`` (ops/lookup.py), ``replay`` (ops/lookup.py or
ops/replay.py); until a module registers one of them, its name answers with where it will come from.
A module that fails to import is reported and skipped: the other commands still work.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Sequence
from typing import Any

from ops.app import OpsError, add_connection_arguments, connect
from ops.paths import use_function_code

BUILT_IN = ("ops.status", "ops.dlq", "ops.doctor")
NOT_COMMANDS = {"ops.app", "ops.__main__"}
# Commands other modules are to add (see the docstring); shown, and explained, until one does.
PLANNED = {
    "operation": "a payment operation by id: state, steps, outbox rows, parked messages (ops/lookup.py)",
    "order": "an order by id (ops/lookup.py)",
    "replay": "re-drive a stranded operation's current step (ops/lookup.py)",
}


def command_modules() -> list[str]:
    """The built-in command modules, then every other module of the package, by name."""
    import ops

    others = sorted(f"ops.{m.name}" for m in pkgutil.iter_modules(ops.__path__) if not m.name.startswith("_"))
    return [*BUILT_IN, *(m for m in others if m not in BUILT_IN and m not in NOT_COMMANDS)]


def build_parser() -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser with every module's commands, and the modules that could not be loaded (why)."""
    parser = argparse.ArgumentParser(
        prog="python -m ops",
        description="Operate a Relay stage on AWS or in the local sandbox: status, DLQs, doctor. Each "
        "command takes --stage (default dev), --region, --endpoint-url or --local (the running sandbox).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    problems = []
    for name in command_modules():
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # one broken module must not take the others down
            problems.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        register = getattr(module, "register", None)
        if not callable(register):
            continue  # a tool of its own (ops.seed_stock: python -m ops.seed_stock)
        try:
            _call_register(register, subparsers)
        except Exception as exc:
            problems.append(f"{name}: register failed: {type(exc).__name__}: {exc}")
    for command, what in PLANNED.items():
        if command not in subparsers.choices:
            planned = subparsers.add_parser(command, help=f"(not available yet) {what}")
            planned.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            planned.set_defaults(func=_not_yet(command, what))
    return parser, problems


def _call_register(register: Any, subparsers: Any) -> None:
    parameters = [
        p
        for p in inspect.signature(register).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(parameters) >= 3:
        register(subparsers, add_connection_arguments, connect)
    else:
        register(subparsers)


def _not_yet(command: str, what: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        print(f"error: `{command}` is not available in this checkout: {what}", file=sys.stderr)
        return 2

    return run


def main(argv: Sequence[str] | None = None) -> int:
    # The one place the path is set: the commands read the services' items and call the kernel.
    use_function_code()
    parser, problems = build_parser()
    for problem in problems:
        print(f"warning: ops module {problem}; its commands are unavailable", file=sys.stderr)
    args = parser.parse_args(argv)
    run = getattr(args, "func", None) or getattr(args, "run", None)
    if run is None:
        parser.error(f"{args.command}: no command to run")
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    try:
        return int(run(args))
    except OpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except NoRegionError:
        print(
            "error: no AWS region: --region, or AWS_REGION / AWS_DEFAULT_REGION / a profile's region",
            file=sys.stderr,
        )
        return 2
    except NoCredentialsError:
        print(
            "error: no AWS credentials: AWS_PROFILE or AWS_ACCESS_KEY_ID… (or --local for the sandbox)",
            file=sys.stderr,
        )
        return 2
    except (BotoCoreError, ClientError) as exc:
        print(f"error: AWS refused or failed: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
