"""The packages whose internals `local.moto_patches` replaces are pinned, at the versions the patches name,
and those are the versions installed (the emulator refuses to start otherwise)."""

from __future__ import annotations

import re
from pathlib import Path

from local import moto_patches

ROOT = Path(__file__).resolve().parents[2]


def test_every_patched_package_is_pinned_at_the_version_the_patches_name():
    text = (ROOT / "requirements-sandbox.txt").read_text()
    pins = {m[1].lower(): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)", text, re.M)}
    assert {name: pins.get(name) for name in moto_patches.PATCHED_VERSIONS} == moto_patches.PATCHED_VERSIONS


def test_the_installed_versions_are_the_patched_ones():
    moto_patches.check_patched_versions()
