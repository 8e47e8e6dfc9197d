"""``emulator.moto_patches``, the patches applied together: every patch module of ``emulator.patches`` is
installed by the server, and states what moto does, what AWS does, whether it goes upstream and what it
patches; ``fast_atomic_dynamodb`` (patches 2, 3 and 11, what the in-process pipeline test runs) agrees
with moto's own TransactWriteItems and leaves moto as it found it. Each patch's own behaviour, with and
without it, is tested in tests/sandbox/patches/."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

from emulator import moto_patches
from emulator.patches import client_request_token, dynamodb_lock, dynamodb_transactions
from tests.sandbox.patches.support import (
    assert_agrees_with_moto_but_cancels_a_write_invalid_for_the_stored_item,
    transactions_run_by,
)

PATCHES_DIR = Path(moto_patches.__file__).parent / "patches"
PARTS = ("moto's behaviour:", "AWS's behaviour:", "Upstream:", "Patches:")


def test_the_server_installs_every_patch_module_once() -> None:
    on_disk = {p.stem for p in PATCHES_DIR.glob("*.py") if p.stem != "__init__"}
    installed = [m.__name__.rsplit(".", 1)[1] for m in moto_patches.PATCH_MODULES]
    assert sorted(installed) == sorted(on_disk)
    assert all(callable(m.install) for m in moto_patches.PATCH_MODULES)


def test_the_patches_keep_their_numbers() -> None:
    """Docs and commit messages say "patch 11": the list in moto_patches' docstring and each module's
    title agree on the numbers."""
    listed = dict(re.findall(r"^\s*(\d+)\. (\w+)", moto_patches.__doc__ or "", re.M))
    assert sorted(map(int, listed)) == list(range(1, len(moto_patches.PATCH_MODULES) + 1))
    for number, name in listed.items():
        doc = (PATCHES_DIR / f"{name}.py").read_text()
        assert f"(patch {number})" in doc.split("\n\n", 1)[0], name


@pytest.mark.parametrize("module", moto_patches.PATCH_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_each_patch_states_motos_behaviour_aws_behaviour_upstream_and_what_it_patches(module: object) -> None:
    doc = module.__doc__ or ""
    starts = [doc.find(f"\n\n{part}") for part in PARTS]
    assert -1 not in starts and starts == sorted(starts), f"the parts, in order: {PARTS}"
    moto, aws, upstream, patches = (doc[a:b] for a, b in zip(starts, [*starts[1:], len(doc)], strict=True))
    assert ".py" in moto, "moto's behaviour names the file of the function it replaces"
    assert "performance only: AWS's behaviour is unchanged" in aws or "https://docs.aws.amazon.com/" in aws
    assert re.match(r"\n\nUpstream: (yes|no)\. ", upstream)
    for package, version in module.PATCHES.items():  # type: ignore[attr-defined]
        assert f"{package} {version}" in patches


def test_fast_atomic_dynamodb_is_patches_2_3_and_11_and_leaves_moto_as_it_was() -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    names = ["put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item"]
    names += ["get_item", "query", "scan"]
    motos = {name: getattr(DynamoDBBackend, name) for name in names}
    handler = (DynamoHandler.transact_write_items, DynamoHandler.transact_get_items)
    with moto_patches.fast_atomic_dynamodb():
        locked = DynamoDBBackend.transact_write_items
        assert locked.__wrapped__ is dynamodb_transactions.transact_write_items  # type: ignore[attr-defined]
        assert all(
            getattr(DynamoDBBackend, n).__wrapped__ is motos[n] for n in names if n != "transact_write_items"
        )
        assert DynamoHandler.transact_write_items.__wrapped__ is handler[0]  # type: ignore[attr-defined]
        assert DynamoHandler.transact_get_items.__wrapped__ is handler[1]  # type: ignore[attr-defined]
        assert dynamodb_lock.WRITE_LOCK is client_request_token.WRITE_LOCK
    assert {name: getattr(DynamoDBBackend, name) for name in names} == motos
    assert (DynamoHandler.transact_write_items, DynamoHandler.transact_get_items) == handler


def test_the_combined_dynamodb_patches_agree_with_motos_own_transactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    assert_agrees_with_moto_but_cancels_a_write_invalid_for_the_stored_item(
        patched=transactions_run_by(moto_patches.fast_atomic_dynamodb),
        motos=transactions_run_by(contextlib.nullcontext),
    )
