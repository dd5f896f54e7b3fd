"""Batch mode as a user runs it: `assay run` subprocesses against the stand-in batch API over HTTP
(OpenAI files + batches, Anthropic message batches), repeated until exit 0, with kill -9 between
and during invocations."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.testing.batch_server import BatchServerThread

N_TRACES = int(os.environ.get("ASSAY_BATCH_TEST_TRACES", "300"))
"""Traces per run (the whole-night check runs the same tests with ASSAY_BATCH_TEST_TRACES=12000)."""
PRICE_IN, PRICE_OUT = 1.0, 2.0


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    with path.open("w") as f:
        for i in range(N_TRACES):
            rec = {
                "id": f"t{i}",
                "inputs": f"question {i}",
                "outputs": f"answer {i}",
                "reference_outputs": f"answer {i}",
            }
            f.write(json.dumps(rec) + "\n")
    return path


def run_file(
    tmp_path: Path, url: str, provider: str = "openai", name: str = "run.yaml", sink: str = "out/", **batch: Any
) -> Path:
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "judges": {
            "gpt": {
                "provider": provider,
                "base_url": f"{url}/v1",
                "model": "judge-1",
                "mode": "batch",
                "input_price_per_mtok": PRICE_IN,
                "output_price_per_mtok": PRICE_OUT,
                "batch": {"max_requests": 80, "poll_interval_s": 0.2, **batch},
            }
        },
        "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "gpt"}}],
        "sink": {"path": sink},
    }
    f = tmp_path / name
    f.write_text(json.dumps(cfg))
    return f


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("OPENAI_API_KEY", None)
    e.pop("ANTHROPIC_API_KEY", None)
    return e


def assay(*args: str, cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**env(), **(extra_env or {})},
    )


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def summary(out: Path) -> dict[str, Any]:
    return json.loads((out / "_SUMMARY.json").read_text())  # type: ignore[no-any-return]


def killed_run(run: Path, cwd: Path, *, after_line: str | None = None, after_s: float | None = None) -> int:
    """One invocation killed with SIGKILL as soon as its stderr shows ``after_line``, or after
    ``after_s`` seconds; its exit code (-9 when it was killed)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", str(run), "-q"],
        cwd=cwd,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    if after_line is not None:
        for line in proc.stderr:
            if after_line in line:
                proc.kill()
                break
    else:
        try:
            proc.wait(timeout=after_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.communicate(timeout=120)
    return proc.returncode


def until_done(run: Path, cwd: Path, *, kill_seed: int | None = None, max_invocations: int = 60) -> list[int]:
    """Run the same command until it exits 0; with ``kill_seed``, two invocations in three are
    killed (SIGKILL): while collecting, right after a batch was submitted, or at a random moment."""
    rng = random.Random(kill_seed)
    codes: list[int] = []
    for i in range(max_invocations):
        if kill_seed is not None and i % 3 == 0:
            at = ("reading the input", "submitted batch", "lines done")[(i // 3) % 3]
            code = killed_run(run, cwd, after_line=at)
        elif kill_seed is not None and i % 3 == 1:
            code = killed_run(run, cwd, after_s=rng.uniform(0.5, 3.0))
        else:
            code = assay("run", str(run), "-q", cwd=cwd).returncode
        codes.append(code)
        if code == 0:
            return codes
        assert code in (75, -9), codes
        time.sleep(0.3)
    raise AssertionError(f"no exit 0 after {max_invocations} invocations: {codes}")


def check_whole_run(tmp_path: Path, server: BatchServerThread, *, discount: float = 0.5) -> dict[str, Any]:
    out = rows(tmp_path / "out")
    assert sorted(r["trace_id"] for r in out) == sorted(f"t{i}" for i in range(N_TRACES))  # one row per trace
    results = [r["results"]["correctness"] for r in out]
    assert all(r.get("error") is None and r["score"] in (0.0, 1.0) for r in results)
    stats = server.stats
    assert len(stats.submissions) == N_TRACES
    assert stats.resubmitted_after_success() == []  # only failed / expired lines went again
    exhausted = 0
    for cid, n in stats.submissions.items():
        assert n == len(stats.fates[cid]), cid  # every batch submitted was collected, none paid twice
        assert n <= 3
        exhausted += n == 3 and "ok" not in stats.fates[cid]
    # a real-time call only for a line that used up its attempts
    assert server.server.judge.stats.requests == exhausted
    s = summary(tmp_path / "out")
    assert s["status"] == "ok" and (tmp_path / "out" / "_SUCCESS").exists()
    totals = s["totals"]
    batch = totals["batch"]
    assert batch["lines"] == N_TRACES - exhausted
    full = (batch["input_tokens"] * PRICE_IN + batch["output_tokens"] * PRICE_OUT) / 1e6
    assert batch["cost_usd"] == pytest.approx(full * discount)  # batch tokens at the discount
    assert (totals["realtime"]["cost_usd"] > 0) == (exhausted > 0)
    assert totals["cost_usd"] == pytest.approx(batch["cost_usd"] + totals["realtime"]["cost_usd"])
    assert totals["input_tokens"] == batch["input_tokens"] + totals["realtime"]["input_tokens"]
    return s


@pytest.fixture
def flaky_server() -> Iterator[BatchServerThread]:
    with BatchServerThread(
        delay=(0.2, 1.0), line_error_rate=0.04, expire_rate=0.04, fail_first_download=True, seed=7
    ) as s:
        yield s


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_same_command_until_exit_0_with_kill_9_between_and_during(
    tmp_path: Path, corpus: Path, flaky_server: BatchServerThread, provider: str
) -> None:
    run = run_file(tmp_path, flaky_server.url, provider)
    codes = until_done(run, tmp_path, kill_seed=11)
    print(f"{N_TRACES} traces, {provider}: exit codes of the invocations {codes}")  # -9: killed
    assert codes[-1] == 0 and 75 in codes
    assert sum(1 for c in codes if c == -9) >= 1
    stats = flaky_server.stats
    assert stats.line_errors + stats.expired > 0  # failed and expired lines were resubmitted
    assert stats.download_errors > 0  # broken result downloads were redone
    check_whole_run(tmp_path, flaky_server)
    # a rerun after the end: every answer is cached, nothing is submitted again
    before = sum(stats.submissions.values())
    assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 0
    assert sum(stats.submissions.values()) == before
    assert len(rows(tmp_path / "out")) == N_TRACES


def test_first_invocation_submits_and_exits_75_with_the_batch_ids(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=30.0) as server:
        run = run_file(tmp_path, server.url)
        proc = assay("run", str(run), cwd=tmp_path)
        assert proc.returncode == 75, proc.stderr
        assert "pending: the work is submitted; run the same command again later to collect it" in proc.stderr
        ids = [b.id for b in server.server._batches.values()]
        assert len(ids) == 4  # 300 lines at max_requests 80
        assert all(i in proc.stderr for i in ids)
        assert not list((tmp_path / "out").glob("part-*"))  # no row is written while pending
        pending = summary(tmp_path / "out")
        assert pending["status"] == "pending" and pending["exit_code"] == 75
        assert sorted(b["id"] for b in pending["batches"]) == sorted(ids)
        # polling again while the batches run submits nothing more
        assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 75
        assert sum(server.stats.submissions.values()) == N_TRACES
        listed = assay("batches", "list", str(run), cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert all(i in listed.stdout for i in ids) and "submitted 300" in listed.stdout
        cancelled = assay("batches", "cancel", str(run), cwd=tmp_path)
        assert cancelled.returncode == 0, cancelled.stderr
        assert all(b.cancelled for b in server.server._batches.values())


def test_wait_polls_until_done_and_scores_with_two_workers(tmp_path: Path, corpus: Path) -> None:
    # half of the polls fail with a 500: polls are tried again, the wait goes on
    with BatchServerThread(delay=(0.3, 0.8), seed=2, poll_error_rate=0.5) as server:
        run = run_file(tmp_path, server.url, "anthropic")
        proc = assay("run", str(run), "--wait", "-q", "--workers", "2", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "batches: " in proc.stderr and "lines done" in proc.stderr  # the progress line
        assert server.stats.poll_errors > 0
        s = check_whole_run(tmp_path, server)
        report = assay("report", "out", cwd=tmp_path, extra_env={"COLUMNS": "200"})
        assert report.returncode == 0, report.stderr
        batch = s["totals"]["batch"]
        assert f"batch ${batch['cost_usd']:.4f} ({N_TRACES:,} lines" in report.stdout  # the report shows the split


def test_enqueued_token_limit_below_the_total_submits_as_batches_finish(tmp_path: Path, corpus: Path) -> None:
    # about 300 tokens a line on the server's count: a limit of 5,000 holds no batch of 80 lines, so
    # after refusals assay submits one batch at a time and halves the batch until one is taken
    with BatchServerThread(delay=0.3, enqueued_token_limit=5_000, seed=3) as server:
        run = run_file(tmp_path, server.url, "openai")
        proc = assay("run", str(run), "--wait", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert server.stats.refused > 0  # token_limit_exceeded: waited and retried, not failed
        check_whole_run(tmp_path, server)
    with BatchServerThread(delay=0.3, enqueued_token_limit=5_000, seed=3) as server:
        run = run_file(tmp_path, server.url, "anthropic", name="run2.yaml", sink="out2/")
        proc = assay("run", str(run), "--wait", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert server.stats.refused > 0  # 429 on create: waited and retried
        assert len(rows(tmp_path / "out2")) == N_TRACES


def test_invalid_lines_are_error_results_with_the_provider_message(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=0.2, invalid_rate=0.05, seed=5) as server:
        run = run_file(tmp_path, server.url, "openai")
        proc = assay("run", str(run), "--wait", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        out = rows(tmp_path / "out")
        assert len(out) == N_TRACES
        errors = [r["results"]["correctness"] for r in out if r["results"]["correctness"].get("error")]
        assert len(errors) == server.stats.invalid > 0
        assert all("stand-in batch: invalid request line" in e["error"] for e in errors)
        assert max(server.stats.submissions.values()) == 1  # a 4xx line is not resubmitted
        assert server.server.judge.stats.requests == 0


def test_exhausted_lines_get_the_fallback(tmp_path: Path, corpus: Path) -> None:
    # every line fails inside the batch: after max_attempts, one real-time call each (full price)
    with BatchServerThread(delay=0.1, line_error_rate=1.0, seed=5) as server:
        run = run_file(tmp_path, server.url, "anthropic", max_attempts=2)
        proc = assay("run", str(run), "--wait", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert set(server.stats.submissions.values()) == {2}
        assert server.server.judge.stats.ok == N_TRACES  # the real-time fallback
        out = rows(tmp_path / "out")
        assert all(r["results"]["correctness"]["score"] in (0.0, 1.0) for r in out)
        totals = summary(tmp_path / "out")["totals"]
        assert totals["batch"]["cost_usd"] == 0 and totals["realtime"]["cost_usd"] > 0
        assert totals["cost_usd"] == pytest.approx(totals["realtime"]["cost_usd"])
    with BatchServerThread(delay=0.1, line_error_rate=1.0, seed=5) as server:
        run = run_file(tmp_path, server.url, "openai", "run2.yaml", "out2/", max_attempts=1, fallback="error")
        proc = assay("run", str(run), "--wait", "-q", cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr  # every result an error: above max_error_rate
        assert "300 of 300 results are errors" in proc.stderr
        assert server.server.judge.stats.requests == 0
        assert set(server.stats.submissions.values()) == {1}
        out = rows(tmp_path / "out2")
        assert all("no batch answer after 1 attempts" in r["results"]["correctness"]["error"] for r in out)


def test_bad_key_stops_with_exit_2_and_no_cache_is_refused(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=0.1, api_key="right-key-123456") as server:
        run = run_file(tmp_path, server.url, "openai")
        proc = assay("run", str(run), "-q", cwd=tmp_path, extra_env={"OPENAI_API_KEY": "wrong-key-123456"})
        assert proc.returncode == 2, proc.stderr
        assert "401" in proc.stderr and "wrong-key-123456" not in proc.stderr
        proc = assay("run", str(run), "-q", "--no-cache", cwd=tmp_path)
        assert proc.returncode == 2
        assert "--no-cache" in proc.stderr
        assert server.stats.batches == 0


def test_a_batch_created_but_not_recorded_is_found_again(tmp_path: Path, corpus: Path) -> None:
    """kill -9 between the provider's create and the ledger's record: the next invocation finds the
    batch through its metadata and pays nothing twice."""
    import anyio

    from assay.config import load_run_file
    from assay.judges.batch.ledger import Ledger
    from assay.judges.batch.rounds import batch_judges
    from assay.judges.providers import batcher_for
    from assay.pipeline.batch_run import ledger_path

    with BatchServerThread(delay=0.3, seed=9) as server:
        run = run_file(tmp_path, server.url, "openai", max_requests=1000)
        assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 75
        config = load_run_file(run)
        path = ledger_path(config)
        ledger = Ledger(path)
        # undo the record, as if the process had died right after creating the batch
        (row,) = ledger.batches()
        ledger._conn.execute("UPDATE batches SET state = 'creating', provider_id = NULL WHERE id = ?", (row["id"],))
        ledger.close()
        cfg = batch_judges(config)["gpt"]

        async def still_there() -> bool:
            async with batcher_for("gpt", cfg, None) as client:
                return await client.find(row["id"], row["created"], row["lines"], set()) is not None

        assert anyio.run(still_there)
        codes = until_done(run, tmp_path)
        assert codes[-1] == 0
        assert set(server.stats.submissions.values()) == {1}
        assert len(rows(tmp_path / "out")) == N_TRACES


def test_ctrl_c_while_waiting_exits_130_and_cancels_nothing(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=60.0) as server:
        run = run_file(tmp_path, server.url, "openai")
        proc = subprocess.Popen(
            [sys.executable, "-m", "assay.cli", "run", str(run), "--wait", "-q"],
            cwd=tmp_path,
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while server.stats.batches < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "assay: interrupted: written rows are durable" in err and "no batch was cancelled (4 open" in err
        assert "in-flight records" not in err  # a wait has nothing in flight to drain: it ends at once
        assert not any(b.cancelled for b in server.server._batches.values())
        listed = assay("batches", "list", str(run), "--json", cwd=tmp_path)
        batches = [json.loads(line) for line in listed.stdout.splitlines()]
        assert len(batches) == 4 and all(b["state"] == "open" for b in batches)


def test_pending_never_replaces_a_whole_outputs_summary_and_merge_of_a_pending_shard_exits_75(
    tmp_path: Path, corpus: Path
) -> None:
    with BatchServerThread(delay=0.1) as server:
        run = run_file(tmp_path, server.url, "openai")
        assert assay("run", str(run), "--wait", "-q", cwd=tmp_path).returncode == 0
        whole = summary(tmp_path / "out")
    with BatchServerThread(delay=60.0) as server:  # a new version and temperature: every request is new
        cfg = json.loads(run.read_text())
        cfg["judges"]["gpt"]["base_url"] = f"{server.url}/v1"
        cfg["judges"]["gpt"]["temperature"] = 0.5
        cfg["evaluators"][0]["version"] = 2  # (the output is the ledger: only a new identity is scored again)
        run.write_text(json.dumps(cfg))
        assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 75
        assert summary(tmp_path / "out") == whole and (tmp_path / "out" / "_SUCCESS").exists()
        for i in range(2):
            proc = assay("run", str(run), "-q", "--shard", f"{i}/2", cwd=tmp_path)
            assert proc.returncode == 75, proc.stderr
        shard = json.loads((tmp_path / "out" / "_SUMMARY.shard-0-of-2.json").read_text())
        assert shard["status"] == "pending"
        merged = assay("merge", "out", "-q", cwd=tmp_path)
        assert merged.returncode == 75, merged.stderr


def test_dry_run_estimates_both_prices_and_the_batches(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=0.1) as server:
        run = run_file(tmp_path, server.url, "openai")
        proc = assay("run", str(run), "--dry-run", cwd=tmp_path, extra_env={"COLUMNS": "200"})
        assert proc.returncode == 0, proc.stderr
        assert "real-time $" in proc.stdout and "(batch price; real time $" in proc.stdout
        assert "in 4 batches" in proc.stdout  # 300 requests at max_requests 80
        assert server.stats.batches == 0


def test_the_waiter_of_the_airflow_trigger_sees_when_every_batch_has_finished(tmp_path: Path, corpus: Path) -> None:
    import anyio

    from assay.config import load_run_file
    from assay.pipeline.batch_commands import open_batches_finished

    with BatchServerThread(delay=3600.0, seed=4) as server:  # the batches end when the test says so
        run = run_file(tmp_path, server.url, "anthropic")
        config = load_run_file(run)
        assert anyio.run(open_batches_finished, config) == {"finished": True, "open": 0, "done": 0}
        assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 75
        assert anyio.run(open_batches_finished, config) == {"finished": False, "open": 4, "done": 0}
        assert server.server.end_open_batches() == 4
        assert anyio.run(open_batches_finished, config) == {"finished": True, "open": 4, "done": 4}
        assert sum(server.stats.submissions.values()) == N_TRACES  # asking submitted nothing
        assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 0


def test_shards_collect_their_own_batches_and_merge_adds_up_the_batch_totals(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=0.2, seed=6) as server:
        run = run_file(tmp_path, server.url, "openai")
        for i in range(2):
            proc = assay("run", str(run), "-q", "--wait", "--shard", f"{i}/2", cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
        merged = assay("merge", "out", "-q", cwd=tmp_path)
        assert merged.returncode == 0, merged.stderr
        totals = summary(tmp_path / "out")["totals"]
        assert totals["batch"]["lines"] == N_TRACES == len(server.stats.submissions)
        assert totals["cost_usd"] == pytest.approx(totals["batch"]["cost_usd"]) and totals["cost_usd"] > 0
        assert len(rows(tmp_path / "out")) == N_TRACES


def test_a_batch_past_max_wait_is_cancelled_and_its_lines_get_the_fallback(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=3600.0, seed=8) as server:  # a provider that never finishes (Azure)
        run = run_file(tmp_path, server.url, "openai", max_wait_h=0.0002, max_attempts=1)
        proc = assay("run", str(run), "--wait", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "cancelled" in proc.stderr
        assert all(b.cancelled for b in server.server._batches.values())
        assert set(server.stats.submissions.values()) == {1}
        assert server.server.judge.stats.ok == N_TRACES  # the real-time fallback of max_attempts 1
        assert len(rows(tmp_path / "out")) == N_TRACES


def test_a_multi_step_evaluator_takes_one_round_per_step(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=0.1, seed=12) as server:
        run = run_file(tmp_path, server.url, "openai")
        cfg = json.loads(run.read_text())
        cfg["evaluators"] = [{"name": "rubric_dag", "params": {"preset": "answer_quality", "judge": "gpt"}}]
        run.write_text(json.dumps(cfg))
        proc = assay("run", str(run), "--wait", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.count("requests without an answer (") >= 2  # the second question waited for the first
        out = rows(tmp_path / "out")
        assert len(out) == N_TRACES
        assert all(r["results"]["answer_quality"]["error"] is None for r in out)
        assert len(server.stats.submissions) > N_TRACES  # more than one question for some traces
        assert server.stats.resubmitted_after_success() == []
        assert server.server.judge.stats.requests == 0
