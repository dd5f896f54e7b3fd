"""``AssayBackfillOperator``'s command and where it reads ``_BACKFILL.json``, with the few Airflow
names the module imports stood in (the DAG tests with a real Airflow are
``tests/integration/ops/test_ops_airflow.py``)."""

from __future__ import annotations

import importlib
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


class _BaseOperator:
    def __init__(self, **kwargs: Any) -> None:
        self.task_id = kwargs.get("task_id")


@pytest.fixture
def airflow_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    sdk = types.ModuleType("airflow.sdk")
    sdk.BaseOperator = _BaseOperator  # type: ignore[attr-defined]
    exceptions = types.ModuleType("airflow.sdk.exceptions")
    exceptions.AirflowException = type("AirflowException", (Exception,), {})  # type: ignore[attr-defined]
    exceptions.AirflowFailException = type("AirflowFailException", (Exception,), {})  # type: ignore[attr-defined]
    base = types.ModuleType("airflow.triggers.base")
    base.BaseTrigger = object  # type: ignore[attr-defined]
    base.TriggerEvent = dict  # type: ignore[attr-defined]
    for name, mod in {
        "airflow": types.ModuleType("airflow"),
        "airflow.sdk": sdk,
        "airflow.sdk.exceptions": exceptions,
        "airflow.triggers": types.ModuleType("airflow.triggers"),
        "airflow.triggers.base": base,
    }.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delitem(sys.modules, "assay.integrations.airflow", raising=False)
    yield importlib.import_module("assay.integrations.airflow")
    sys.modules.pop("assay.integrations.airflow", None)


def test_the_operator_runs_assay_backfill_over_its_range(airflow_module: Any, tmp_path: Path) -> None:
    run = tmp_path / "run.yaml"
    run.write_text(json.dumps({"source": {"path": "in/{{ ds }}.jsonl"}, "evaluators": ["exact_match"],
                               "sink": {"path": str(tmp_path / "out") + "/dt={{ ds }}/"}}))  # fmt: skip
    op = airflow_module.AssayBackfillOperator(
        task_id="backfill",
        run_file=str(run),
        start="2026-05-01",
        end="2026-05-03",
        parallel_days=4,
        max_cost_usd=20,
        overrides={"limits.budget_usd": 5},
        assay_command=["assay"],
    )
    assert op.command() == [
        "assay", "backfill", str(run), "--from", "2026-05-01", "--to", "2026-05-03",
        "--parallel-days", "4", "--max-cost-usd", "20", "--set", "limits.budget_usd=5",
    ]  # fmt: skip
    assert op.summary_path() == tmp_path / "out" / "_BACKFILL.json"
    assert set(op.template_fields) >= {"run_file", "start", "end"}
