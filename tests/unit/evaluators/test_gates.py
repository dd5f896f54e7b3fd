"""Gates: minimums and maximums on a key's mean and pass rate, and validation of gate keys."""

from __future__ import annotations

from assay.pipeline.gates import evaluate_gates, gate_failures, gate_keys_problems
from assay.pipeline.summary import RunStats
from assay.records import Result


def stats(key: str, scores: list[float | None]) -> RunStats:
    s = RunStats()
    for x in scores:
        s.add_results({key: Result(key, x)})
    return s


def test_min_and_max_bounds() -> None:
    s = stats("escalation", [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # 10 % escalated
    [ok] = evaluate_gates({"escalation": {"max_pass_rate": 0.15}}, s)
    assert ok.passed and ok.actual == 0.1 and ok.check == "max_pass_rate"
    s = stats("escalation", [1.0, 1.0, 0.0, 0.0, 0.0])  # 40 %
    res = evaluate_gates({"escalation": {"max_pass_rate": 0.15, "max_mean": 0.5, "min_mean": 0.1}}, s)
    assert [(r.check, r.passed) for r in res] == [("min_mean", True), ("max_mean", True), ("max_pass_rate", False)]
    assert gate_failures(res) == [res[2].message] and "FAILED" in res[2].message
    assert res[2].to_dict()["actual"] == 0.4


def test_a_gate_message_says_what_was_expected() -> None:
    s = stats("escalation", [1.0, 1.0, 0.0, 0.0, 0.0])  # 40 %
    low, high = evaluate_gates({"escalation": {"min_mean": 0.7, "max_pass_rate": 0.05}}, s)
    assert low.message == "gate escalation: mean 0.4, expected at least 0.7 (min_mean): FAILED"
    assert high.message == "gate escalation: pass rate 0.4, expected at most 0.05 (max_pass_rate): FAILED"
    [r] = evaluate_gates({"escalation": {"max_pass_rate": {"value": 0.99, "on": "upper_bound"}}}, s)
    assert r.passed and r.message.startswith("gate escalation: pass rate upper bound 0.")
    assert r.message.endswith(", expected at most 0.99 (max_pass_rate on upper_bound): ok")


def test_missing_key_and_nothing_scored_fail() -> None:
    [r] = evaluate_gates({"nope": {"min_mean": 0.5}}, stats("x", [1.0]))
    assert not r.passed and "no results" in r.message
    [r] = evaluate_gates({"x": {"min_pass_rate": 0.5}}, stats("x", [None]))
    assert not r.passed and r.actual is None


def test_gate_config_objects() -> None:
    class Gate:
        min_mean = 0.9
        min_pass_rate = None

    [r] = evaluate_gates({"x": Gate()}, stats("x", [1.0]))
    assert r.passed and r.check == "min_mean"


def test_gate_keys_problems() -> None:
    keys = ["escalation", "json_match:", "trajectory_strict_match"]
    assert gate_keys_problems({"escalation": {"max_pass_rate": 0.1}, "json_match:a": {"min_mean": 1}}, keys) == []
    problems = gate_keys_problems({"escalate": {"max_pass_rate": 0.1}, "trajectory_strict_match": {}}, keys)
    assert len(problems) == 2 and "escalate" in problems[0] and "no bound" in problems[1]
