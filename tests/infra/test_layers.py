from __future__ import annotations

import re
import sys
import tomllib
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


def _layer_pins() -> dict[str, str]:
    export = (ROOT / "layers" / "dependencies" / "requirements.txt").read_text()
    return dict(re.findall(r"^([a-z0-9][a-z0-9._-]*)==([^\s;]+)", export, re.M))


def _runs_on_lambda(wheel: str) -> bool:
    """A wheel file name whose tags pip accepts for PIP_PLATFORM and cp<RUNTIME_PYTHON_VERSION>."""
    python, abi, platform = wheel.removesuffix(".whl").split("-")[-3:]
    cp = f"cp{RUNTIME_PYTHON_VERSION.replace('.', '')}"
    policy, _, machine = PIP_PLATFORM.partition("_")  # manylinux2014_aarch64
    pythons = set(python.split("."))
    python_ok = bool({"py3", cp} & pythons) or (
        abi == "abi3" and any(p.startswith("cp3") and int(p[3:]) <= int(cp[3:]) for p in pythons)
    )
    platform_ok = platform == "any" or any(
        tag.endswith(machine) and (tag.startswith((policy, "manylinux_2_17", "manylinux_2_5", "manylinux1")))
        for tag in platform.split(".")
    )
    return python_ok and abi in ("none", "abi3", cp) and platform_ok


def test_every_layer_package_has_a_wheel_for_the_lambda_platform_and_python_in_the_lock():
    # The layer is installed wheels only (pip --only-binary) for arm64 Lambda: a pinned version without
    # such a wheel would fail the synth, or worse, ship a wheel built for another machine.
    locked = {
        (package["name"], package["version"]): [Path(w["url"]).name for w in package.get("wheels", [])]
        for package in tomllib.loads((ROOT / "uv.lock").read_text())["package"]
        if "version" in package
    }
    pins = _layer_pins()
    assert {"boto3", "aws-lambda-powertools", "pydantic", "pydantic-core"} <= set(pins)
    missing = [f"{n}=={v}" for n, v in pins.items() if not any(_runs_on_lambda(w) for w in locked[(n, v)])]
    assert missing == []


def test_the_wheel_check_tells_lambda_wheels_from_others():
    assert _runs_on_lambda(
        "pydantic_core-2.41.5-cp313-cp313-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"
    )
    assert _runs_on_lambda("boto3-1.44.8-py3-none-any.whl")
    assert not _runs_on_lambda(
        "pydantic_core-2.41.5-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    )
    assert not _runs_on_lambda(
        "pydantic_core-2.41.5-cp312-cp312-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"
    )
    assert not _runs_on_lambda("x-1.0-cp313-cp313-manylinux_2_28_aarch64.whl")  # needs a newer glibc


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
