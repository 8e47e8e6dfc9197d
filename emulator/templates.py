"""Read the synthesized cloud assembly (``cdk.out``) and resolve CloudFormation intrinsics.

The sandbox deploys the very templates ``cdk deploy`` uses. CDK emits a small set of intrinsics
(Ref, Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select, Fn::Split, Fn::ImportValue); the resolver handles
those against the physical ids the provisioner records, and says which reference it could not
resolve instead of deploying a half-resolved value.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.server import ACCOUNT_ID, REGION


class Unresolved(Exception):
    """A reference to something the sandbox has not (or cannot) materialize."""


@dataclass
class Stack:
    name: str
    template: dict[str, Any]
    path: Path

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return dict(self.template.get("Resources", {}))

    @property
    def outputs(self) -> dict[str, dict[str, Any]]:
        return dict(self.template.get("Outputs", {}))

    def imports(self) -> set[str]:
        return set(_find_key(self.template.get("Resources", {}), "Fn::ImportValue"))

    def exports(self) -> set[str]:
        names = set()
        for output in self.outputs.values():
            export = output.get("Export", {}).get("Name")
            if isinstance(export, str):
                names.add(export)
        return names


def _find_key(value: Any, key: str) -> Iterable[Any]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == key:
                yield v
            else:
                yield from _find_key(v, key)
    elif isinstance(value, list):
        for item in value:
            yield from _find_key(item, key)


def is_stale(cdk_out: Path, project_root: Path, sources: Iterable[str]) -> bool:
    """True when cdk.out is missing or older than any source file of the app: ``sources`` are the
    files and folders under ``project_root`` the app is synthesized from."""
    manifest = cdk_out / "manifest.json"
    if not manifest.exists() or not list(cdk_out.glob("*.template.json")):
        return True
    built = manifest.stat().st_mtime
    for name in sources:
        path = project_root / name
        if path.is_file() and path.stat().st_mtime > built:
            return True
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = [d for d in dirs if d not in ("__pycache__", ".mypy_cache")]
                for file in files:
                    if file.endswith((".py", ".json", ".txt")) and Path(root, file).stat().st_mtime > built:
                        return True
    return False


def synth(cdk_out: Path, project_root: Path) -> None:
    """``cdk synth`` into ``cdk_out`` (the same command ``make synth`` runs)."""
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run(
        ["npx", "cdk", "synth", "--quiet", "-o", str(cdk_out)],
        cwd=project_root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"cdk synth failed (exit {result.returncode}):\n{result.stderr[-4000:]}")


def load_stacks(cdk_out: Path) -> list[Stack]:
    """Every stack template in the assembly, ordered so a stack comes after the exports it imports."""
    stacks = [
        Stack(path.name.removesuffix(".template.json"), json.loads(path.read_text()), path)
        for path in sorted(cdk_out.glob("*.template.json"))
    ]
    ordered: list[Stack] = []
    exported: set[str] = set()
    pending = list(stacks)
    while pending:
        ready = [s for s in pending if s.imports() <= exported]
        if not ready:
            missing = {s.name: sorted(s.imports() - exported) for s in pending}
            raise Unresolved(f"stacks import values no stack exports: {missing}")
        for stack in ready:
            ordered.append(stack)
            exported |= stack.exports()
            pending.remove(stack)
    return ordered


def asset_dir(cdk_out: Path, code: Mapping[str, Any]) -> Path:
    """The local directory of a Lambda Code / LayerVersion Content (``S3Key: <hash>.zip``)."""
    key = code.get("S3Key")
    if not isinstance(key, str):
        raise Unresolved(f"code without an S3Key asset (inline code is not supported locally): {code}")
    path = cdk_out / f"asset.{key.removesuffix('.zip')}"
    if not path.is_dir():
        raise Unresolved(f"asset directory {path} is missing; re-run cdk synth")
    return path


@dataclass
class Physical:
    """What a provisioned resource answers to ``Ref`` and ``Fn::GetAtt``."""

    ref: str
    attrs: dict[str, Any] = field(default_factory=dict)


class Resolver:
    """Resolves intrinsics of one stack against the resources provisioned so far."""

    def __init__(self, stack: Stack, physical: dict[str, Physical], exports: dict[str, Any]) -> None:
        self.stack = stack
        self.physical = physical
        self.exports = exports

    def pseudo(self, name: str) -> str | None:
        return {
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::Region": REGION,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack.name,
            "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/{self.stack.name}/local",
            "AWS::NoValue": None,
        }.get(name, "")

    def ref(self, name: str) -> Any:
        if name.startswith("AWS::"):
            return self.pseudo(name)
        if name in self.physical:
            return self.physical[name].ref
        parameter = self.stack.template.get("Parameters", {}).get(name)
        if parameter is not None and "Default" in parameter:
            return parameter["Default"]
        raise Unresolved(f"Ref {name}: resource not provisioned")

    def get_att(self, name: str, attribute: str) -> Any:
        if name not in self.physical:
            raise Unresolved(f"Fn::GetAtt {name}.{attribute}: resource not provisioned")
        attrs = self.physical[name].attrs
        if attribute not in attrs:
            raise Unresolved(f"Fn::GetAtt {name}.{attribute}: attribute not known locally")
        return attrs[attribute]

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                parts = arg if isinstance(arg, list) else str(arg).split(".", 1)
                return self.get_att(parts[0], parts[1])
            if key == "Fn::Join":
                separator, items = arg
                return separator.join(str(self.resolve(i)) for i in self.resolve(items))
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(self.resolve(index))]
            if key == "Fn::Split":
                separator, text = arg
                return str(self.resolve(text)).split(separator)
            if key == "Fn::Sub":
                return self._sub(arg)
            if key == "Fn::ImportValue":
                export = self.resolve(arg)
                if export not in self.exports:
                    raise Unresolved(f"Fn::ImportValue {export}: no stack exports it")
                return self.exports[export]
            if key.startswith("Fn::"):
                raise Unresolved(f"intrinsic {key} is not supported by the sandbox")
        return {k: self.resolve(v) for k, v in value.items()}

    def _sub(self, arg: Any) -> str:
        template, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        values = {k: self.resolve(v) for k, v in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in values:
                return str(values[name])
            if "." in name:
                logical, attribute = name.split(".", 1)
                return str(self.get_att(logical, attribute))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}]+)\}", replace, str(template))

    def dependencies(self, value: Any) -> set[str]:
        """Logical ids a property value refers to (for ordering the provisioning)."""
        found: set[str] = set()
        if isinstance(value, list):
            for item in value:
                found |= self.dependencies(item)
        elif isinstance(value, dict):
            for key, arg in value.items():
                if key == "Ref" and isinstance(arg, str) and not arg.startswith("AWS::"):
                    found.add(arg)
                elif key == "Fn::GetAtt":
                    found.add(arg[0] if isinstance(arg, list) else str(arg).split(".", 1)[0])
                elif key == "Fn::Sub":
                    text = arg if isinstance(arg, str) else arg[0]
                    for name in re.findall(r"\$\{([^}!]+)\}", text):
                        if not name.startswith("AWS::"):
                            found.add(name.split(".", 1)[0])
                    if isinstance(arg, list):
                        found |= self.dependencies(arg[1])
                else:
                    found |= self.dependencies(arg)
        resources = self.stack.template.get("Resources", {})
        return {name for name in found if name in resources}
