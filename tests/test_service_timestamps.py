"""A result's ``provenance.created_at`` is checked before it is stored (issue 40, HIGH 2): valid ISO 8601 at the
edge of the calendar (``9999-12-31T23:59:59-14:00`` is year 10000 in UTC) was stored, and PostgreSQL could not
hand it back to Python, so every listing answered 500 for everyone. The check is the one validation both
databases' ingest runs (``service.validate.check_result``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.service.errors import ApiError
from accelbench.service.validate import check_result

DOC = (
    Path(__file__).parent
    / "data"
    / "reports"
    / "cpu-local"
    / "minilm-l6__cpu-local__fp32__closed-http-b1.json"
)


def _with_created_at(value: str) -> dict:
    doc = json.loads(DOC.read_text())
    doc["provenance"]["created_at"] = value
    return doc


@pytest.mark.parametrize("value", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
def test_a_time_outside_the_calendar_in_utc_is_refused_naming_the_field(value):
    with pytest.raises(ApiError) as err:
        check_result(_with_created_at(value), "result")
    assert err.value.status == 422
    assert "provenance.created_at" in str(err.value) and value in str(err.value)


@pytest.mark.parametrize(
    "value",
    [
        "9999-12-31T23:59:59+00:00",
        "9999-12-31T09:59:59-14:00",
        "0001-01-01T14:00:00+14:00",
        "2026-12-03T09:25:00Z",
    ],
)
def test_times_inside_the_calendar_in_utc_are_kept(value):
    assert check_result(_with_created_at(value), "result").provenance.created_at == value
