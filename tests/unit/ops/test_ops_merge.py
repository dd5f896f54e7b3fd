"""``assay merge``: shard summaries become one summary, one gate decision and one ``_SUCCESS``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.connectors.layout import shard_summary_name
from assay.exceptions import ConfigError
from assay.pipeline.merge import merge
from assay.pipeline.verdict import Policy


def shard(
    read: int, scored: int, dead: int, total: float, passed: int, *, status: str = "ok", **extra: Any
) -> dict[str, Any]:
    return {
        "run_id": "nightly",
        "status": status,
        "started_at": "2026-11-22T02:00:00+00:00",
        "finished_at": f"2026-11-22T02:0{read % 10}:00+00:00",
        "wall_time_s": float(read),
        "counts": {"read": read, "scored": scored, "dead_letters": dead},
        "evaluators": {
            "acc": {"count": scored, "scored": scored, "errors": 0, "sum": total, "passed": passed, "threshold": 0.5}
        },
        "judges": {"gpt": {"requests": read, "http_429": 1, "cost_usd": 0.5, "latency_p99_s": read / 10}},
        "totals": {"requests": read, "cost_usd": 0.5},
        **extra,
    }


def write(results: Path, i: int, n: int, data: dict[str, Any]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / shard_summary_name(i, n)).write_text(json.dumps(data))


STORED = {"gate_config": {"acc": {"min_mean": 0.5}}, "limits": {"max_dead_letters": 10}}


def test_counts_sum_means_weigh_and_judges_add_up(tmp_path: Path) -> None:
    write(tmp_path, 0, 2, shard(10, 10, 0, 9.0, 9, **STORED))  # mean 0.9 over 10
    write(tmp_path, 1, 2, shard(32, 30, 2, 15.0, 12, **STORED))  # mean 0.5 over 30
    report = merge(tmp_path)
    s = report.summary
    assert report.exit_code == 0 and report.success and s["status"] == "ok"
    assert [s["counts"][k] for k in ("read", "scored", "dead_letters")] == [42, 40, 2]
    assert s["evaluators"]["acc"]["mean"] == pytest.approx(24 / 40)  # weighted, not (0.9 + 0.5) / 2
    assert s["evaluators"]["acc"]["pass_rate"] == pytest.approx(21 / 40)
    assert s["judges"]["gpt"]["requests"] == 42 and s["judges"]["gpt"]["http_429"] == 2
    assert s["judges"]["gpt"]["latency_p99_s"] == pytest.approx(3.2)  # the largest shard value
    assert s["totals"]["requests"] == 42 and s["totals"]["cost_usd"] == 1.0 and s["totals"]["rate_limited_429"] == 2
    assert s["gates"] == [
        {
            "key": "acc",
            "check": "min_mean",
            "threshold": 0.5,
            "actual": 0.6,
            "passed": True,
            "message": "gate acc: mean 0.6, expected at least 0.5 (min_mean): ok",
        }
    ]
    assert s["gates_from"] == "shard summaries" and s["shards"]["present"] == [0, 1]
    assert s["wall_time_s"] == 32.0 and s["started_at"] == "2026-11-22T02:00:00+00:00"
    on_disk = json.loads((tmp_path / "_SUMMARY.json").read_text())
    assert on_disk["counts"] == s["counts"] and (tmp_path / "_SUCCESS").exists()


def test_gates_apply_once_to_the_totals(tmp_path: Path) -> None:
    # each shard alone would pass a 0.55 mean gate or fail it; the totals decide
    write(tmp_path, 0, 2, shard(10, 10, 0, 9.0, 9))
    write(tmp_path, 1, 2, shard(30, 30, 0, 15.0, 12))
    policy = Policy.from_mapping({"acc": {"min_mean": 0.65}}, origin="run.yaml")
    report = merge(tmp_path, policy=policy)
    assert report.exit_code == 3 and report.summary["status"] == "gate_failed"
    assert report.messages == ["gate acc: mean 0.6, expected at least 0.65 (min_mean): FAILED"]
    assert report.summary["gates_from"] == "run.yaml" and report.summary["gates_applied"]
    assert report.success  # the output is whole: _SUCCESS marks completeness, the exit code the verdict
    assert merge(tmp_path, policy=Policy.from_mapping({"acc": {"min_mean": 0.55}})).exit_code == 0
    missing_key = merge(tmp_path, policy=Policy.from_mapping({"other": {"min_pass_rate": 0.1}}))
    assert missing_key.exit_code == 3 and "no results with this key" in missing_key.messages[0]


def test_dead_letter_limits_exit_4(tmp_path: Path) -> None:
    write(tmp_path, 0, 2, shard(10, 8, 2, 4.0, 4))
    write(tmp_path, 1, 2, shard(10, 9, 1, 4.5, 4))
    assert merge(tmp_path, policy=Policy(max_dead_letters=2)).exit_code == 4
    assert merge(tmp_path, policy=Policy(max_dead_letter_ratio=0.1)).exit_code == 4
    assert merge(tmp_path, policy=Policy(max_dead_letter_ratio=0.2)).exit_code == 0


def test_max_bounds_apply_at_merge_as_in_a_run(tmp_path: Path) -> None:
    """A ``max_pass_rate`` gate (an escalation rate) fails the merge as it fails ``assay run``:
    the merge used to check only minimums and exited 0 with a pass rate of 0.9 over a 0.15 bound."""
    write(tmp_path, 0, 2, shard(10, 10, 0, 9.0, 9, gate_config={"acc": {"max_pass_rate": 0.15}}, limits={}))
    write(tmp_path, 1, 2, shard(10, 10, 0, 9.0, 9, gate_config={"acc": {"max_pass_rate": 0.15}}, limits={}))
    report = merge(tmp_path)
    assert report.exit_code == 3 and report.summary["status"] == "gate_failed"
    [gate] = report.summary["gates"]
    assert (gate["check"], gate["actual"], gate["passed"]) == ("max_pass_rate", 0.9, False)
    assert merge(tmp_path, policy=Policy.from_mapping({"acc": {"max_mean": 0.8}})).exit_code == 3
    assert merge(tmp_path, policy=Policy.from_mapping({"acc": {"max_mean": 0.95}})).exit_code == 0


def test_judge_stats_of_shards_add_up_once(tmp_path: Path) -> None:
    """Shards ran side by side: counts and each shard's share of the limit add up; latency
    percentiles keep the largest; the totals come from the merged judges."""
    for i in range(2):
        data = shard(10, 10, 0, 9.0, 9)
        data["judges"] = {"gpt": {"requests": 10, "errors": 1, "configured_rpm": 300.0, "latency_p99_s": 0.1 * (i + 1)}}
        write(tmp_path, i, 2, data)
    j = merge(tmp_path).summary
    assert j["judges"]["gpt"] == {"requests": 20, "errors": 2, "configured_rpm": 600.0, "latency_p99_s": 0.2}
    assert j["totals"]["requests"] == 20 and j["totals"]["errors"] == 2


@pytest.mark.parametrize(
    ("second", "code", "status"),
    [
        (None, 1, "incomplete"),
        ("failed", 1, "failed"),
        ("budget", 5, "budget"),
        ("interrupted", 130, "interrupted"),
        ("pending", 75, "pending"),
    ],
)
def test_no_success_until_every_shard_is_whole(tmp_path: Path, second: str | None, code: int, status: str) -> None:
    (tmp_path / "_SUCCESS").write_text("")  # a stale marker of an earlier attempt
    write(tmp_path, 0, 2, shard(10, 10, 0, 9.0, 9))
    if second is not None:
        write(tmp_path, 1, 2, shard(5, 5, 0, 1.0, 1, status=second))
    report = merge(tmp_path, policy=Policy.from_mapping({"acc": {"min_mean": 0.99}}))
    assert report.exit_code == code and not report.success
    assert report.summary["status"] == status
    assert not (tmp_path / "_SUCCESS").exists()
    assert report.summary["gates"] == []  # no gate verdict on a partial run


def test_stored_gates_must_agree_and_several_n_need_shards(tmp_path: Path) -> None:
    write(tmp_path, 0, 2, shard(10, 10, 0, 9.0, 9, **STORED))
    write(tmp_path, 1, 2, shard(10, 10, 0, 9.0, 9, gate_config={"acc": {"min_mean": 0.7}}, limits={}))
    with pytest.raises(ConfigError, match="different gates"):
        merge(tmp_path)
    assert merge(tmp_path, policy=Policy()).exit_code == 0  # the run file's gates settle it
    write(tmp_path, 0, 3, shard(1, 1, 0, 1.0, 1))
    with pytest.raises(ConfigError, match="--shards N"):
        merge(tmp_path, policy=Policy())
    assert merge(tmp_path, policy=Policy(), shards=3).exit_code == 1  # 1/3 and 2/3 are missing
    with pytest.raises(ConfigError, match="no shard summaries"):
        merge(tmp_path / "empty")


def test_cli_sharded_run_merges_to_the_unsharded_numbers(quickstart: Path, run_cli) -> None:
    """Shards record their gate values and exit 0 whatever they are; the merge applies the gates
    once, to the totals, with the same records as the unsharded run. The gate bound sits just
    under the whole run's mean, so at least one shard's own mean is below it: such a shard used
    to exit 3 while the merge of the same shards passed."""
    whole = run_cli("run", str(quickstart), "-q")
    assert whole.returncode == 0, whole.stderr
    out = quickstart.parent / "out"
    expected = json.loads((out / "_SUMMARY.json").read_text())
    for p in out.iterdir():
        if p.is_file():
            p.unlink()
    bound = expected["evaluators"]["tool_call_accuracy"]["mean"] - 1e-6
    gate = f"gates.tool_call_accuracy.min_mean={bound}"
    for i in range(3):
        r = run_cli("run", str(quickstart), "--shard", f"{i}/3", "-q", "--set", gate)
        assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.glob("_SUMMARY.shard-*")) == [shard_summary_name(i, 3) for i in range(3)]
    shards = [json.loads((out / shard_summary_name(i, 3)).read_text()) for i in range(3)]
    assert all(s["status"] == "ok" and s["exit_code"] == 0 and not s["gates_applied"] for s in shards)
    assert any(not s["gates"][0]["passed"] for s in shards)  # recorded, not applied
    assert not (out / "_SUCCESS").exists()
    merged = run_cli("merge", str(out), "-q")
    assert merged.returncode == 0, merged.stderr
    got = json.loads((out / "_SUMMARY.json").read_text())
    assert got["counts"] == expected["counts"]
    for key, ks in expected["evaluators"].items():
        assert got["evaluators"][key]["scored"] == ks["scored"]
        assert got["evaluators"][key]["mean"] == pytest.approx(ks["mean"])
    [record] = got["gates"]
    assert sorted(record) == sorted(expected["gates"][0]) and got["gates_applied"]
    assert record["key"] == "tool_call_accuracy" and record["passed"]
    assert record["actual"] == pytest.approx(0.78, abs=0.01)
    assert (out / "_SUCCESS").exists()
    # the run file's gates, with an override, decide instead of the stored ones
    strict = run_cli("merge", "--run-file", str(quickstart), "--set", "gates.tool_call_accuracy.min_mean=0.9", "-q")
    assert strict.returncode == 3 and "gate tool_call_accuracy" in strict.stderr
    assert run_cli("merge", "-q").returncode == 2
