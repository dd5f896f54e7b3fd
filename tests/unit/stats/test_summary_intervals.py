"""Intervals in ``_SUMMARY.json``: from a real run, equal across shards + merge, weighted,
clustered, and used by gates ``on: lower_bound``."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay import stats as S
from assay.config import RunConfig
from assay.pipeline.gates import evaluate_gates
from assay.pipeline.merge import merge
from assay.pipeline.run import execute
from assay.pipeline.summary import RunStats
from assay.records import Result

SCORER = '''
def graded(metadata):
    """The score and the sample weight the record carries."""
    meta = {"sample_weight": metadata["w"]} if "w" in metadata else {}
    return metadata["score"], "", meta
'''


def _records(n: int, seed: int, *, weights: bool, sessions: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        meta: dict[str, Any] = {"score": round(rng.random() ** 0.5, 3)}
        if weights:
            meta["w"] = rng.choice([1, 1, 4, 10])
        if sessions:
            meta["session_id"] = f"s{i % sessions}"
        out.append({"id": f"t{i}", "inputs": "q", "outputs": "a", "metadata": meta})
    return out


def _config(
    tmp_path: Path, records: list[dict[str, Any]], out: str, *, sample: dict[str, Any] | None = None, **extra: Any
) -> RunConfig:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    return RunConfig.model_validate(
        {
            "run_id": "r1",
            "source": {"path": str(src)},
            "evaluators": [
                {
                    "name": "python",
                    "params": {"function": "scorer_mod:graded", "key": "graded"},
                    **({"sample": sample} if sample else {}),
                }
            ],
            "sink": {"path": str(tmp_path / out) + "/"},
            "state_dir": str(tmp_path / f".assay-{out}"),
            **extra,
        }
    )


@pytest.fixture
def scorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "scorer_mod.py").write_text(SCORER)
    monkeypatch.syspath_prepend(str(tmp_path))


def _run(config: RunConfig, shard: tuple[int, int] | None = None) -> dict[str, Any]:
    report = anyio.run(lambda: execute(config, shard=shard, use_cache=False))
    return report.summary


@pytest.mark.usefixtures("scorer")
def test_a_run_writes_n_intervals_and_level_matching_the_stats_functions(tmp_path: Path) -> None:
    recs = _records(80, 1, weights=False)
    key = _run(_config(tmp_path, recs, "out"))["evaluators"]["graded"]
    xs = [r["metadata"]["score"] for r in recs]
    assert key["n"] == 80 and key["ci_level"] == 0.95
    m = S.Moments()
    for x in xs:
        m.add(x, x >= 0.5)
    assert key["mean_ci"] == pytest.approx(list(m.mean_interval()), abs=1e-6)  # type: ignore[arg-type]
    passed = sum(x >= 0.5 for x in xs)
    assert key["pass_rate_ci"] == pytest.approx(list(S.wilson_interval(passed, 80)), abs=1e-6)
    assert "weighted" not in key and "clusters" not in key


@pytest.mark.usefixtures("scorer")
@pytest.mark.parametrize(("weights", "sessions"), [(False, 0), (True, 0), (True, 9), (False, 9)])
def test_shards_and_merge_give_the_intervals_of_one_run(tmp_path: Path, weights: bool, sessions: int) -> None:
    recs = _records(90, 2, weights=weights, sessions=sessions)
    extra = {"stats": {"cluster_by": "metadata.session_id"}} if sessions else {}
    whole = _run(_config(tmp_path, recs, "whole", **extra))["evaluators"]["graded"]
    for i in range(3):
        _run(_config(tmp_path, recs, "sharded", **extra), shard=(i, 3))
    merged = merge(tmp_path / "sharded").summary["evaluators"]["graded"]
    for field in ("n", "mean", "pass_rate", "mean_ci", "pass_rate_ci", "n_effective", "clusters", "weighted"):
        assert merged.get(field) == pytest.approx(whole.get(field), abs=1e-9), field
    assert (whole.get("clusters") == 9) == bool(sessions)
    assert whole.get("weighted", False) == weights


@pytest.mark.usefixtures("scorer")
def test_weights_and_clusters_change_the_estimate_and_widen_the_interval(tmp_path: Path) -> None:
    recs = _records(120, 3, weights=True, sessions=6)
    weighted = _run(_config(tmp_path, recs, "a"))["evaluators"]["graded"]
    xs = [r["metadata"]["score"] for r in recs]
    ws = [r["metadata"]["w"] for r in recs]
    assert weighted["mean"] == pytest.approx(sum(x * w for x, w in zip(xs, ws, strict=True)) / sum(ws), abs=1e-6)
    assert weighted["n_effective"] < 120  # unequal weights cost precision
    clustered = _run(_config(tmp_path, recs, "b", stats={"cluster_by": "metadata.session_id", "ci_level": 0.9}))
    c = clustered["evaluators"]["graded"]
    assert c["clusters"] == 6 and c["ci_level"] == 0.9
    assert c["mean"] == pytest.approx(weighted["mean"])


def _stats(scores: list[float]) -> RunStats:
    stats = RunStats()
    for s in scores:
        stats.add_results({"acc": Result("acc", s)})
    return stats


def test_gate_on_lower_bound_is_stricter_than_the_point_value() -> None:
    stats = _stats([1.0] * 46 + [0.0] * 4)  # pass rate 0.92, Wilson lower bound 0.81
    point = evaluate_gates({"acc": {"min_pass_rate": 0.9}}, stats)
    lower = evaluate_gates({"acc": {"min_pass_rate": {"value": 0.9, "on": "lower_bound"}}}, stats)
    assert point[0].passed and not lower[0].passed
    assert lower[0].actual == pytest.approx(S.wilson_interval(46, 50)[0])
    assert lower[0].to_dict()["on"] == "lower_bound" and "on" not in point[0].to_dict()
    assert "pass rate lower bound" in lower[0].message
    upper = evaluate_gates({"acc": {"max_mean": {"value": 0.95, "on": "upper_bound"}}}, stats)
    assert not upper[0].passed  # the mean 0.92 is below 0.95, its upper bound is not


def test_gate_bound_in_a_run_file_validates() -> None:
    from assay.config import GateConfig

    g = GateConfig.model_validate({"min_pass_rate": {"value": 0.9, "on": "lower_bound"}, "min_mean": 0.5})
    assert [r.passed for r in evaluate_gates({"acc": g}, _stats([1.0] * 50))] == [True, True]
    with pytest.raises(ValueError, match="on"):
        GateConfig.model_validate({"min_pass_rate": {"value": 0.9, "on": "lowest"}})


def test_summary_round_trip_keeps_the_sufficient_statistics() -> None:
    stats = RunStats(level=0.9)
    for i in range(40):
        r = Result("acc", (i % 7) / 6, metadata={"sample_weight": 1 + i % 3})
        stats.add_results({"acc": r}, cluster=f"s{i % 5}")
    again = RunStats.from_dict(json.loads(json.dumps(stats.to_dict())))
    assert again.keys["acc"].to_dict() == stats.keys["acc"].to_dict()
    assert again.keys["acc"].mean_ci == stats.keys["acc"].mean_ci


def test_the_run_summary_table_shows_the_pass_rate_interval(capsys: pytest.CaptureFixture[str]) -> None:
    from assay.report.terminal import print_summary

    stats = _stats([1.0] * 46 + [0.0] * 4)
    print_summary({"run_id": "r", "counts": {}, "evaluators": stats.to_dict()["evaluators"]})
    out = capsys.readouterr().out
    lo, hi = S.wilson_interval(46, 50)
    assert "95% CI" in out and f"{lo:.3f}-{hi:.3f}" in out


def test_equal_weights_give_the_unweighted_intervals() -> None:
    plain, sampled = S.Moments(), S.Moments()
    for i in range(60):
        x = (i * 37 % 11) / 10
        plain.add(x, x >= 0.5)
        sampled.add(x, x >= 0.5, 50.0)  # one sampling rate of 2 %: every weight 50
    assert sampled.weighted and not sampled.weights_vary
    assert sampled.pass_rate_interval() == pytest.approx(plain.pass_rate_interval())
    assert sampled.mean_interval() == pytest.approx(plain.mean_interval())


@pytest.mark.usefixtures("scorer")
def test_a_stratified_sample_reports_weighted_estimates(tmp_path: Path) -> None:
    recs = _records(400, 5, weights=False)
    for i, r in enumerate(recs):
        r["metadata"]["model"] = "rare" if i % 20 == 0 else "common"
        if r["metadata"]["model"] == "rare":
            r["metadata"]["score"] = 0.1  # the rare stratum scores low: weighting matters
    sample = {"rate": 0.2, "seed": 1, "strata": "metadata.model", "min_per_stratum": 20}
    config = _config(tmp_path, recs, "out", sample=sample)
    key = _run(config)["evaluators"]["graded"]
    rows = [json.loads(x) for p in sorted((tmp_path / "out").glob("part-*")) for x in p.read_text().splitlines()]
    scored = [r["results"]["graded"] for r in rows if "graded" in r["results"]]
    ws = [r["metadata"]["sample_weight"] for r in scored]
    xs = [r["score"] for r in scored]
    assert key["weighted"] and len(set(ws)) == 2 and key["n"] == len(scored)
    assert key["mean"] == pytest.approx(sum(w * x for w, x in zip(ws, xs, strict=True)) / sum(ws), abs=1e-6)
    assert key["mean"] != pytest.approx(sum(xs) / len(xs), abs=1e-3)  # the rare stratum is oversampled
    assert key["mean_ci"][0] < key["mean"] < key["mean_ci"][1] and key["n_effective"] < key["n"]


@pytest.mark.usefixtures("scorer")
def test_a_lower_bound_gate_travels_with_the_shards_and_applies_at_the_merge(tmp_path: Path) -> None:
    recs = _records(60, 9, weights=False)
    gates = {"graded": {"min_pass_rate": {"value": 0.55, "on": "lower_bound"}}}
    whole = _run(_config(tmp_path, recs, "whole", gates=gates))
    for i in range(2):
        _run(_config(tmp_path, recs, "sharded", gates=gates), shard=(i, 2))
    merged = merge(tmp_path / "sharded").summary
    assert merged["gates"] == whole["gates"] and merged["gates"][0]["on"] == "lower_bound"
    key = whole["evaluators"]["graded"]
    assert merged["gates"][0]["actual"] == pytest.approx(key["pass_rate_ci"][0], abs=1e-6)
    assert merged["status"] == whole["status"]
