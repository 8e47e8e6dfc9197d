from __future__ import annotations

import sys
from pathlib import Path

from infra.constructs.layers import PIP_PLATFORM, ROOT, RUNTIME, RUNTIME_PYTHON_VERSION


def _layer_dir(synthesized, name: str) -> Path:
    core = synthesized.assembly.get_stack_by_name("relay-dev-core")
    (layer,) = [
        r
        for r in core.template["Resources"].values()
        if r["Type"] == "AWS::Lambda::LayerVersion" and name in r["Metadata"]["aws:cdk:path"]
    ]
    asset_hash = layer["Properties"]["Content"]["S3Key"].removesuffix(".zip")
    return Path(synthesized.assembly.directory, f"asset.{asset_hash}")


def test_dependency_layer_holds_arm64_wheels_for_the_lambda_python(synthesized):
    python = _layer_dir(synthesized, "DependencyLayer") / "python"
    assert (python / "aws_lambda_powertools").is_dir()
    (core_ext,) = list((python / "pydantic_core").glob("_pydantic_core*.so"))
    assert f"cpython-{RUNTIME_PYTHON_VERSION.replace('.', '')}-aarch64-linux-gnu" in core_ext.name
    # Lambda provides boto3 and botocore: the layer does not carry its own.
    assert not [p.name for p in python.iterdir() if p.name.split("-")[0] in ("boto3", "botocore")]


def test_the_layer_lock_is_resolved_for_the_lambda_platform_and_python():
    # scripts/locks.py records what it resolved the lock for; pip then installs it for PIP_PLATFORM.
    header = (ROOT / "layers" / "dependencies" / "requirements.lock").read_text()
    policy, _, machine = PIP_PLATFORM.partition("_")  # manylinux2014_aarch64 -> aarch64-manylinux2014
    assert f"resolution: python {RUNTIME_PYTHON_VERSION}, platform {machine}-{policy}, wheels only" in header


def test_kernel_layer_ships_the_relay_package_under_python(synthesized):
    assert (_layer_dir(synthesized, "KernelLayer") / "python" / "relay" / "__init__.py").is_file()


def test_layers_are_for_arm64_and_the_function_runtime(synthesized):
    core = synthesized.assembly.get_stack_by_name("relay-dev-core")
    layers = [
        r["Properties"]
        for r in core.template["Resources"].values()
        if r["Type"] == "AWS::Lambda::LayerVersion"
    ]
    assert len(layers) == 2
    for layer in layers:
        assert layer["CompatibleArchitectures"] == ["arm64"]
        assert layer["CompatibleRuntimes"] == ["python3.13"]


def test_the_deployed_python_is_the_python_these_tests_run_on():
    # Lambda runs what the layers were built for; a suite on another Python proves nothing about it.
    assert RUNTIME_PYTHON_VERSION == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert RUNTIME.name == f"python{RUNTIME_PYTHON_VERSION}"
