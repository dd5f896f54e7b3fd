"""The CLI as a user runs it: real subprocesses, real files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import agent_messages

ROOT = Path(__file__).resolve().parents[2]


def assay(*args: str, cwd: Path | None = None, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.fixture
def corpus(write_jsonl: Any) -> Path:
    recs = []
    for i in range(30):
        out = agent_messages(("search", {"q": f"q{i}"}), ("fetch", {"id": i}))
        ref = out if i % 3 else agent_messages(("search", {"q": f"q{i}"}), ("fetch", {"id": i}), ("submit", {}))
        recs.append({"id": f"t{i}", "messages": out, "reference_outputs": ref})
    return write_jsonl("corpus.jsonl", recs, raw_lines={5: "{broken", 12: '{"messages": "nope"}'})  # type: ignore[no-any-return]


def test_shipped_example_runs(tmp_path: Path) -> None:
    example = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", example, ignore=shutil.ignore_patterns("out", ".assay"))
    proc = assay("run", str(example / "run.yaml"))
    assert proc.returncode == 0, proc.stderr
    out = example / "out"
    summary = json.loads((out / "_SUMMARY.json").read_text())
    assert summary["status"] == "ok" and summary["counts"]["read"] == 43
    assert summary["counts"]["dead_letters"] == 2
    assert (out / "_SUCCESS").exists()
    assert "trajectory_strict_match" in proc.stdout


def test_score_file_to_file(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "res" / "scores.jsonl"
    proc = assay(
        "score",
        str(corpus),
        "-e",
        "trajectory_match:mode=superset",
        "-e",
        "tool_call_accuracy",
        "-o",
        str(out),
        "-q",
    )
    assert proc.returncode == 0, proc.stderr
    got = rows(out)
    assert len(got) == 30
    by_id = {r["trace_id"]: r["results"] for r in got}
    assert by_id["t1"]["trajectory_superset_match"]["score"] == 1.0
    assert by_id["t0"]["trajectory_superset_match"]["score"] == 0.0
    assert "submit" in by_id["t0"]["trajectory_superset_match"]["comment"]
    assert by_id["t0"]["tool_call_accuracy"]["score"] == pytest.approx(2 / 3)
    dead = rows(tmp_path / "res" / "scores.dead_letter.jsonl")
    assert sorted(d["line"] for d in dead) == [6, 13]
    assert all(d["file"] == str(corpus) for d in dead)
    summary = json.loads((tmp_path / "res" / "scores.jsonl._SUMMARY.json").read_text())
    assert summary["evaluators"]["trajectory_superset_match"]["mean"] == pytest.approx(20 / 30)
    assert summary["evaluators"]["tool_call_accuracy"]["scored"] == 30


def test_workers_give_the_same_rows(corpus: Path, tmp_path: Path) -> None:
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    assert assay("score", str(corpus), "-e", "trajectory_match", "-o", str(one), "-q", "--workers", "1").returncode == 0
    proc = assay("score", str(corpus), "-e", "trajectory_match", "-o", str(two), "-q", "--workers", "2")
    assert proc.returncode == 0, proc.stderr

    def key(r: dict[str, Any]) -> tuple[str, float]:
        return r["trace_id"], r["results"]["trajectory_strict_match"]["score"]

    assert sorted(map(key, rows(one))) == sorted(map(key, rows(two)))
    assert len(rows(tmp_path / "two.dead_letter.jsonl")) == 2


def test_stdin_and_compressed_output(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl.gz"
    proc = assay("score", "-", "-e", "trajectory_match", "-o", str(out), "-q", input=corpus.read_text())
    assert proc.returncode == 0, proc.stderr
    import gzip

    assert len(gzip.decompress(out.read_bytes()).splitlines()) == 30


def test_validate_reports_file_key_and_reason(tmp_path: Path) -> None:
    f = tmp_path / "run.yaml"
    bad = "  - name: trajectory_match\n    params: {mode: sideways}\n"
    f.write_text(f"source: {{path: x.jsonl}}\nevaluators:\n{bad}sink: {{path: out/}}\n")
    proc = assay("validate", str(f))
    assert proc.returncode == 2
    assert "run.yaml: evaluators[0] (trajectory_match)" in proc.stderr
    assert "params.mode" in proc.stderr and "sideways" in proc.stderr
    f.write_text("source: {path: x.jsonl}\nevaluators: [nope]\nsink: {path: out/}\n")
    proc = assay("validate", str(f))
    assert proc.returncode == 2 and "unknown evaluator 'nope'" in proc.stderr
    f.write_text("source: {path: x.jsonl}\nevaluators: [trajectory_match]\nsink: {path: out/}\n")
    proc = assay("validate", str(f))
    assert proc.returncode == 0 and "ok" in proc.stdout


def test_gate_failure_exits_3_and_dead_letter_threshold_exits_4(corpus: Path, tmp_path: Path) -> None:
    base = ["score", str(corpus), "-e", "trajectory_match", "-o", str(tmp_path / "o/"), "-q"]
    proc = assay(*base, "--set", "gates.trajectory_strict_match.min_mean=0.99")
    assert proc.returncode == 3, proc.stderr
    assert "gate trajectory_strict_match" in proc.stderr
    proc = assay(*base, "--set", "limits.max_dead_letters=1")
    assert proc.returncode == 4, proc.stderr


def test_missing_input_exits_1_as_everywhere(tmp_path: Path) -> None:
    """A missing input is one rule for every command and place: exit 1, retryable (not landed yet)."""
    out = str(tmp_path / "o.jsonl")
    proc = assay("score", str(tmp_path / "nope.jsonl"), "-e", "trajectory_match", "-o", out)
    assert proc.returncode == 1
    assert "no such file" in proc.stderr


def test_evaluators_list_and_show() -> None:
    proc = assay("evaluators", "list")
    assert proc.returncode == 0
    assert "trajectory_match" in proc.stdout and "tool_call_accuracy" in proc.stdout
    proc = assay("evaluators", "show", "trajectory_match")
    assert proc.returncode == 0
    for text in ("tool_args_match_mode", "subsequence", "example run-file snippet", "name: trajectory_match"):
        assert text in proc.stdout
    assert assay("evaluators", "show", "nope").returncode == 2


def test_normalize_shows_how_records_are_read(corpus: Path) -> None:
    proc = assay("normalize", str(corpus), "-n", "0")
    assert proc.returncode == 0, proc.stderr
    assert "format=openai" in proc.stdout
    assert 'search({"q":"q0"})' in proc.stdout
    assert ":6  cannot normalize (parse)" in proc.stdout
    proc = assay("normalize", str(corpus), "--json", "-n", "0")
    items = [json.loads(line) for line in proc.stdout.splitlines()]
    assert items[0]["trace"]["messages"][1]["tool_calls"][0]["args"] == {"q": "q0"}
    # every line a trace ({position, format, trace} and the reading) or exactly {position, error, stage}
    assert {frozenset(i) for i in items} == {
        frozenset({"position", "reading", "format", "trace"}),
        frozenset({"position", "error", "stage"}),
    }
    assert "JSON lines: one record per line" in proc.stderr


def test_normalize_says_how_a_json_array_is_read(tmp_path: Path) -> None:
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(agent_messages(("search", {"q": "x"})), indent=2))
    proc = assay("normalize", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    item = json.loads(line)
    assert set(item) == {"position", "reading", "format", "trace"}
    assert item["trace"]["messages"][1]["tool_calls"][0]["args"] == {"q": "x"}
    assert "read as one trace" in item["reading"] and "read as one trace" in proc.stderr
    proc = assay("normalize", str(path), "--json", "--input-format", "json")
    assert len(proc.stdout.splitlines()) == len(agent_messages(("search", {"q": "x"})))
    assert "one record per array element" in proc.stderr


def test_session_transcripts_one_trace_per_session(tmp_path: Path) -> None:
    fixture = ROOT / "tests" / "fixtures" / "formats" / "claude_code_session.jsonl"
    out = tmp_path / "o.jsonl"
    proc = assay(
        "score",
        str(fixture),
        "--read-mode",
        "sessions",
        "-e",
        "tool_use:expected_tool=get_forecast",
        "-o",
        str(out),
        "-q",
    )
    assert proc.returncode == 0, proc.stderr
    (row,) = rows(out)
    assert row["results"]["tool_use:get_forecast"]["score"] == 1.0
    assert row["position"]["line"] == 1
    proc = assay("normalize", str(fixture), "--read-mode", "sessions")
    assert "format=claude_code" in proc.stdout and "get_weather" in proc.stdout


def test_user_function_from_the_current_directory(corpus: Path, tmp_path: Path) -> None:
    (tmp_path / "my_checks.py").write_text("def few_calls(outputs, trace):\n    return len(trace.tool_calls()) <= 1\n")
    out = tmp_path / "o.jsonl"
    proc = subprocess.run(
        ["assay", "score", str(corpus), "-e", "python:function=my_checks:few_calls", "-o", str(out), "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert {r["results"]["few_calls"]["score"] for r in rows(out)} == {0.0}  # every trace makes 2 calls


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_during_start_up_exits_130_with_one_line(tmp_path: Path, sig: str) -> None:
    """Issue 17: a signal before the run installs its own handlers (here: while a user evaluator's
    module is imported) exits 130 saying so, never 143 or a traceback; nothing is published."""
    import signal
    import time

    marker = tmp_path / "importing"
    (tmp_path / "slowstart.py").write_text(
        "import pathlib, time\n"
        f"pathlib.Path({str(marker)!r}).touch()\n"
        "time.sleep(30)\n"
        "def score(outputs, reference_outputs, **kw):\n    return 1.0\n"
    )
    (tmp_path / "in.jsonl").write_text('{"id": "t0", "outputs": "a", "reference_outputs": "a"}\n')
    cfg = {
        "source": {"path": "in.jsonl"},
        "evaluators": [{"name": "python", "params": {"function": "slowstart:score"}}],
        "sink": {"path": "out/"},
    }
    (tmp_path / "run.yaml").write_text(json.dumps(cfg))
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", "run.yaml", "-q"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert marker.exists(), proc.communicate(timeout=60)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "assay: interrupted" in err
    assert not (tmp_path / "out" / "_SUCCESS").exists()
