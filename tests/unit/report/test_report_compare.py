"""Two runs side by side: deltas, flipped verdicts matched by trace id, regressions first."""

from __future__ import annotations

from pathlib import Path

import orjson

from assay.report import compare_runs
from tests.unit.report.synth import judge_verdict, make_row, write_run


def test_flips_match_the_known_set(tmp_path: Path) -> None:
    n = 800
    write_run(tmp_path / "before", n, salt="a")
    write_run(tmp_path / "now", n, salt="b", skip={5, 6}, started_at="2026-11-22T02:00:00+00:00")
    cmp = compare_runs(str(tmp_path / "now"), str(tmp_path / "before"), flips=1000, trajectories=False)
    errors = {i for i in range(n) if make_row(i)["results"]["correctness"]["error"]}
    expected_reg = {
        f"t{i:05d}"
        for i in range(n)
        if i not in (5, 6) and judge_verdict(i, "a") == 1.0 and judge_verdict(i, "b") == 0.0 and i not in errors
    }
    expected_imp = {
        f"t{i:05d}"
        for i in range(n)
        if i not in (5, 6) and judge_verdict(i, "a") == 0.0 and judge_verdict(i, "b") == 1.0 and i not in errors
    }
    assert expected_reg and expected_imp
    assert {f.trace_id for f in cmp.flips if f.regression} == expected_reg
    assert {f.trace_id for f in cmp.flips if not f.regression} == expected_imp
    assert all(f.key == "correctness" for f in cmp.flips)
    assert cmp.flips[0].regression  # regressions are listed first
    assert cmp.matched == n - 2 and cmp.only_baseline == 2 and cmp.only_current == 0
    correctness = next(d for d in cmp.deltas if d.key == "correctness")
    assert correctness.regressed == len(expected_reg) and correctness.improved == len(expected_imp)
    unchanged = next(d for d in cmp.deltas if d.key == "trajectory_strict_match")
    assert unchanged.regressed == 0 and unchanged.improved == 0
    # both sides' comments are shown
    f = cmp.flips[0]
    assert f.comment_before.startswith("right answer") and f.comment_after.startswith("wrong answer")
    assert (f.score_before, f.score_after) == (1.0, 0.0)


def test_regressions_first_and_bounded(tmp_path: Path) -> None:
    write_run(tmp_path / "before", 400, salt="a")
    write_run(tmp_path / "now", 400, salt="b")
    cmp = compare_runs(str(tmp_path / "now"), str(tmp_path / "before"), flips=4, trajectories=False)
    assert len([f for f in cmp.flips if f.regression]) <= 4 and len([f for f in cmp.flips if not f.regression]) <= 2
    deltas = [d.pass_rate_delta for d in cmp.deltas if d.pass_rate_delta is not None]
    assert deltas == sorted(deltas)


def test_keys_present_in_one_run_only(tmp_path: Path) -> None:
    write_run(tmp_path / "before", 20)
    write_run(tmp_path / "now", 20)
    summary = tmp_path / "now" / "_SUMMARY.json"
    data = orjson.loads(summary.read_bytes())
    data["evaluators"]["new_key"] = data["evaluators"].pop("trajectory_strict_match")
    summary.write_bytes(orjson.dumps(data))
    for part in (tmp_path / "now").glob("part-*"):
        part.unlink()
    cmp = compare_runs(str(tmp_path / "now"), str(tmp_path / "before"))
    keys = {d.key: d for d in cmp.deltas}
    assert keys["new_key"].baseline is None and keys["new_key"].pass_rate_delta is None
    assert keys["trajectory_strict_match"].current is None
    assert [d.key for d in cmp.deltas][-2:] == sorted(["new_key", "trajectory_strict_match"])  # no delta: last
