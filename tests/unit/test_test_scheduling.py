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


def test_only_the_lanes_run_sandboxes_and_every_test_runs_once():
    from collections import OrderedDict
    from types import SimpleNamespace

    from tests.scheduling import LANES, is_lane, order, starts_a_sandbox

    class Worker:
        def __init__(self, worker_id: str) -> None:
            self.gateway = SimpleNamespace(id=worker_id)
            self.shutting_down = False
            self.queue: list[int] = []

        def send_runtest_some(self, indexes: list[int]) -> None:
            assert not self.shutting_down
            self.queue += indexes

        def shutdown(self) -> None:
            self.shutting_down = True

    items = [
        SimpleNamespace(nodeid=n)
        for n in [
            *(f"tests/unit/test_u{i}.py::t" for i in range(6)),
            "tests/e2e/test_payments_e2e.py::a",
            "tests/e2e/test_payments_e2e.py::b",
            "tests/e2e/test_smoke_e2e.py::a",
            "tests/chaos/test_chaos.py::t",
            "tests/console/test_console_browser.py::t",
            "tests/demo/test_demo_output.py::t",
            "tests/demo/test_make_sandbox_targets.py::test_make_chaos",
            "tests/demo/test_make_targets.py::test_make_bench_runs_at_its_small_size",
            "tests/demo/test_make_targets.py::test_the_readme_lists_the_targets",
            *(f"tests/handlers/test_h{i}.py::t" for i in range(6)),
        ]
    ]
    order(items)
    collection = [item.nodeid for item in items]
    sched = SandboxScheduling.__new__(SandboxScheduling)
    sched.numnodes, sched.collection, sched.log = 4, None, lambda *_: None
    sched.workqueue, sched.assigned_work, sched.registered_collections = OrderedDict(), {}, {}
    sched.config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=False))
    workers = [Worker(f"gw{i}") for i in range(4)]
    for worker in workers:
        sched.add_node(worker)
        sched.add_node_collection(worker, collection)
    sched.schedule()

    ran: list[tuple[str, str]] = []
    while any(w.queue for w in workers):
        for worker in workers:
            if worker.queue:
                index = worker.queue.pop(0)
                ran.append((worker.gateway.id, collection[index]))
                sched.mark_test_complete(worker, index)
    assert sorted(nodeid for _, nodeid in ran) == sorted(collection)  # each once
    sandboxes = [(w, n) for w, n in ran if starts_a_sandbox(n)]
    assert len(sandboxes) == 8 and all(is_lane(w) for w, _ in sandboxes), sandboxes
    in_process = {w for w, n in ran if not starts_a_sandbox(n)}
    assert in_process - {f"gw{i}" for i in range(LANES)}  # the other workers take the in-process tests
    assert sched.tests_finished and all(w.shutting_down for w in workers)


def test_the_lanes_are_the_first_workers():
    from tests.scheduling import LANES, is_lane

    assert [is_lane(f"gw{i}") for i in range(4)] == [i < LANES for i in range(4)]
    assert not is_lane("master")
