"""The patches that make moto usable as a long-running emulator, applied together. Shared by the sandbox's
moto server process (`install_for_server`, which `emulator.server` runs) and the in-process tests and
benches, so both run the same code.

Each patch is one module of `emulator.patches`; its docstring says what moto does, what AWS does (with
the documentation), whether the change is worth sending upstream (the write-ups are in docs/upstream/),
and which package versions it patches (`PATCHES`). The patches keep the numbers they have always had:

 1. untrack_models         moto's registry of every model object it creates, off
 2. dynamodb_transactions  TransactWriteItems all-or-nothing without snapshots of its tables
 3. dynamodb_lock          every DynamoDB write, and the reads, under one lock: conditions atomic
 4. routing                request routing without per-request directory listings; no access log
 5. sns_signing_cert       SNS signs every message to a subscription with one certificate
 6. json_results           DynamoDB's and SQS's data-plane results written as JSON directly
 7. sqs_queue_attributes   SQS receives without recomputing every queue attribute per message
 8. keep_alive             HTTP/1.1 connections kept open by moto's server (werkzeug)
 9. backend_lookup         a service backend looked up without moto's global lock
10. message_move_tasks     SQS DLQ redrive: StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask
11. client_request_token   TransactWriteItems' ClientRequestToken honoured
12. partition_query        a table Query reads its partition alone
13. update_asts            update expressions validated without a deep copy of the parsed tree
14. firehose_delivery      SNS delivers to Firehose subscriptions; Firehose writes S3 objects as AWS does
15. fast_traversal         DynamoDB expression trees walked with each node's class looked up once
16. alarm_rules            CloudWatch alarms start INSUFFICIENT_DATA; PutMetricAlarm refuses what AWS refuses

They replace internals of moto 5.2.5 and werkzeug 3.1.9, which change between releases without notice:
`PATCHED_VERSIONS` names them, requirements-sandbox.txt pins them, and `check_patched_versions` refuses
others, naming the patch modules to re-check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version
from types import ModuleType

from emulator.patches import (
    alarm_rules,
    backend_lookup,
    client_request_token,
    dynamodb_lock,
    dynamodb_transactions,
    fast_traversal,
    firehose_delivery,
    json_results,
    keep_alive,
    message_move_tasks,
    partition_query,
    routing,
    sns_signing_cert,
    sqs_queue_attributes,
    untrack_models,
    update_asts,
)

# The versions the patches were written and tested for (tests/sandbox/patches/). A new version means
# re-reading the patched code: then bump each patch module's PATCHES as it is re-checked, and these and
# requirements-sandbox.txt together.
PATCHED_VERSIONS = {"moto": "5.2.5", "werkzeug": "3.1.9"}

# Every patch module, in the order `install_for_server` applies them. Patch 2 before 3 (the lock wraps
# the new TransactWriteItems), 3 before 11 (the token map uses its lock), 10 before 4 (routing caches
# each handler's methods), 8 last (it imports moto.server).
PATCH_MODULES: tuple[ModuleType, ...] = (
    untrack_models,
    dynamodb_transactions,
    dynamodb_lock,
    client_request_token,
    message_move_tasks,
    routing,
    sns_signing_cert,
    firehose_delivery,
    json_results,
    sqs_queue_attributes,
    backend_lookup,
    partition_query,
    update_asts,
    fast_traversal,
    alarm_rules,
    keep_alive,
)

# The patches that only make the emulator faster and that `bench/sandbox_bench.py` leaves out for its
# baseline (``RELAY_SANDBOX_BASELINE=1``, read by ``install_for_server``): what the bench's "before"
# measures, in the same run as its "after".
BASELINE_SKIPS: tuple[ModuleType, ...] = (fast_traversal,)
BASELINE_VARIABLE = "RELAY_SANDBOX_BASELINE"


def baseline() -> bool:
    """Whether this process runs the sandbox as it was before the speed-ups of issue 47 (bench only)."""
    import os

    return os.environ.get(BASELINE_VARIABLE) == "1"


class PatchedVersionMismatch(RuntimeError):
    """An installed package is not the version a patch was written against."""


def check_patched_versions(installed: Callable[[str], str] = version) -> None:
    """Fail loudly, before patching, when an installed package is not the version a patch module was
    written against (its PATCHES): the error names, per package, the modules to re-check."""
    found: dict[str, str] = {}
    stale: dict[str, list[str]] = {}
    for module in PATCH_MODULES:
        for package, patched in module.PATCHES.items():
            if package not in found:
                found[package] = installed(package)
            if found[package] != patched:
                stale.setdefault(package, []).append(f"{module.__name__} ({package} {patched})")
    if stale:
        raise PatchedVersionMismatch(
            "the emulator's moto patches were written against other versions than those installed: "
            + "; ".join(
                f"{package} {found[package]} is installed, re-check {', '.join(modules)}"
                for package, modules in stale.items()
            )
            + ". `make install` installs the locked versions; to move to others, re-check each module named "
            "against them, then update its PATCHES, emulator/moto_patches.py's PATCHED_VERSIONS and "
            "requirements-sandbox.txt together"
        )


def install_for_server() -> None:
    """All patches, for the lifetime of a moto server process. (Not through the context manager: a
    generator-based one that is garbage-collected runs its `finally` and would undo the patch.)"""
    check_patched_versions()
    skipped = BASELINE_SKIPS if baseline() else ()
    for module in PATCH_MODULES:
        if module not in skipped:
            module.install()


@contextmanager
def fast_atomic_dynamodb() -> Iterator[None]:
    """Patches 2, 3 and 11 for the duration of the block: what the in-process pipeline test runs
    (tests/handlers/payments/pipeline.py) and the transactions bench measures."""
    removes = [dynamodb_transactions.install(), dynamodb_lock.install(), client_request_token.install()]
    try:
        yield
    finally:
        for remove in reversed(removes):
            remove()
