"""``assay merge``: shard summaries become one summary, one gate decision and one ``_SUCCESS``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.config import GateConfig
from assay.exceptions import ConfigError
from assay.pipeline.merge import Gates, merge, shard_summary_name


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
    assert s["totals"] == {"requests": 42, "cost_usd": 1.0}
    assert s["gates"] == [{"key": "acc", "metric": "mean", "min": 0.5, "value": 0.6, "passed": True}]
    assert s["gates_from"] == "shard summaries" and s["shards"]["present"] == [0, 1]
    assert s["wall_time_s"] == 32.0 and s["started_at"] == "2026-11-22T02:00:00+00:00"
    on_disk = json.loads((tmp_path / "_SUMMARY.json").read_text())
    assert on_disk["counts"] == s["counts"] and (tmp_path / "_SUCCESS").exists()


def test_gates_apply_once_to_the_totals(tmp_path: Path) -> None:
    # each shard alone would pass a 0.55 mean gate or fail it; the totals decide
    write(tmp_path, 0, 2, shard(10, 10, 0, 9.0, 9))
    write(tmp_path, 1, 2, shard(30, 30, 0, 15.0, 12))
    gates = Gates({"acc": GateConfig(min_mean=0.65)}, origin="run.yaml")
    report = merge(tmp_path, gates=gates)
    assert report.exit_code == 3 and report.summary["status"] == "gate_failed"
    assert report.messages == ["gate acc: mean 0.6 < min_mean 0.65"]
    assert report.success  # the output is whole: _SUCCESS marks completeness, the exit code the verdict
    assert merge(tmp_path, gates=Gates({"acc": GateConfig(min_mean=0.55)})).exit_code == 0
    missing_key = merge(tmp_path, gates=Gates({"other": GateConfig(min_pass_rate=0.1)}))
    assert missing_key.exit_code == 3 and "no results with this key" in missing_key.messages[0]


def test_dead_letter_limits_exit_4(tmp_path: Path) -> None:
    write(tmp_path, 0, 2, shard(10, 8, 2, 4.0, 4))
    write(tmp_path, 1, 2, shard(10, 9, 1, 4.5, 4))
    assert merge(tmp_path, gates=Gates(max_dead_letters=2)).exit_code == 4
    assert merge(tmp_path, gates=Gates(max_dead_letter_ratio=0.1)).exit_code == 4
    assert merge(tmp_path, gates=Gates(max_dead_letter_ratio=0.2)).exit_code == 0


@pytest.mark.parametrize(
    ("second", "code"),
    [(None, 1), ("failed", 1), ("budget", 5), ("interrupted", 130)],
)
def test_no_success_until_every_shard_is_whole(tmp_path: Path, second: str | None, code: int) -> None:
    (tmp_path / "_SUCCESS").write_text("")  # a stale marker of an earlier attempt
    write(tmp_path, 0, 2, shard(10, 10, 0, 9.0, 9))
    if second is not None:
        write(tmp_path, 1, 2, shard(5, 5, 0, 1.0, 1, status=second))
    report = merge(tmp_path, gates=Gates({"acc": GateConfig(min_mean=0.99)}))
    assert report.exit_code == code and not report.success
    assert report.summary["status"] == "incomplete"
    assert not (tmp_path / "_SUCCESS").exists()
    assert report.summary["gates"] == []  # no gate verdict on a partial run


def test_stored_gates_must_agree_and_several_n_need_shards(tmp_path: Path) -> None:
    write(tmp_path, 0, 2, shard(10, 10, 0, 9.0, 9, **STORED))
    write(tmp_path, 1, 2, shard(10, 10, 0, 9.0, 9, gate_config={"acc": {"min_mean": 0.7}}, limits={}))
    with pytest.raises(ConfigError, match="different gates"):
        merge(tmp_path)
    assert merge(tmp_path, gates=Gates()).exit_code == 0  # the run file's gates settle it
    write(tmp_path, 0, 3, shard(1, 1, 0, 1.0, 1))
    with pytest.raises(ConfigError, match="--shards N"):
        merge(tmp_path, gates=Gates())
    assert merge(tmp_path, gates=Gates(), shards=3).exit_code == 1  # 1/3 and 2/3 are missing
    with pytest.raises(ConfigError, match="no shard summaries"):
        merge(tmp_path / "empty")


def test_cli_sharded_run_merges_to_the_unsharded_numbers(quickstart: Path, run_cli) -> None:
    whole = run_cli("run", str(quickstart), "-q")
    assert whole.returncode == 0, whole.stderr
    out = quickstart.parent / "out"
    expected = json.loads((out / "_SUMMARY.json").read_text())
    for p in out.iterdir():
        if p.is_file():
            p.unlink()
    for i in range(3):
        r = run_cli("run", str(quickstart), "--shard", f"{i}/3", "-q")
        assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.glob("_SUMMARY.shard-*")) == [shard_summary_name(i, 3) for i in range(3)]
    merged = run_cli("merge", str(out), "-q")
    assert merged.returncode == 0, merged.stderr
    got = json.loads((out / "_SUMMARY.json").read_text())
    assert got["counts"] == expected["counts"]
    for key, ks in expected["evaluators"].items():
        assert got["evaluators"][key]["scored"] == ks["scored"]
        assert got["evaluators"][key]["mean"] == pytest.approx(ks["mean"])
    [gate] = got["gates"]
    assert gate["key"] == "tool_call_accuracy" and gate["passed"] and gate["value"] == pytest.approx(0.78, abs=0.01)
    assert (out / "_SUCCESS").exists()
    # the run file's gates, with an override, decide instead of the stored ones
    strict = run_cli("merge", "--run-file", str(quickstart), "--set", "gates.tool_call_accuracy.min_mean=0.9", "-q")
    assert strict.returncode == 3 and "gate tool_call_accuracy" in strict.stderr
    assert run_cli("merge", "-q").returncode == 2
