"""The judge pool is an argument, never ambient: the engine hands the run's pool to every evaluator
it builds (``use_judges``), an evaluator finds its judges only in the pool it was handed, and the
metrics get the judges' statistics from the gauges the engine samples from that pool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from assay.config import build_config
from assay.exceptions import ConfigError
from assay.judges.pool import JudgePool
from assay.observability.metrics import RunMetrics
from assay.pipeline import Pipeline, RunOptions
from assay.pipeline.assembly import build_evaluators
from assay.pipeline.progress import gauges_of
from assay.registry import build_evaluator
from assay.stages import EvaluateStage
from assay.testing import ListSink, ListSource
from tests.unit.ops.test_ops_metrics import samples

JUDGE = {"model": "stand-in", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}


def _run(tmp_path: Path, evaluators: list[dict[str, Any]], judges: dict[str, Any] | None = None) -> Any:
    data = {"source": {"path": str(tmp_path / "t.jsonl")}, "evaluators": evaluators, "sink": {"path": "o/"}}
    if judges:
        data["judges"] = judges
    return build_config(data, base_dir=tmp_path)


def test_the_run_pool_is_handed_to_every_evaluator(tmp_path: Path) -> None:
    config = _run(
        tmp_path,
        [
            {"name": "llm_judge", "params": {"prompt": "correctness", "judge": "g"}},
            {
                "name": "composite",
                "params": {"evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "g"}}]},
            },
            {"name": "exact_match"},
        ],
        judges={"g": JUDGE},
    )
    pool = JudgePool.from_config(config.judges, state_dir=tmp_path)
    judge, composite, exact = build_evaluators(config, judges=pool)
    assert judge.judge_pool is pool and judge.resolve_judge() is pool.get("g")
    assert [c.judge_pool for c in composite.children] == [pool]  # a composite's children too
    assert exact.judge_pool is pool


def test_an_evaluator_sees_only_the_pool_it_was_handed(tmp_path: Path) -> None:
    pool = JudgePool.from_config({"g": JUDGE}, state_dir=tmp_path)
    handed = build_evaluator("llm_judge", {"prompt": "correctness", "judge": "g"})
    handed.use_judges(pool)
    other = build_evaluator("llm_judge", {"prompt": "correctness", "judge": "g"})
    assert handed.resolve_judge() is pool.get("g")
    with pytest.raises(ConfigError, match="'g' is referred to by name, but no judges are declared"):
        other.resolve_judge()  # no pool of another evaluator, no pool of the process


def test_a_name_the_handed_pool_does_not_know_is_a_config_error(tmp_path: Path) -> None:
    pool = JudgePool.from_config({"a": JUDGE, "b": JUDGE}, state_dir=tmp_path)
    ev = build_evaluator("llm_judge", {"prompt": "correctness", "judges": ["a", "c"]})
    with pytest.raises(ConfigError, match=r"unknown judge 'c' \(judges: a, b\)"):
        ev.use_judges(pool)


def test_equal_inline_configs_of_a_run_without_judges_are_one_endpoint(tmp_path: Path) -> None:
    config = _run(
        tmp_path,
        [
            {"name": "llm_judge", "params": {"prompt": "correctness", "judge": JUDGE, "key": "one"}},
            {"name": "llm_judge", "params": {"prompt": "correctness", "judge": dict(JUDGE), "key": "two"}},
            {"name": "exact_match"},
        ],
    )
    one, two, exact = build_evaluators(config)
    assert one.resolve_judge() is two.resolve_judge()  # one endpoint: one limiter, one set of stats
    assert exact.judge_pool is one.judge_pool  # the run's evaluators share that one pool
    alone = build_evaluator("llm_judge", {"prompt": "correctness", "judge": JUDGE})
    assert alone.resolve_judge() is alone.resolve_judge() is not one.resolve_judge()  # its own pool


def test_the_metrics_get_the_judges_from_the_sampled_gauges(tmp_path: Path) -> None:
    pool = JudgePool.from_config({"g": JUDGE}, state_dir=tmp_path, use_cache=False)
    pipe = Pipeline(ListSource([]), EvaluateStage([]), ListSink(), ListSink(), RunOptions())
    gauges = gauges_of(pipe, pool)
    assert set(gauges.judge_stats) == {"g"} and set(gauges.judge_latencies) == {"g"}
    metrics = RunMetrics("r1")
    metrics.observe_gauges(gauges)
    got = samples(generate_latest(metrics.registry).decode())
    assert got[("assay_judge_requests_total", (("judge", "g"),))] == 0
    metrics.observe_gauges(gauges_of(pipe, None))  # a run without judges: nothing replaced
    assert ("assay_judge_requests_total", (("judge", "g"),)) in samples(generate_latest(metrics.registry).decode())
