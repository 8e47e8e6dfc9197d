"""The two Lambda layers every function carries: the reliability kernel and its third-party dependencies.

Both are built without Docker. The dependency layer is bundled locally (`ILocalBundling`) with
`pip install --platform manylinux2014_aarch64 --only-binary=:all: --require-hashes` from
`layers/dependencies/requirements.txt`, the `layer` group of pyproject.toml exported from uv.lock by
`make lock` (one resolution with the sandbox's and the tests', so the versions are the ones the tests run
on; `tests/infra/test_layers.py` checks that each has an arm64 wheel for Python 3.13). The wheels match
arm64 Lambda whatever machine runs the synth and are the files the export names. The asset hash is taken
from the export's pins and hashes and the target Python and platform, so CDK reuses `cdk.out/asset.<hash>`
instead of re-running pip on every synth.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

ROOT = Path(__file__).resolve().parents[2]

# The Python that CI tests on (the Makefile builds .venv with 3.13, and tests/infra/test_layers.py fails
# when the two drift apart): the tested Python is the deployed Python. Layers and functions share it, so
# the wheels pip picks are the ones the runtime loads.
RUNTIME = lambda_.Runtime.PYTHON_3_13
RUNTIME_PYTHON_VERSION = "3.13"
ARCHITECTURE = lambda_.Architecture.ARM_64
PIP_PLATFORM = "manylinux2014_aarch64"

_ASSET_EXCLUDES = ["__pycache__", "*.pyc", ".mypy_cache", "python/bin"]
# Where each layer is built from; read when a layer is built, so a test can synthesize from a changed copy
# (tests/infra/test_update_safety.py).
KERNEL_SOURCE = ROOT / "layers" / "relay"
DEPENDENCY_SOURCE = ROOT / "layers" / "dependencies"


@jsii.implements(ILocalBundling)
class PipWheelBundling:
    """Installs a lock (every package pinned, with hashes) into `<output>/python` using only prebuilt
    wheels for arm64 Lambda: only the lock's packages (`--no-deps`), each checked against its hashes."""

    def __init__(self, lock: Path, python_version: str = RUNTIME_PYTHON_VERSION) -> None:
        self.lock = lock
        self.python_version = python_version

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        target = Path(output_dir) / "python"
        command = [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-compile", "--platform", PIP_PLATFORM, "--only-binary=:all:", "--implementation", "cp",
            "--python-version", self.python_version, "--target", str(target),
            "--require-hashes", "--no-deps", "-r", str(self.lock),
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
        if result.returncode != 0:
            raise RuntimeError(
                f"building the dependency layer failed (pip exit {result.returncode}) for "
                f"{self.lock}: {result.stderr.strip()[-2000:]}"
            )
        # Lambda loads nothing from these: keep the layer small.
        for pattern in ("bin", "*.dist-info/RECORD"):
            for path in target.glob(pattern):
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        return True


def kernel_layer(scope: Construct, construct_id: str = "KernelLayer") -> lambda_.LayerVersion:
    """`layers/relay/python/relay` → `/opt/python/relay` in Lambda."""
    return lambda_.LayerVersion(
        scope,
        construct_id,
        code=lambda_.Code.from_asset(str(KERNEL_SOURCE), exclude=_ASSET_EXCLUDES),
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        description="Relay reliability kernel (envelope, batch consumption, parking, idempotency, outbox)",
    )


def _dependency_layer_hash(lock: Path) -> str:
    # The export's pins and hashes, not its comments (its header, the "# via" lines), which change
    # without changing the layer.
    lines = (line.strip() for line in lock.read_text().splitlines())
    pins = [line for line in lines if line and not line.startswith("#")]
    digest = hashlib.sha256("\n".join(pins).encode())
    digest.update(f"{PIP_PLATFORM}/cp{RUNTIME_PYTHON_VERSION}".encode())
    return digest.hexdigest()


def dependency_layer(scope: Construct, construct_id: str = "DependencyLayer") -> lambda_.LayerVersion:
    """Third-party runtime dependencies (Powertools, pydantic): `layers/dependencies/requirements.txt`."""
    source = DEPENDENCY_SOURCE
    return lambda_.LayerVersion(
        scope,
        construct_id,
        code=lambda_.Code.from_asset(
            str(source),
            exclude=[*_ASSET_EXCLUDES, "python"],
            # The lock alone does not fix the wheels: a cached layer built for another Python or
            # platform must not be reused when the runtime changes.
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=_dependency_layer_hash(source / "requirements.txt"),
            bundling=BundlingOptions(
                # Never pulled: local bundling always succeeds or raises, so Docker is not needed.
                image=DockerImage.from_registry("public.ecr.aws/sam/build-python3.13"),
                # jsii calls try_bundle(output_dir, options) positionally; its stubs spell the struct
                # out as keywords, which mypy cannot match to an implementation.
                local=PipWheelBundling(source / "requirements.txt"),  # type: ignore[arg-type]
            ),
        ),
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        description="Relay runtime dependencies (aws-lambda-powertools, pydantic), arm64 wheels",
    )
