"""``assay compare``: paired tests per key, Holm, attrition, identities, exit codes, --json."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assay.report import compare_runs
from assay.report.compare_command import compare_command

IDENT = {"correctness": "llm_judge/aaaaaaaaaa/bbbbbbbbbb/gpt-4o-mini", "relevance": "python/cccccccccc/-/-"}


def write_run(
    path: Path,
    rows: list[tuple[str, float, float]],
    *,
    identity: dict[str, str] | None = None,
    thresholds: dict[str, float] | None = None,
) -> str:
    """A results directory: rows (trace id, correctness 0/1, relevance score) and a summary."""
    path.mkdir(parents=True, exist_ok=True)
    ident = identity or IDENT
    with open(path / "part-00000.jsonl", "w") as f:
        for tid, correct, relevance in rows:
            results = {
                "correctness": {"key": "correctness", "score": correct},
                "relevance": {"key": "relevance", "score": relevance},
            }
            f.write(json.dumps({"trace_id": tid, "results": results, "identity": ident}) + "\n")
    th = {"correctness": 0.5, "relevance": 0.5, **(thresholds or {})}
    summary = {"run_id": path.name, "evaluators": {k: {"threshold": v} for k, v in th.items()}}
    (path / "_SUMMARY.json").write_text(json.dumps(summary))
    return str(path)


def pair(seed: int, n: int = 400, *, drop: float = 0.0) -> tuple[list[Any], list[Any]]:
    """Two runs over the same traces: each trace has its own difficulty; the after run draws its
    verdicts again (noise) and, with ``drop``, passes less often (a planted regression)."""
    rng = random.Random(seed)
    before, after = [], []
    for i in range(n):
        p = rng.betavariate(4, 1.5)
        q = rng.random()
        before.append((f"t{i}", float(rng.random() < p), round(min(1.0, max(0.0, q + rng.gauss(0, 0.1))), 3)))
        after.append((f"t{i}", float(rng.random() < p - drop), round(min(1.0, max(0.0, q + rng.gauss(0, 0.1))), 3)))
    return before, after


def test_planted_regression_exits_3_and_noise_exits_0_at_the_nominal_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planted, noise = [], []
    for seed in range(50):
        before, after = pair(seed)
        b = write_run(tmp_path / f"n{seed}" / "before", before)
        a = write_run(tmp_path / f"n{seed}" / "after", after)
        noise.append(compare_command(b, a, json_out=True, fail_on="regression"))
        before, after = pair(seed, drop=0.15)
        b = write_run(tmp_path / f"p{seed}" / "before", before)
        a = write_run(tmp_path / f"p{seed}" / "after", after)
        planted.append(compare_command(b, a, json_out=True, fail_on="regression"))
    capsys.readouterr()
    assert set(noise) <= {0, 3} and set(planted) <= {0, 3}
    false_positives = noise.count(3)
    assert false_positives <= 0.05 * 50, false_positives  # no more than the nominal rate
    assert planted.count(3) >= 48, planted.count(3)


def test_json_is_one_object_with_mcnemar_and_holm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    smt = pytest.importorskip("statsmodels.stats.contingency_tables")
    before, after = pair(3, drop=0.15)
    code = compare_command(
        write_run(tmp_path / "b", before), write_run(tmp_path / "a", after), json_out=True, fail_on="regression"
    )
    out = capsys.readouterr()
    data = json.loads(out.out)  # the whole of stdout is one JSON object
    assert out.err == "" and code == 3 == data["exit_code"]
    c = data["keys"]["correctness"]
    b_, c_ = c["pass_to_fail"], c["fail_to_pass"]
    assert c["p_value"] == pytest.approx(smt.mcnemar([[0, b_], [c_, 0]], exact=True).pvalue, abs=1e-9)
    assert c["p_value_holm"] >= c["p_value"] and c["regressed"] and data["regressions"] == ["correctness"]
    assert c["pass_rate_delta"]["delta"] < 0 and c["pass_rate_delta"]["method"] == "t"  # 400 pairs: t
    lo, hi = c["pass_rate_delta"]["ci"]
    assert lo < c["pass_rate_delta"]["delta"] < hi < 0
    r = data["keys"]["relevance"]
    assert r["mean_p_value"] is not None and not r["regressed"]  # continuous: Wilcoxon, unchanged
    assert data["comparable"] and data["matched"] == 400
    assert data["keys_only_before"] == data["keys_only_after"] == []


def test_attrition_and_flips_with_their_traces(tmp_path: Path) -> None:
    before = [("t1", 1.0, 0.9), ("t2", 1.0, 0.8), ("t3", 0.0, 0.1), ("gone", 1.0, 0.5)]
    after = [("t1", 0.0, 0.2), ("t2", 1.0, 0.8), ("t3", 1.0, 0.7), ("new", 1.0, 0.5)]
    cmp = compare_runs(write_run(tmp_path / "a", after), write_run(tmp_path / "b", before), trajectories=False)
    assert (cmp.matched, cmp.only_baseline, cmp.only_current) == (3, 1, 1)
    assert cmp.only_baseline_sample == ["gone"] and cmp.only_current_sample == ["new"]
    flips = {(f.trace_id, f.key, f.before, f.after) for f in cmp.flips}
    assert ("t1", "correctness", "pass", "fail") in flips and ("t3", "correctness", "fail", "pass") in flips
    from assay.report.compare_command import comparison_dict

    listed = comparison_dict(cmp)["flips"]
    assert {"trace_id": "t1", "key": "correctness", "before": "pass", "after": "fail"}.items() <= listed[0].items()
    assert listed[0]["score_before"] == 1.0 and listed[0]["score_after"] == 0.0 and "comment_after" in listed[0]
    k = {p.key: p for p in cmp.paired}["correctness"]
    assert (k.n, k.regressed, k.improved, k.p_value) == (3, 1, 1, 1.0)
    assert k.pass_rate_delta is not None and k.pass_rate_delta.method == "bootstrap"  # small: bootstrap


def test_changed_evaluator_is_not_comparable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = pair(1)
    b = write_run(tmp_path / "b", before)
    changed = {**IDENT, "correctness": "llm_judge/aaaaaaaaaa/dddddddddd/gpt-4o"}
    a = write_run(tmp_path / "a", after, identity=changed, thresholds={"relevance": 0.7})
    assert compare_command(b, a, json_out=True, fail_on="regression") == 2
    data = json.loads(capsys.readouterr().out)
    assert not data["comparable"]
    assert data["not_comparable"]["correctness"] == [
        "prompt changed (bbbbbbbbbb -> dddddddddd)",
        "judge model changed (gpt-4o-mini -> gpt-4o)",
    ]
    assert data["not_comparable"]["relevance"] == ["threshold 0.5 -> 0.7"]
    assert compare_command(b, a, json_out=True, fail_on="regression", allow_changes=True) in (0, 3)
    assert compare_command(b, a, json_out=True) == 0  # without --fail-on it only says so
    capsys.readouterr()


def test_cli_compare_exit_code_and_table(tmp_path: Path) -> None:
    before, after = pair(5, drop=0.15)
    b, a = write_run(tmp_path / "b", before), write_run(tmp_path / "a", after)
    root = Path(__file__).resolve().parents[3]
    cmd = [sys.executable, "-m", "assay.cli", "compare", b, a, "--fail-on", "regression"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "correctness" in proc.stdout and "significantly worse" in proc.stderr
    ok = subprocess.run([*cmd[:-2], "--json"], capture_output=True, text=True, cwd=root, timeout=120)
    assert ok.returncode == 0 and json.loads(ok.stdout)["regressions"] == ["correctness"]


def test_evaluator_identity_names_what_changed() -> None:
    from assay.evaluators.identity import evaluator_identity, parse_identity
    from assay.evaluators.llm_judge import LLMJudge

    base = parse_identity(evaluator_identity(LLMJudge(prompt="correctness", model="openai:gpt-4o-mini")))
    assert base["evaluator"] == "llm_judge" and base["judge_model"] == "gpt-4o-mini" and base["prompt"]
    stricter = parse_identity(
        evaluator_identity(LLMJudge(prompt="correctness", model="openai:gpt-4o-mini", threshold=0.8))
    )
    assert stricter["params"] != base["params"] and stricter["prompt"] == base["prompt"]
    other_model = parse_identity(evaluator_identity(LLMJudge(prompt="correctness", model="openai:gpt-4o")))
    assert other_model["params"] == base["params"] and other_model["judge_model"] == "gpt-4o"
    own = parse_identity(evaluator_identity(LLMJudge(prompt="Is {outputs} polite?", judge={"model": "m1"})))
    assert own["prompt"] != base["prompt"] and own["judge_model"] == "m1"


def test_rows_of_a_run_carry_the_identity(tmp_path: Path) -> None:
    import anyio

    from assay.config import RunConfig
    from assay.pipeline.run import execute

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "t1", "inputs": "q", "outputs": "a", "reference_outputs": "a"}) + "\n")
    config = RunConfig.model_validate(
        {
            "source": {"path": str(src)},
            "evaluators": [{"name": "exact_match"}],
            "sink": {"path": str(tmp_path / "out") + "/"},
            "state_dir": str(tmp_path / ".assay"),
        }
    )
    anyio.run(lambda: execute(config, use_cache=False))
    row = json.loads((next((tmp_path / "out").glob("part-*.jsonl"))).read_text().splitlines()[0])
    assert row["identity"]["exact_match"].startswith("exact_match/") and row["identity"]["exact_match"].endswith("/-/-")


def test_html_comparison_says_whether_a_delta_is_more_than_noise(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    from assay.report import render_html

    before, after = pair(2, drop=0.15)
    changed = {**IDENT, "relevance": "python/eeeeeeeeee/-/-"}
    a = write_run(tmp_path / "a", after, identity=changed)
    cmp = compare_runs(a, write_run(tmp_path / "b", before), trajectories=False)
    text = render_html(cmp.current, comparison=cmp)
    assert "More than noise?" in text and "McNemar p (Holm)" in text
    section = text.split("More than noise?")[1].split("</table>")[0]
    assert "significantly worse" in section.split("relevance")[0]  # correctness, listed first
    assert "not comparable: params changed" in section


def test_report_compare_names_the_significant_regressions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from assay.report.command import report_command

    before, after = pair(2, drop=0.15)
    report_command([write_run(tmp_path / "a", after)], compare=write_run(tmp_path / "b", before))
    out = capsys.readouterr().out
    assert "significantly worse (paired, Holm, alpha 0.05): correctness" in " ".join(out.split())


def test_identity_of_a_callable_param_is_stable_across_processes() -> None:
    import subprocess
    import sys

    code = (
        "from assay.evaluators.custom import PythonEvaluator; from assay.evaluators.identity import evaluator_identity;"
        "import json; print(evaluator_identity(PythonEvaluator(function=json.dumps)))"
    )
    root = Path(__file__).resolve().parents[3]
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root).stdout for _ in "ab"}
    assert len(runs) == 1 and next(iter(runs)).startswith("python/")


def test_a_key_dropped_from_the_run_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = pair(4)
    b = write_run(tmp_path / "b", before)
    a = write_run(tmp_path / "a", after)
    part = Path(a) / "part-00000.jsonl"
    rows = [json.loads(x) for x in part.read_text().splitlines()]
    for r in rows:
        del r["results"]["relevance"]
    part.write_text("".join(json.dumps(r) + "\n" for r in rows))
    compare_command(b, a, json_out=True)
    data = json.loads(capsys.readouterr().out)
    assert data["keys_only_before"] == ["relevance"] and list(data["keys"]) == ["correctness"]
    assert "result keys only in the baseline (not compared): relevance" in data["messages"]


def test_runs_without_a_common_trace_are_compared_unpaired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = write_run(tmp_path / "b", [("x1", 1.0, 0.5), ("x2", 1.0, 0.5)])
    a = write_run(tmp_path / "a", [("y1", 0.0, 0.5), ("y2", 0.0, 0.5)])
    assert compare_command(b, a, json_out=True, fail_on="regression") == 0  # 2 vs 2 traces: within noise
    data = json.loads(capsys.readouterr().out)
    assert data["matched"] == 0 and data["design"] == "unpaired"
    assert any(m.startswith("no trace is in both runs: compared as independent samples") for m in data["messages"])
    assert data["keys"]["correctness"]["pass_rate_delta"]["test"] == "two-proportion z-test"
    c = write_run(tmp_path / "c", [("z1", 1.0, 0.5)])
    d = tmp_path / "d"
    write_run(d, [("w1", 1.0, 0.5)])
    rows = [json.loads(x) for x in (d / "part-00000.jsonl").read_text().splitlines()]
    for r in rows:
        r["results"] = {"other": {"key": "other", "score": 1.0}}
    (d / "part-00000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert compare_command(c, str(d), json_out=True, fail_on="regression") == 2  # no key in common: nothing tested
    assert "no result key was tested in both runs" in json.loads(capsys.readouterr().out)["messages"]


def nights(seed: int, n: int, pass_rate: float, relevance: float, prefix: str) -> list[tuple[str, float, float]]:
    """A night of production traffic: its own trace ids."""
    rng = random.Random(seed)
    return [
        (f"{prefix}{i}", float(rng.random() < pass_rate), round(min(1.0, max(0.0, rng.gauss(relevance, 0.2))), 4))
        for i in range(n)
    ]


def test_two_nights_unpaired_match_scipy_and_a_planted_regression_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    before = nights(1, 500, 0.8, 0.7, "mon-")
    after = nights(2, 450, 0.7, 0.62, "tue-")
    b, a = write_run(tmp_path / "mon", before), write_run(tmp_path / "tue", after)
    assert compare_command(b, a, json_out=True, fail_on="regression") == 3
    data = json.loads(capsys.readouterr().out)
    assert data["design"] == "unpaired" and data["matched"] == 0
    assert data["tests"] == {
        "pass_rate": "two-proportion z-test, Newcombe interval",
        "mean": "Welch t-test",
        "correction": "Holm",
    }
    assert set(data["regressions"]) == {"correctness", "relevance"}
    x1, x2 = sum(c for _, c, _ in before), sum(c for _, c, _ in after)
    chi2 = scipy_stats.chi2_contingency([[x1, 500 - x1], [x2, 450 - x2]], correction=False)
    pass_delta = data["keys"]["correctness"]["pass_rate_delta"]
    assert pass_delta["p_value"] == pytest.approx(chi2.pvalue, rel=1e-6)
    assert pass_delta["delta"] == pytest.approx(x2 / 450 - x1 / 500, abs=1e-6)
    assert pass_delta["ci"][1] < 0 and pass_delta["ci_method"] == "Newcombe"
    welch = scipy_stats.ttest_ind([r for *_, r in after], [r for *_, r in before], equal_var=False)
    mean_delta = data["keys"]["relevance"]["mean_delta"]
    assert mean_delta["test"] == "Welch t-test" and mean_delta["p_value"] == pytest.approx(welch.pvalue, rel=1e-6)
    ci = welch.confidence_interval()
    assert mean_delta["ci"] == pytest.approx([ci.low, ci.high], abs=1e-5)
    assert data["keys"]["correctness"]["mean_delta"] is None  # 0/1 scores: the pass rate, tested once
    # the same traffic twice (other ids): within noise
    same = write_run(tmp_path / "wed", nights(3, 480, 0.8, 0.7, "wed-"))
    assert compare_command(b, same, json_out=True, fail_on="regression") == 0
    assert json.loads(capsys.readouterr().out)["regressions"] == []


def test_report_compare_of_two_nights_says_which_test(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from assay.report.command import report_command

    b = write_run(tmp_path / "mon", nights(1, 500, 0.8, 0.7, "mon-"))
    a = write_run(tmp_path / "tue", nights(2, 450, 0.7, 0.62, "tue-"))
    report_command([a], compare=b)
    out = " ".join(capsys.readouterr().out.split())
    assert "independent samples" in out and "two-proportion z-test" in out and "Welch t-test" in out
    assert "significantly worse (unpaired, Holm, alpha 0.05): correctness, relevance" in out
    pytest.importorskip("plotly")
    from assay.report import render_html

    cmp = compare_runs(a, b, trajectories=False)
    section = render_html(cmp.current, comparison=cmp).split("More than noise?")[1].split("</table>")[0]
    assert "compared as independent samples" in section and "Welch p (Holm)" in section
    assert section.count("significantly worse") == 2


def test_terminal_tables_are_inert_to_markup_and_control_characters(tmp_path: Path) -> None:
    from assay.report.terminal import console

    evil = "[/bold]\x1b]0;pwned\x07"
    b = write_run(tmp_path / "b", [(evil, 1.0, 0.5), ("t2", 1.0, 0.5)])
    a = write_run(tmp_path / "a", [(evil, 0.0, 0.5), ("t2", 1.0, 0.5)])
    with console.capture() as captured:
        assert compare_command(b, a, flips=5) == 0
    out = captured.get()
    assert "[/bold]" in out and "\x1b]0;" not in out and "\\x1b" in out
