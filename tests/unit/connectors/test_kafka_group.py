"""The leave step's wrapper applies only to a consumer whose aiokafka has the step it wraps (the
effect on a real group: tests/integration/connectors/test_kafka_leave.py)."""

from __future__ import annotations

from types import SimpleNamespace

from assay.connectors.kafka_group import leave_from_any_generation


def test_without_aiokafka_s_leave_step_nothing_is_wrapped() -> None:
    assert leave_from_any_generation(object()) is False  # not started: no coordinator yet
    renamed = SimpleNamespace(_coordinator=SimpleNamespace(_send_req=print))  # a release without the step
    assert leave_from_any_generation(renamed) is False
    assert not hasattr(renamed._coordinator, "_maybe_leave_group")
