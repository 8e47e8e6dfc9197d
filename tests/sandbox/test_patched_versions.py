"""The packages whose internals the emulator's patches (`emulator.patches`) replace are pinned, at the
versions the patches name, and those are the versions installed (the emulator refuses to start
otherwise, naming the patch modules to re-check)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from emulator import moto_patches

ROOT = Path(__file__).resolve().parents[2]


def test_every_patched_package_is_pinned_at_the_version_the_patches_name():
    text = (ROOT / "requirements-sandbox.txt").read_text()
    pins = {m[1].lower(): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)", text, re.M)}
    assert {name: pins.get(name) for name in moto_patches.PATCHED_VERSIONS} == moto_patches.PATCHED_VERSIONS


def test_every_patch_module_names_the_pinned_versions():
    named = {(package, v) for m in moto_patches.PATCH_MODULES for package, v in m.PATCHES.items()}
    assert named == set(moto_patches.PATCHED_VERSIONS.items())


def test_the_installed_versions_are_the_patched_ones():
    moto_patches.check_patched_versions()


def test_a_package_that_moved_names_the_patch_modules_to_recheck():
    moved = {"moto": "5.2.5", "werkzeug": "3.2.0"}
    with pytest.raises(moto_patches.PatchedVersionMismatch) as refused:
        moto_patches.check_patched_versions(installed=moved.__getitem__)
    message = str(refused.value)
    assert "werkzeug 3.2.0 is installed, re-check emulator.patches.keep_alive (werkzeug 3.1.9)." in message
    assert "moto 5" not in message  # moto did not move
    assert "`make install` installs the locked versions" in message


def test_when_moto_moves_every_patch_module_is_named():
    moved = {"moto": "5.3.0", "werkzeug": "3.1.9"}
    with pytest.raises(moto_patches.PatchedVersionMismatch) as refused:
        moto_patches.check_patched_versions(installed=moved.__getitem__)
    message = str(refused.value)
    assert message.count("(moto 5.2.5)") == len(moto_patches.PATCH_MODULES)
    assert all(f"{m.__name__} (moto 5.2.5)" in message for m in moto_patches.PATCH_MODULES)
    assert "werkzeug" not in message.split("`make install`")[0]
