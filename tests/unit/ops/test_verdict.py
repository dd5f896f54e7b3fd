"""The one verdict: what decides an output's status and exit code, in which order, for a run, a
shard and a merge."""

from __future__ import annotations

import pytest

from assay.exceptions import ConfigError, ConnectorError
from assay.pipeline.summary import RunStats
from assay.pipeline.verdict import Policy, combine_statuses, decide
from assay.records import Result


def stats(scores: list[float | None], *, errors: int = 0, read: int | None = None, dead: int = 0) -> RunStats:
    s = RunStats()
    for x in scores:
        s.add_results({"acc": Result("acc", x)})
    for _ in range(errors):
        s.add_results({"acc": Result("acc", None, error="judge down")})
    s.counts["read"] = read if read is not None else len(scores) + errors
    s.counts["dead_letters"] = dead
    return s


STRICT = Policy.from_mapping({"acc": {"min_mean": 0.9}}, max_dead_letters=0, max_error_rate=0.2, origin="run file")


def test_order_error_then_stopped_then_error_rate_then_dead_letters_then_gates() -> None:
    low = stats([0.5, 0.5, 0.5, 0.5], errors=2, dead=1)
    assert (v := decide(STRICT, low, error=ConfigError("bad"))).exit_code == 2 and v.status == "failed"
    assert decide(STRICT, low, status="budget").exit_code == 5
    assert decide(STRICT, low).status == "failed"  # 2 of 6 results are errors > 20 %
    assert decide(STRICT, stats([0.5] * 10, dead=1)).status == "dead_letters"
    v = decide(STRICT, stats([0.5] * 10))
    assert (v.status, v.exit_code, v.whole) == ("gate_failed", 3, True)
    assert decide(STRICT, stats([1.0] * 10)).exit_code == 0


def test_a_shard_records_its_gates_and_judges_only_its_errors() -> None:
    shard = decide(STRICT, stats([0.5] * 10, dead=3), final=False)
    assert (shard.status, shard.exit_code) == ("ok", 0)
    assert [g.passed for g in shard.gates] == [False]  # recorded, not applied
    assert decide(STRICT, stats([0.5], errors=5), final=False).exit_code == 1
    summary = shard.record({})
    assert summary["gates_applied"] is False and summary["gate_config"] == {"acc": {"min_mean": 0.9}}
    assert summary["limits"]["max_error_rate"] == 0.2 and summary["gates_from"] == "run file"
    again = Policy.from_summary(summary)
    assert again is not None and again.same_as(STRICT)


@pytest.mark.parametrize(
    ("statuses", "combined", "code"),
    [
        (["ok", "ok"], "ok", 0),
        (["ok", "gate_failed"], "ok", 0),  # an old shard's own verdict: the totals decide again
        (["interrupted", "budget"], "budget", 5),
        (["pending", "ok"], "pending", 75),
        (["interrupted", "pending"], "interrupted", 130),
        (["budget", "failed"], "failed", 1),
    ],
)
def test_parts_combine_to_the_most_actionable_status(statuses: list[str], combined: str, code: int) -> None:
    assert combine_statuses(statuses) == combined
    assert decide(Policy(), stats([1.0]), status=combined).exit_code == code


def test_no_gate_verdict_on_an_output_that_is_not_whole() -> None:
    v = decide(STRICT, stats([0.1]), status="interrupted")
    assert v.gates == [] and not v.whole and "resume" in v.messages[0]
    assert decide(STRICT, stats([0.1]), error=ConnectorError("sink down")).record({})["error"]["type"] == (
        "ConnectorError"
    )
