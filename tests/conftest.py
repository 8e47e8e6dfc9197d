"""Dummy AWS credentials so nothing in tests can reach a real account."""

import os

for _name, _value in {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "POWERTOOLS_SERVICE_NAME": "relay-tests",
    "POWERTOOLS_METRICS_NAMESPACE": "RelayTests",
    # No OTLP endpoint here: relay.tracing stays off (tests/unit/test_kernel_tracing.py turns it on).
    "OTEL_SDK_DISABLED": "true",
}.items():
    os.environ.setdefault(_name, _value)


def pytest_xdist_make_scheduler(config: object, log: object) -> object:
    """`make pytest` runs the suite on pytest-xdist workers: the tests that share a sandbox are kept on one
    worker (tests/scheduling.py)."""
    from tests.scheduling import SandboxScheduling

    return SandboxScheduling(config, log)  # type: ignore[arg-type]


def pytest_collection_modifyitems(config: object, items: list[object]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: longest work first (tests/scheduling.py)
        from tests.scheduling import order

        order(items)


def pytest_configure(config: object) -> None:
    """The tests' in-process moto (``mock_aws``) refuses what AWS refuses, as the emulator's server does:
    the request limits and validation rules moto leaves out (``emulator.limits``). An xdist worker that runs
    no sandbox yields the CPU to those that do (tests/scheduling.py)."""
    from emulator.limits import install

    install()
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        from tests.scheduling import NICE, is_lane

        if not is_lane(str(workerinput["workerid"])):
            os.nice(NICE)
