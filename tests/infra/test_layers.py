from __future__ import annotations

import sys
from pathlib import Path

import boto3
import botocore

from infra.constructs.layers import PIP_PLATFORM, ROOT, RUNTIME, RUNTIME_PYTHON_VERSION


def _layer_dir(synthesized, name: str) -> Path:
    payments = synthesized.assembly.get_stack_by_name("relay-dev-payments")
    (layer,) = [
        r
        for r in payments.template["Resources"].values()
        if r["Type"] == "AWS::Lambda::LayerVersion" and name in r["Metadata"]["aws:cdk:path"]
    ]
    asset_hash = layer["Properties"]["Content"]["S3Key"].removesuffix(".zip")
    return Path(synthesized.assembly.directory, f"asset.{asset_hash}")


def test_dependency_layer_holds_arm64_wheels_for_the_lambda_python(synthesized):
    python = _layer_dir(synthesized, "DependencyLayer") / "python"
    assert (python / "aws_lambda_powertools").is_dir()
    (core_ext,) = list((python / "pydantic_core").glob("_pydantic_core*.so"))
    assert f"cpython-{RUNTIME_PYTHON_VERSION.replace('.', '')}-aarch64-linux-gnu" in core_ext.name


def test_the_dependency_layer_ships_the_sdk_the_tests_run_on(synthesized):
    # Lambda puts /opt/python ahead of the runtime's own boto3: the layer's copy is the one loaded.
    python = _layer_dir(synthesized, "DependencyLayer") / "python"
    for package, module in (("boto3", boto3), ("botocore", botocore)):
        assert (python / package / "__init__.py").is_file(), package
        assert (python / f"{package}-{module.__version__}.dist-info").is_dir(), (package, module.__version__)


# Lambda quotas: "250 MB (unzipped)" for a function's deployment package, "all the files you upload,
# including layers and custom runtimes" (docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024


def _unzipped_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def test_every_function_with_its_layers_fits_lambdas_unzipped_size_limit(synthesized):
    sizes: dict[str, int] = {}
    for stack in synthesized.assembly.stacks:
        resources = stack.template["Resources"]
        for logical_id, resource in resources.items():
            if resource["Type"] != "AWS::Lambda::Function" or "S3Key" not in resource["Properties"]["Code"]:
                continue
            keys = [resource["Properties"]["Code"]["S3Key"]]
            keys += [
                resources[layer["Ref"]]["Properties"]["Content"]["S3Key"]
                for layer in resource["Properties"].get("Layers", [])
            ]
            sizes[f"{stack.stack_name}/{logical_id}"] = sum(
                _unzipped_bytes(Path(synthesized.assembly.directory, f"asset.{key.removesuffix('.zip')}"))
                for key in keys
            )
    assert len(sizes) > 20
    largest = max(sizes, key=sizes.__getitem__)
    assert sizes[largest] <= LAMBDA_UNZIPPED_LIMIT, f"{largest}: {sizes[largest]:,} bytes unzipped"


def test_the_layer_lock_is_resolved_for_the_lambda_platform_and_python():
    # scripts/locks.py records what it resolved the lock for; pip then installs it for PIP_PLATFORM.
    header = (ROOT / "layers" / "dependencies" / "requirements.lock").read_text()
    policy, _, machine = PIP_PLATFORM.partition("_")  # manylinux2014_aarch64 -> aarch64-manylinux2014
    assert f"resolution: python {RUNTIME_PYTHON_VERSION}, platform {machine}-{policy}, wheels only" in header


def test_kernel_layer_ships_the_relay_package_under_python(synthesized):
    assert (_layer_dir(synthesized, "KernelLayer") / "python" / "relay" / "__init__.py").is_file()


def test_every_stack_with_functions_builds_its_own_two_layers_from_the_same_assets(app_templates):
    # A layer's ARN changes with its content; imported from another stack it would block the update
    # (infra/stacks/base.py). Each stack's functions use that stack's own layers, built from one asset each.
    assets: dict[str, set[str]] = {}
    for stack, template in app_templates.items():
        resources = template["Resources"]
        own = {k: r for k, r in resources.items() if r["Type"] == "AWS::Lambda::LayerVersion"}
        functions = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Function"]
        assert len(own) == (2 if functions else 0), stack
        for logical_id, layer in own.items():
            props = layer["Properties"]
            assert props["CompatibleArchitectures"] == ["arm64"]
            assert props["CompatibleRuntimes"] == ["python3.13"]
            name = "KernelLayer" if logical_id.startswith("KernelLayer") else "DependencyLayer"
            assets.setdefault(name, set()).add(props["Content"]["S3Key"])
        for function in functions:
            assert sorted(ref["Ref"] for ref in function["Properties"]["Layers"]) == sorted(own), stack
    assert {name: len(keys) for name, keys in assets.items()} == {"KernelLayer": 1, "DependencyLayer": 1}


def test_the_deployed_python_is_the_python_these_tests_run_on():
    # Lambda runs what the layers were built for; a suite on another Python proves nothing about it.
    assert RUNTIME_PYTHON_VERSION == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert RUNTIME.name == f"python{RUNTIME_PYTHON_VERSION}"
