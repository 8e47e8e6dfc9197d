"""The public report API fake: real HTTP on 127.0.0.1, serves published bytes, with read-back faults."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator

import pytest
import requests

from local.fakes._server import KnobError
from local.fakes.report_api import ReportApiFake, ReportApiKnobs

TIMEOUT = 5.0
CONTENT = b"\x00binary and text \xe2\x9c\x93 report\n"


@pytest.fixture
def fake() -> Iterator[ReportApiFake]:
    with ReportApiFake() as running:
        yield running


def read(fake: ReportApiFake, report_id: str) -> requests.Response:
    return requests.get(f"{fake.base_url}/reports/{report_id}", timeout=TIMEOUT)


def test_published_report_is_served_byte_for_byte_and_publish_returns_its_sha256(fake: ReportApiFake) -> None:
    digest = fake.publish("r-1", CONTENT)

    response = read(fake, "r-1")

    assert response.status_code == 200
    assert response.content == CONTENT
    assert response.headers["Content-Type"] == "application/octet-stream"
    assert digest == hashlib.sha256(CONTENT).hexdigest() == hashlib.sha256(response.content).hexdigest()


def test_unknown_report_is_404_json(fake: ReportApiFake) -> None:
    response = read(fake, "nope")

    assert response.status_code == 404
    assert response.json()["error"] == "ReportNotFound"


def test_invisible_reads_knob_hides_each_report_for_its_first_n_reads(fake: ReportApiFake) -> None:
    fake.set_knobs(invisible_reads=2)
    fake.publish("r-1", CONTENT)
    fake.publish("r-2", CONTENT)

    statuses = [read(fake, "r-1").status_code for _ in range(3)]

    assert statuses == [404, 404, 200]
    assert read(fake, "r-2").status_code == 404  # counted per report
    assert fake.reads() == {"r-1": 3, "r-2": 1}


def test_a_report_can_be_published_with_its_own_invisible_reads(fake: ReportApiFake) -> None:
    fake.publish("late", CONTENT, invisible_reads=1)
    fake.publish("now", CONTENT)

    assert [read(fake, "late").status_code, read(fake, "late").status_code] == [404, 200]
    assert read(fake, "now").status_code == 200


def test_tamper_ids_knob_serves_different_bytes_for_those_reports_only(fake: ReportApiFake) -> None:
    digest = fake.publish("r-bad", CONTENT)
    fake.publish("r-good", CONTENT)
    fake.set_knobs(tamper_ids="r-bad")

    assert hashlib.sha256(read(fake, "r-bad").content).hexdigest() != digest
    assert hashlib.sha256(read(fake, "r-good").content).hexdigest() == digest


def test_admin_publish_takes_text_or_base64_and_returns_the_sha256(fake: ReportApiFake) -> None:
    text = requests.post(
        f"{fake.base_url}/_admin/reports", json={"reportId": "t", "content": "hello"}, timeout=TIMEOUT
    )
    binary = requests.post(
        f"{fake.base_url}/_admin/reports",
        json={"reportId": "b", "contentBase64": base64.b64encode(CONTENT).decode(), "invisibleReads": 1},
        timeout=TIMEOUT,
    )

    assert text.status_code == 201 and text.json()["sha256"] == hashlib.sha256(b"hello").hexdigest()
    assert binary.status_code == 201 and binary.json()["sha256"] == hashlib.sha256(CONTENT).hexdigest()
    assert read(fake, "t").content == b"hello"
    assert read(fake, "b").status_code == 404  # invisibleReads: 1
    assert read(fake, "b").content == CONTENT
    view = requests.get(f"{fake.base_url}/_admin/reports", timeout=TIMEOUT).json()
    assert view["t"] == {"sha256": hashlib.sha256(b"hello").hexdigest(), "size": 5, "reads": 1}


def test_admin_publish_without_content_is_400(fake: ReportApiFake) -> None:
    response = requests.post(f"{fake.base_url}/_admin/reports", json={"reportId": "x"}, timeout=TIMEOUT)

    assert response.status_code == 400
    assert fake.reads() == {}


def test_common_fault_knobs_apply_to_reads(fake: ReportApiFake) -> None:
    fake.publish("r-1", CONTENT)
    fake.set_knobs(outage=True)

    assert read(fake, "r-1").status_code == 503
    fake.set_knobs(outage=False, fail_rate_429=1.0)
    throttled = read(fake, "r-1")
    assert throttled.status_code == 429 and throttled.headers["Retry-After"] == "1"
    assert fake.reads() == {"r-1": 0}  # faulted calls never reach the report
    assert [c["fault"] for c in fake.calls()] == ["outage", "429"]


def test_knobs_can_be_changed_over_http_and_reset(fake: ReportApiFake) -> None:
    fake.publish("r-1", CONTENT)
    changed = requests.post(
        f"{fake.base_url}/_admin/knobs", json={"tamper_ids": ["r-1"], "invisible_reads": 0}, timeout=TIMEOUT
    )
    assert changed.json()["tamper_ids"] == ["r-1"]

    requests.post(f"{fake.base_url}/_admin/reset", timeout=TIMEOUT)

    assert fake.knobs == ReportApiKnobs()
    assert read(fake, "r-1").status_code == 404  # reports forgotten too


def test_negative_invisible_reads_is_rejected() -> None:
    with pytest.raises(KnobError):
        ReportApiKnobs(invisible_reads=-1)
