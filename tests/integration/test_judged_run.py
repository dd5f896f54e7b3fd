"""A whole judged run as a user runs it: `assay run` against the stand-in judge server over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.testing.judge_server import JudgeServerThread, Reply
from tests.conftest import agent_messages


@pytest.fixture
def corpus(write_jsonl: Any) -> Path:
    recs = [
        {
            "id": f"t{i}",
            "inputs": f"question {i}",
            "messages": agent_messages(("search", {"q": i}), final=f"answer {i}"),
            "reference_outputs": f"answer {i}",
        }
        for i in range(40)
    ]
    return write_jsonl("corpus.jsonl", recs, raw_lines={3: "{not json"})  # type: ignore[no-any-return]


def run_file(tmp_path: Path, url: str, **limits: Any) -> Path:
    f = tmp_path / "run.yaml"
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "judges": {
            "standin": {
                "provider": "openai",
                "base_url": f"{url}/v1",
                "model": "judge-1",
                "timeout": 2,
                "max_retries": 4,
                "rpm": 6000,
                "max_concurrency": 8,
                "input_price_per_mtok": 1.0,
                "output_price_per_mtok": 2.0,
            },
        },
        "evaluators": [
            {"name": "trajectory_match", "params": {"mode": "superset"}},
            {"name": "llm_judge", "params": {"prompt": "correctness", "judge": "standin"}},
        ],
        "sink": {"path": "out/"},
        "limits": {"batch_size": 8, **limits},
    }
    f.write_text(json.dumps(cfg))
    return f


def assay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True, timeout=300)


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


@pytest.fixture
def server() -> Iterator[JudgeServerThread]:
    with JudgeServerThread(latency=0.01, seed=3) as s:
        yield s


def test_judged_run_then_cached_rerun(tmp_path: Path, corpus: Path, server: JudgeServerThread) -> None:
    f = run_file(tmp_path, server.url)
    proc = assay("run", str(f), "-q")
    assert proc.returncode == 0, proc.stderr
    first = rows(tmp_path / "out")
    assert len(first) == 40
    assert all(r["results"]["correctness"]["score"] in (0.0, 1.0) for r in first)
    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert summary["counts"]["dead_letters"] == 1
    assert summary["totals"]["requests"] == 40
    assert summary["evaluators"]["correctness"]["input_tokens"] > 0
    assert summary["evaluators"]["correctness"]["cost_usd"] > 0
    requests_before = server.stats.requests

    proc = assay("run", str(f), "-q")
    assert proc.returncode == 0, proc.stderr
    assert server.stats.requests == requests_before  # every verdict came from the cache
    second = rows(tmp_path / "out")

    def scores(rs: list[dict[str, Any]]) -> dict[str, Any]:
        return {r["trace_id"]: r["results"]["correctness"]["score"] for r in rs}

    assert scores(first) == scores(second)


def test_budget_stop_exits_5_and_resumes(tmp_path: Path, corpus: Path, server: JudgeServerThread) -> None:
    # each call costs ~1e-4 $ at these prices; a budget of 1e-3 stops the run early
    f = run_file(tmp_path, server.url, budget_usd=0.001)
    proc = assay("run", str(f), "-q", "--no-cache")
    assert proc.returncode == 5, proc.stderr
    assert "resume" in proc.stderr
    partial = rows(tmp_path / "out")
    assert 0 < len(partial) < 40
    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert summary["status"] == "budget"
    assert not (tmp_path / "out" / "_SUCCESS").exists()
    # spent up to the call that would cross the budget: never over it, never a call's worth short
    spent, calls = summary["totals"]["cost_usd"], summary["totals"]["requests"]
    assert 0.001 - 2 * spent / calls < spent <= 0.001

    proc = assay("run", str(f), "-q", "--set", "limits.budget_usd=100")
    assert proc.returncode == 0, proc.stderr
    final = rows(tmp_path / "out")
    assert sorted(r["trace_id"] for r in final) == sorted(f"t{i}" for i in range(40))  # nothing lost, no duplicates
    assert (tmp_path / "out" / "_SUCCESS").exists()


def test_flaky_judge_every_trace_gets_a_row(tmp_path: Path, corpus: Path) -> None:
    with JudgeServerThread(latency=0.005, error_rate=0.2, hang_rate=0.05, seed=11) as s:
        f = run_file(tmp_path, s.url)
        proc = assay("run", str(f), "-q", "--no-cache")
        assert proc.returncode == 0, proc.stderr
    got = rows(tmp_path / "out")
    assert len(got) == 40
    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert summary["totals"]["retries"] >= 1
    ks = summary["evaluators"]["correctness"]
    assert ks["scored"] + ks["errors"] == 40


def test_dry_run_estimates_without_calling(tmp_path: Path, corpus: Path, server: JudgeServerThread) -> None:
    f = run_file(tmp_path, server.url)
    proc = assay("run", str(f), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert server.stats.requests == 0
    assert "40" in proc.stdout and "estimated cost" in proc.stdout


def test_sigterm_stops_cleanly_and_rerun_resumes(tmp_path: Path, corpus: Path) -> None:
    import signal

    with JudgeServerThread(latency=0.3, seed=5) as s:
        f = run_file(tmp_path, s.url, workers=1)
        cmd = [sys.executable, "-m", "assay.cli", "run", str(f), "-q", "--no-cache"]
        proc = signal_after_requests(cmd, s, signal.SIGTERM)
        assert proc.returncode == 130, proc.stderr
        partial = rows(tmp_path / "out")
        assert 0 < len(partial) < 40
        summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
        assert summary["status"] == "interrupted"

        proc2 = assay("run", str(f), "-q", "--no-cache")
        assert proc2.returncode == 0, proc2.stderr
    final = rows(tmp_path / "out")
    assert sorted(r["trace_id"] for r in final) == sorted(f"t{i}" for i in range(40))


@pytest.mark.parametrize("sink", ["out/", "out.jsonl"])
def test_sigterm_stops_every_worker_and_rerun_resumes_each_shard(tmp_path: Path, corpus: Path, sink: str) -> None:
    """``--workers 2``: the parent forwards SIGTERM, each worker drains and checkpoints, nothing is
    orphaned, and the same command completes every shard. A file sink publishes the file only when
    the run is whole; a directory sink keeps its finished parts (without ``_SUCCESS``)."""
    import signal

    with JudgeServerThread(latency=0.3, seed=5) as s:
        _, cmd = sharded_run_file(tmp_path, s.url, sink)
        proc = signal_after_requests(cmd, s, signal.SIGTERM)
        assert proc.returncode == 130, proc.stderr
        assert "resume" in proc.stderr
        out = tmp_path / sink
        summary_path = out / "_SUMMARY.json" if sink.endswith("/") else tmp_path / "out.jsonl._SUMMARY.json"

        def got() -> list[dict[str, Any]]:
            if sink.endswith("/"):
                return rows(out)
            return [json.loads(line) for line in out.read_text().splitlines()]

        if sink.endswith("/"):
            assert 0 < len(got()) < 40
            assert not (out / "_SUCCESS").exists()
        else:
            assert not out.exists()  # never a partial file under the final name
        summary = json.loads(summary_path.read_text())
        assert summary["status"] == "interrupted" and summary["workers"] == 2
        assert 0 < summary["counts"]["scored"] < 40

        proc2 = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc2.returncode == 0, proc2.stderr
    final = got()
    assert sorted(r["trace_id"] for r in final) == sorted(f"t{i}" for i in range(40))
    summary = json.loads(summary_path.read_text())
    assert summary["status"] == "ok"
    assert summary["counts"]["scored"] == 40 and summary["counts"]["dead_letters"] == 1


@pytest.mark.skipif(sys.platform != "linux", reason="workers follow their parent's death through prctl (Linux)")
def test_parent_killed_mid_run_loses_nothing(tmp_path: Path, corpus: Path) -> None:
    """SIGKILL to the parent of ``--workers 2``: the workers are told to stop (parent-death signal),
    checkpoint and keep their unmerged rows in scratch; the rerun merges those with the rest. An
    older file at the sink path is replaced, not appended to (it was never this run's output)."""
    import signal
    import time

    with JudgeServerThread(latency=0.3, seed=5) as s:
        f, cmd = sharded_run_file(tmp_path, s.url, "out.jsonl")
        (tmp_path / "out.jsonl").write_text('{"stale": "row from another day"}\n')
        signal_after_requests(cmd, s, signal.SIGKILL)
        deadline = time.monotonic() + 60  # the orphaned workers stop by themselves
        while time.monotonic() < deadline and _workers_alive(str(f)):
            time.sleep(0.1)
        assert not _workers_alive(str(f))
        proc2 = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc2.returncode == 0, proc2.stderr
    final = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted(r["trace_id"] for r in final) == sorted(f"t{i}" for i in range(40))
    assert (tmp_path / ".assay" / "checkpoints").is_dir()
    assert not list((tmp_path / ".assay" / "checkpoints").glob("*.json"))


@pytest.mark.skipif(sys.platform != "linux", reason="workers follow their parent's death through prctl (Linux)")
def test_judge_stats_after_a_killed_workers_2_lineage(tmp_path: Path, corpus: Path) -> None:
    """kill -9 to a ``--workers 2`` parent (the workers abandon their unanswered calls), then the
    same command to the end: the summary counts each request once and no abandoned call as an
    error, and the configured rate is the run's (each attempt's shares added up once), not the
    sum over every attempt of every writer (it said 12,000 rpm and thousands of errors)."""
    import signal
    import time

    with JudgeServerThread(latency=1.5, seed=5) as s:  # calls outlive a stopping worker's grace
        f, cmd = sharded_run_file(tmp_path, s.url, "out/")
        signal_after_requests(cmd, s, signal.SIGKILL, requests=12)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _workers_alive(str(f)):
            time.sleep(0.1)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        answered = s.stats.requests
    final = rows(tmp_path / "out")
    assert sorted(r["trace_id"] for r in final) == sorted(f"t{i}" for i in range(40))
    assert not any(r["results"]["correctness"].get("error") for r in final)
    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    judge = summary["judges"]["standin"]
    assert judge["errors"] == 0 and summary["totals"]["errors"] == 0
    assert judge["abandoned"] >= 1  # the killed attempt's unanswered calls, counted apart
    assert judge["configured_rpm"] == 6000
    assert judge["requests"] <= answered


def signal_after_requests(
    cmd: list[str], server: JudgeServerThread, sig: int, requests: int = 10
) -> subprocess.CompletedProcess[str]:
    """Start ``cmd``, send it ``sig`` once the judge has seen ``requests`` requests, wait for it."""
    import time

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while server.stats.requests < requests and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def sharded_run_file(tmp_path: Path, url: str, sink: str) -> tuple[Path, list[str]]:
    """A run file with the given sink, and the command running it with ``--workers 2``."""
    f = run_file(tmp_path, url, workers=1)
    cfg = json.loads(f.read_text())
    cfg["sink"] = {"path": sink}
    f.write_text(json.dumps(cfg))
    return f, [sys.executable, "-m", "assay.cli", "run", str(f), "-q", "--no-cache", "--workers", "2"]


def _workers_alive(run_file: str) -> bool:
    """Any process whose command line names ``run_file`` (read from /proc)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if run_file.encode() in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def test_ctrl_c_while_judge_calls_hang_exits_130_with_a_summary(tmp_path: Path, corpus: Path) -> None:
    """Every judge call hangs: SIGINT stops reading, the grace period ends the hung calls, and the run
    still writes its summary and exits 130 (issue 8, 1b)."""
    import signal

    with JudgeServerThread(latency=0.01, seed=5, hang_rate=1.0) as s:
        f = run_file(tmp_path, s.url, grace_period_s=1)
        cmd = [sys.executable, "-m", "assay.cli", "run", str(f), "-q", "--no-cache"]
        proc = signal_after_requests(cmd, s, signal.SIGINT, requests=3)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr
    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert summary["status"] == "interrupted" and summary["exit_code"] == 130
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_wrong_key_stops_at_once_with_exit_2(tmp_path: Path, corpus: Path) -> None:
    with JudgeServerThread(latency=0.01, seed=5, error_rate=1.0, fail_status=401) as s:
        proc = assay("run", str(run_file(tmp_path, s.url)), "-q", "--no-cache")
        sent = s.stats.requests
    assert proc.returncode == 2, proc.stderr
    assert "assay: error:" in proc.stderr and "401" in proc.stderr
    assert sent <= 16  # the first answers, not one per trace
    assert not (tmp_path / "out" / "_SUCCESS").exists()
    assert json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())["status"] == "failed"


def test_an_account_out_of_quota_stops_at_once_with_exit_2(tmp_path: Path, corpus: Path) -> None:
    """OpenAI answers 429 ``insufficient_quota`` when the account is out of credit: no wait makes
    it pass, so the run stops at the first answers instead of retrying every trace."""
    body = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    with JudgeServerThread(latency=0.01, rule=lambda _req: Reply(429, body, {"Retry-After": "1"})) as s:
        proc = assay("run", str(run_file(tmp_path, s.url)), "-q", "--no-cache")
        sent = s.stats.requests
    assert proc.returncode == 2, proc.stderr
    assert "quota" in proc.stderr and "429" in proc.stderr
    assert sent <= 16  # the first answers, not one per trace and attempt
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_dead_endpoint_stops_after_the_retry_budget_with_exit_1(tmp_path: Path, corpus: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    f = run_file(tmp_path, f"http://127.0.0.1:{port}")
    cfg = json.loads(f.read_text())
    cfg["judges"]["standin"]["max_retries"] = 1
    f.write_text(json.dumps(cfg))
    proc = assay("run", str(f), "-q", "--no-cache")
    assert proc.returncode == 1, proc.stderr
    assert "assay: error:" in proc.stderr
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_misspelled_judge_name_fails_validate_and_run_with_exit_2(tmp_path: Path, corpus: Path) -> None:
    f = run_file(tmp_path, "http://127.0.0.1:9")
    cfg = json.loads(f.read_text())
    cfg["evaluators"][1]["params"]["judge"] = "standni"
    f.write_text(json.dumps(cfg))
    for cmd in ("validate", "run"):
        proc = assay(cmd, str(f))
        assert proc.returncode == 2, proc.stderr
        assert "standni" in proc.stderr and "standin" in proc.stderr
        # one line naming the file, the evaluator and the judges there are, not the whole file echoed
        assert f"{f}: evaluators[1] (llm_judge): unknown judge 'standni'" in proc.stderr
        assert "(got {" not in proc.stderr and "Value error" not in proc.stderr


def test_judge_errors_above_max_error_rate_fail_the_run(tmp_path: Path, corpus: Path) -> None:
    with JudgeServerThread(latency=0.01, seed=5, error_rate=0.8) as s:
        f = run_file(tmp_path, s.url, max_error_rate=0.1)
        cfg = json.loads(f.read_text())
        cfg["judges"]["standin"]["max_retries"] = 1
        f.write_text(json.dumps(cfg))
        proc = assay("run", str(f), "-q", "--no-cache")
    assert proc.returncode == 1, proc.stderr
    assert "max_error_rate" in proc.stderr
    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert summary["status"] == "failed" and not (tmp_path / "out" / "_SUCCESS").exists()


@pytest.mark.parametrize("bare", [False, True], ids=["Retry-After: 1", "bare 429"])
@pytest.mark.parametrize("factor", [1.0, 3.0], ids=["rpm right", "rpm 3x too high"])
def test_strict_limiter_with_a_coarse_retry_after_scores_everything_with_few_429s(
    tmp_path: Path, factor: float, bare: bool, write_jsonl: Any
) -> None:
    """A limiter that refuses anything closer than 1/R and answers only "Retry-After: 1", or a
    bare 429 with no hint at all (nginx's limit_req): every trace is scored, and the run is not a
    storm of refusals (counts, not timings). With the right rpm, refusals whose slots are taken
    back cost a tenth of a slot and are allowed up to CHEAP_SHARE of the sends (about 4 % in a long
    run, measured by benchmarks/bench_judged_run.py, never here): a storm would be every request."""
    n, rps = 120, 40.0
    write_jsonl("corpus.jsonl", [{"id": f"t{i}", "inputs": f"q{i}", "outputs": f"a{i}"} for i in range(n)])
    with JudgeServerThread(
        latency=(0.05, 0.15), rps=rps, limit_kind="spacing", retry_after_ms=False, retry_hints=not bare
    ) as s:
        f = tmp_path / "run.yaml"
        judge = {"provider": "openai", "base_url": f"{s.url}/v1", "model": "m", "timeout": 5, "rpm": rps * 60 * factor}
        cfg = {
            "source": {"path": "corpus.jsonl"},
            "judges": {"j": judge},
            "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
            "sink": {"path": "out/"},
        }
        f.write_text(json.dumps(cfg))
        proc = assay("run", str(f), "-q", "--no-cache")
        requests, refused = s.stats.requests, s.stats.rate_limited
    assert proc.returncode == 0, proc.stderr
    out = rows(tmp_path / "out")
    assert len(out) == n
    assert all(r["results"]["correctness"]["score"] is not None for r in out)
    assert requests == n + refused  # every refusal retried once it was told, nothing else repeated
    assert refused < n // 2  # a storm is a refusal per request or more; the share is benchmarks/' figure 1


def test_with_rpm_unset_the_limit_the_endpoint_announces_is_paced_at(tmp_path: Path, write_jsonl: Any) -> None:
    """OpenAI-style endpoints announce their limit per minute on every answer: with no ``rpm`` the
    run paces at it after the first answers, so a strict limiter refuses little beyond the first
    burst sent before any answer came back; with ``announced_limits: false`` it is ignored."""
    n, rps = 150, 40.0
    write_jsonl("corpus.jsonl", [{"id": f"t{i}", "inputs": f"q{i}", "outputs": f"a{i}"} for i in range(n)])
    refused: dict[bool, int] = {}
    for announced in (True, False):
        with JudgeServerThread(
            latency=(0.05, 0.15), rps=rps, limit_kind="spacing", retry_after_ms=False, announce_limits=True
        ) as s:
            judge = {"base_url": f"{s.url}/v1", "model": "m", "timeout": 5, "announced_limits": announced}
            cfg = {
                "source": {"path": "corpus.jsonl"},
                "judges": {"j": judge},
                "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
                "sink": {"path": f"out-{announced}/"},
            }
            f = tmp_path / "run.yaml"
            f.write_text(json.dumps(cfg))
            proc = assay("run", str(f), "-q", "--no-cache")
            refused[announced] = s.stats.rate_limited
        assert proc.returncode == 0, proc.stderr
        out = rows(tmp_path / f"out-{announced}")
        assert len(out) == n and all(r["results"]["correctness"]["score"] is not None for r in out)
        judge_stats = json.loads((tmp_path / f"out-{announced}" / "_SUMMARY.json").read_text())["judges"]["j"]
        assert judge_stats["configured_rpm"] == (rps * 60 if announced else None)
    # far from a storm (a refusal per request or more) either way. How many fewer refusals the
    # announced limit saves is benchmarks/' figure (bench_judged_run.py --announce): on a loaded
    # machine the first burst sent before any answer came back varies more than the saving, so the
    # order of the two counts is not asserted here (CI saw 25 vs 16 once). The pacing at an announced
    # limit itself is tested in simulated time (tests/unit/judges/test_judge_limits.py).
    assert refused[True] < n // 2 and refused[False] < n // 2
