"""How `make pytest` spreads the suite over xdist workers (tests/scheduling.py): the tests that share a
sandbox stay on one worker, and the longest work is handed out first."""

from __future__ import annotations

from pathlib import Path

from tests.scheduling import E2E_API, SandboxScheduling, rank, scope_of

TESTS = Path(__file__).resolve().parents[1]


def test_e2e_tests_share_one_of_two_scopes_by_module_and_chaos_and_infra_have_their_own():
    assert scope_of("tests/e2e/test_payments_e2e.py::test_payment_is_accepted[a@b]") == "e2e"
    assert scope_of("tests/e2e/test_schemathesis_e2e.py::test_generated[orders]") == "e2e-api"
    assert scope_of("tests/chaos/test_chaos.py::test_the_short_chaos_profile") == "chaos"
    assert scope_of("tests/infra/test_tables.py::test_x") == "infra"
    # The example's tests share one emulator stage (and its synth into one cdk.out): one worker.
    assert scope_of("tests/examples/test_your_first_flow.py::test_x") == "examples"
    assert scope_of("tests/examples/test_your_first_flow_doc.py::test_x") == "examples"
    single = "tests/handlers/payments/test_payments_api.py::test_x"
    assert scope_of(single) == single


def test_every_module_named_as_driving_the_api_exists():
    # A renamed module would silently move back into the main e2e scope.
    assert {p.name for p in (TESTS / "e2e").glob("test_*.py")} >= E2E_API


def test_sandboxes_go_first_then_the_slow_pipelines_then_infra_then_the_rest():
    ids = [
        "tests/unit/test_a.py::t",
        "tests/infra/test_b.py::t",
        "tests/handlers/payments/test_payments_pipeline.py::t",
        "tests/e2e/test_orders_e2e.py::t",
        "tests/chaos/test_chaos.py::t",
    ]
    assert sorted(ids, key=rank) == [ids[3], ids[4], ids[2], ids[1], ids[0]]


def test_the_scheduler_splits_scopes_by_path_not_by_node_id_suffix():
    # pytest-xdist's loadgroup reads a suffix pytest 9.2 no longer keeps (pytest-dev/pytest-xdist#1386).
    split = SandboxScheduling._split_scope
    assert split(None, "tests/e2e/test_bus_e2e.py::test_x") == "e2e"
    assert split(None, "tests/unit/test_x.py::test_y") == "tests/unit/test_x.py::test_y"
