"""The pytest plugin as a user runs it: a test file scoring inside tests, ``--assay-results``
writing an assay output, ``--assay-gate`` failing the session, ``assay report`` reading it."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = """
import pytest
from assay.evaluators import TrajectoryMatch
from assay.compat.openevals.exact import exact_match  # a plain function: log its score yourself
from assay.compat.openevals.trajectory.match import create_trajectory_match_evaluator

def traj(*names):
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
             for i, n in enumerate(names)]
    return [{"role": "user", "content": "refund order 7"},
            {"role": "assistant", "content": "", "tool_calls": calls}]

GOLD = traj("lookup_order", "process_refund")

@pytest.mark.parametrize("names", [("lookup_order", "process_refund"),
                                   ("lookup_order", "check_policy", "process_refund")])
def test_refund_flow(assay_eval, names):
    assay_eval.log_inputs("refund order 7")
    result = assay_eval.score(TrajectoryMatch(mode="superset"), outputs=traj(*names), reference_outputs=GOLD)
    assert result.passed
    assay_eval.log_feedback("helpfulness", HELPFULNESS)

def test_strict_with_a_compat_evaluator(assay_eval):
    ev = create_trajectory_match_evaluator(trajectory_match_mode="strict")
    r = assay_eval.score(ev, outputs=traj("lookup_order"), reference_outputs=GOLD)
    assert r.score == 0.0  # recorded as a failing score; the test itself passes

@pytest.mark.assay
def test_marked_only():
    assert exact_match(outputs=1, reference_outputs=1)["score"]

def test_not_an_eval_case():
    assert traj("a")[0]["role"] == "user"
"""


UNUSED = ("-p", "no:phoenix", "-p", "no:langsmith_plugin", "-p", "no:benchmark")


def run_pytest(tmp_path: Path, *args: str, helpfulness: float = 0.9) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_agent.py").write_text(TESTS.replace("HELPFULNESS", repr(helpfulness)))
    installed = any(ep.name == "assay" for ep in importlib.metadata.entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "assay.testing.pytest_plugin"]
    return subprocess.run(
        # third-party plugins this check does not use stay off (Phoenix's imports its server: slow)
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *UNUSED, *plugin, "test_agent.py", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_results_are_an_assay_output_that_report_reads(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = run_pytest(tmp_path, "--assay-results", str(out), "--assay-gate", "helpfulness:min_mean=0.8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "trajectory_superset_match: n=2 mean=1.000" in proc.stdout
    rows = [json.loads(line) for line in (out / "part-00000-00000.jsonl").read_text().splitlines()]
    ids = sorted(r["trace_id"] for r in rows)
    assert len(ids) == 4 and all(i.startswith("test_agent.py::") for i in ids)  # not_an_eval_case has no row
    by_id = {r["trace_id"].split("::")[1]: r["results"] for r in rows}
    assert by_id["test_strict_with_a_compat_evaluator"]["trajectory_strict_match"]["score"] == 0.0
    assert set(by_id["test_marked_only"]) == {"test_passed"}
    identity = {r["trace_id"].split("::")[1]: r.get("identity") for r in rows}
    assert identity["test_strict_with_a_compat_evaluator"]["trajectory_strict_match"].startswith("trajectory_match/")
    summary = json.loads((out / "_SUMMARY.json").read_text())
    assert summary["status"] == "ok" and summary["counts"]["read"] == 4
    assert summary["evaluators"]["helpfulness"]["mean"] == pytest.approx(0.9)
    assert summary["gates"][0]["passed"] is True
    assert (out / "_SUCCESS").exists()

    report = subprocess.run(
        [sys.executable, "-c", "from assay.cli import main; main()", "report", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    assert "helpfulness" in report.stdout and "trajectory_superset_match" in report.stdout


def test_a_failed_gate_fails_the_session(tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert run_pytest(tmp_path, "--assay-results", str(out)).returncode == 0
    assert (out / "_SUCCESS").exists()
    proc = run_pytest(
        tmp_path, "--assay-results", str(out), "--assay-gate", "helpfulness:min_mean=0.8", helpfulness=0.5
    )
    assert proc.returncode == 1, proc.stdout
    assert "GATE FAILED" in proc.stdout
    summary = json.loads((out / "_SUMMARY.json").read_text())
    assert summary["status"] == "gate_failed" and summary["exit_code"] == 3
    assert (out / "_SUCCESS").exists()  # the output is whole (as a run's is); its verdict is the summary's


def test_a_malformed_gate_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_pytest(tmp_path, "--assay-gate", "helpfulness>0.8")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "KEY:RULE=VALUE" in proc.stdout + proc.stderr


def test_without_options_the_plugin_writes_nothing(tmp_path: Path) -> None:
    proc = run_pytest(tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert not (tmp_path / "results").exists()


def test_assay_compare_reads_two_sessions_outputs(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    assert run_pytest(tmp_path, "--assay-results", str(before), helpfulness=0.9).returncode == 0
    assert run_pytest(tmp_path, "--assay-results", str(after), helpfulness=0.9).returncode == 0
    proc = subprocess.run(
        [sys.executable, "-c", "from assay.cli import main; main()", "compare", str(before), str(after), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert "trajectory_superset_match" in json.dumps(report)  # the same evaluators, paired on the test ids
