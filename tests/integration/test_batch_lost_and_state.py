"""Batch runs that meet a provider that forgot their batches, damaged or deleted state files, and
several days of one Delta table (issue 26): `assay run` subprocesses against the stand-in batch API."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest
from deltalake import DeltaTable

from assay.config import load_run_file
from assay.pipeline.batch_commands import open_batches_finished
from assay.testing.batch_server import BatchServerThread
from tests.integration.test_batch_runs import assay, rows, run_file, summary

N = 60
"""Traces per run (max_requests 25: three batches)."""


def write_corpus(path: Path, n: int = N, prefix: str = "t") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for i in range(n):
            rec = {"id": f"{prefix}{i}", "inputs": f"question {prefix} {i}", "outputs": f"answer {i}"}
            f.write(json.dumps({**rec, "reference_outputs": f"answer {i}"}) + "\n")
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl")


def ledger_rows(run: Path, cwd: Path, *extra: str) -> list[dict[str, Any]]:
    listed = assay("batches", "list", str(run), "--json", *extra, cwd=cwd)
    assert listed.returncode == 0, listed.stderr
    return [json.loads(line) for line in listed.stdout.splitlines()]


def row_cost(out: Path, key: str = "correctness") -> float:
    return sum(float(r["results"][key]["metadata"]["usage"]["cost_usd"]) for r in rows(out))


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("assay: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_batch_the_provider_forgot_is_lost_and_its_lines_are_submitted_again(
    tmp_path: Path, corpus: Path, provider: str
) -> None:
    with BatchServerThread(delay=3600.0, seed=1) as server:
        run = run_file(tmp_path, server.url, provider, max_requests=25)
        assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 75
        forgotten = server.forget()  # deleted at the provider (another workspace, a reset)
        assert len(forgotten) == 3
        # the Airflow trigger's waiter: nothing left to wait for, run the command again (not an error)
        state = anyio.run(open_batches_finished, load_run_file(run))
        assert state == {"finished": True, "open": 3, "done": 3}
        server.server.delay = 0.1
        proc = assay("run", str(run), "-q", cwd=tmp_path)
        assert proc.returncode == 75, proc.stderr  # not 1: the run goes on with new batches
        for pid in forgotten:
            assert f"batch {pid} (gpt) no longer exists at the provider" in proc.stderr
        assert "submitted again (the lost batch counts as one of their max_attempts 3)" in proc.stderr
        states = {b["provider_id"]: b["state"] for b in ledger_rows(run, tmp_path)}
        assert [states[pid] for pid in forgotten] == ["lost"] * 3
        proc = assay("run", str(run), "-q", "--wait", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert len(rows(tmp_path / "out")) == N
        assert set(server.stats.submissions.values()) == {2}  # the lost submission and the answered one
        totals = summary(tmp_path / "out")["totals"]
        assert totals["batch"]["lines"] == N
        assert server.server.judge.stats.requests == 0


def test_a_lost_submission_counts_as_an_attempt(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=3600.0, seed=2) as server:
        run = run_file(tmp_path, server.url, "openai", max_requests=25, max_attempts=1)
        assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 75
        server.forget()
        proc = assay("run", str(run), "-q", cwd=tmp_path)  # attempts spent: the real-time fallback
        assert proc.returncode == 0, proc.stderr
        assert server.server.judge.stats.ok == N
        assert set(server.stats.submissions.values()) == {1}
        assert summary(tmp_path / "out")["totals"]["realtime"]["cost_usd"] > 0


def test_cancel_and_forget_get_a_run_past_batches_the_provider_lost(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=3600.0, seed=3) as server:
        run = run_file(tmp_path, server.url, "openai", max_requests=25)
        assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 75
        first, second, third = (b["provider_id"] for b in ledger_rows(run, tmp_path))
        server.forget(first)
        cancelled = assay("batches", "cancel", str(run), cwd=tmp_path)
        assert cancelled.returncode == 0, cancelled.stderr  # not `batch API HTTP 404`, exit 1
        assert f"batch {first} (gpt) no longer exists at the provider" in cancelled.stderr
        assert f"cancel requested for batch {second}" in cancelled.stderr
        states = {b["provider_id"]: b["state"] for b in ledger_rows(run, tmp_path)}
        assert states == {first: "lost", second: "open", third: "open"}
        # the manual way: a batch the provider still shows (another workspace's key, say)
        forgot = assay("batches", "forget", str(run), third, cwd=tmp_path)
        assert forgot.returncode == 0, forgot.stderr
        assert f"batch {third} (gpt) marked lost in the ledger; its 10 unanswered requests" in forgot.stderr
        again = assay("batches", "forget", str(run), third, cwd=tmp_path)
        assert again.returncode == 0 and "marked lost already" in again.stderr
        unknown = assay("batches", "forget", str(run), "batch_nope", cwd=tmp_path)
        assert unknown.returncode == 2
        assert "batch_nope" in one_error_line(unknown.stderr) and first in unknown.stderr
        server.server.delay = 0.1
        proc = assay("run", str(run), "-q", "--wait", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert len(rows(tmp_path / "out")) == N
        assert sorted(server.stats.submissions.values()) == [2] * N  # each line: one lost or cancelled, one answered
        done = assay("batches", "forget", str(run), second, cwd=tmp_path)
        assert done.returncode == 2 and "collected already" in one_error_line(done.stderr)


def test_a_404_from_a_wrong_base_url_forgets_nothing(tmp_path: Path, corpus: Path) -> None:
    with BatchServerThread(delay=3600.0, seed=4) as server:
        run = run_file(tmp_path, server.url, "anthropic", max_requests=25)
        assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 75
        cfg = json.loads(run.read_text())
        cfg["judges"]["gpt"]["base_url"] = f"{server.url}/elsewhere/v1"
        run.write_text(json.dumps(cfg))
        proc = assay("run", str(run), "-q", cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        assert "HTTP 404" in proc.stderr and "no longer exists" not in proc.stderr
        assert {b["state"] for b in ledger_rows(run, tmp_path)} == {"open"}
        assert server.stats.batches == 3


@pytest.mark.parametrize("damaged", ["ledger", "cache"])
def test_a_damaged_state_file_is_one_error_line_naming_it(tmp_path: Path, corpus: Path, damaged: str) -> None:
    with BatchServerThread(delay=0.1, seed=5) as server:
        run = run_file(tmp_path, server.url, "openai", max_requests=25)
        assert assay("run", str(run), "-q", cwd=tmp_path).returncode == 75
        state = tmp_path / ".assay"
        target = next((state / "batches").glob("*.sqlite")) if damaged == "ledger" else state / "judge_cache.sqlite"
        target.write_bytes(os.urandom(1 << 14))
        for args in (["run", str(run), "-q"], ["run", str(run), "-q", "--workers", "2"], ["batches", "list", str(run)]):
            if damaged == "cache" and args[0] == "batches":
                continue  # listing the ledger reads no cache
            proc = assay(*args, cwd=tmp_path)
            assert proc.returncode == 2, proc.stderr
            line = one_error_line(proc.stderr)
            assert str(target) in line and "is damaged" in line and f"mv {target} {target}.corrupt" in line
        # what it says to do works: the ledger moved aside pays again only what the cache lacks
        target.rename(target.with_name(target.name + ".corrupt"))
        proc = assay("run", str(run), "-q", "--wait", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert len(rows(tmp_path / "out")) == N
        if damaged == "cache":  # the ledger knew every answer: downloaded again, nothing submitted again
            assert set(server.stats.submissions.values()) == {1}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_deleted_cache_downloads_the_finished_batches_again(tmp_path: Path, corpus: Path, provider: str) -> None:
    with BatchServerThread(delay=0.1, seed=6) as server:
        run = run_file(tmp_path, server.url, provider, max_requests=25)
        assert assay("run", str(run), "-q", "--wait", cwd=tmp_path).returncode == 0
        first = rows(tmp_path / "out")
        totals = summary(tmp_path / "out")["totals"]
        assert row_cost(tmp_path / "out") == pytest.approx(totals["batch"]["cost_usd"])  # rows carry batch cost
        assert totals["batch"]["cost_usd"] > 0
        batches = server.stats.batches
        for f in (tmp_path / ".assay").glob("judge_cache.sqlite*"):
            f.unlink()
        # over the published output every pair is current (the table is the ledger): nothing is asked
        proc = assay("run", str(run), "-q", cwd=tmp_path)
        assert proc.returncode == 0 and "nothing to score" in proc.stderr, proc.stderr
        assert server.stats.batches == batches and server.server.judge.stats.requests == 0
        # --fresh scores every pair again: the answers come from the ledger's finished batches
        proc = assay("run", str(run), "-q", "--fresh", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr  # in this invocation: no exit 75 round trip
        assert "answers downloaded again into the judge cache" in proc.stderr
        assert server.stats.batches == batches and set(server.stats.submissions.values()) == {1}
        assert server.server.judge.stats.requests == 0
        again = rows(tmp_path / "out")
        assert sorted(r["trace_id"] for r in again) == sorted(r["trace_id"] for r in first)
        assert summary(tmp_path / "out")["totals"]["cost_usd"] == pytest.approx(totals["cost_usd"])  # not paid twice
        # the cache gone and the provider's copy too: only then are the requests paid again, and it says so
        for f in (tmp_path / ".assay").glob("judge_cache.sqlite*"):
            f.unlink()
        server.forget()
        proc = assay("run", str(run), "-q", "--wait", "--fresh", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "the provider no longer keeps them; those requests are submitted (and paid) again" in proc.stderr
        assert set(server.stats.submissions.values()) == {2}
        assert len(rows(tmp_path / "out")) == N


def delta_run(tmp_path: Path, url: str) -> Path:
    run = run_file(tmp_path, url, "openai", max_requests=25)
    cfg = json.loads(run.read_text())
    cfg["source"] = {"path": "in/{{ ds }}/corpus.jsonl"}
    cfg["sink"] = {"type": "delta", "path": "lake/scores"}
    run.write_text(json.dumps(cfg))
    return run


def day_summary(tmp_path: Path, ds: str) -> dict[str, Any]:
    return json.loads((tmp_path / "lake/scores/_summaries" / f"ds={ds}" / "_SUMMARY.json").read_text())  # type: ignore[no-any-return]


def test_each_day_of_a_delta_table_keeps_its_own_batches_and_cost(tmp_path: Path) -> None:
    d1, d2 = "2026-11-21", "2026-11-22"
    write_corpus(tmp_path / "in" / d1 / "corpus.jsonl", 40, "a")
    with BatchServerThread(delay=0.2, line_error_rate=0.3, seed=7) as server:
        run = delta_run(tmp_path, server.url)
        assert assay("run", str(run), "--ds", d1, "-q", cwd=tmp_path).returncode == 75
        # day 1's batches end (some of their lines fail when they are collected)
        time.sleep(max(0.0, max(b.done_at for b in server.server._batches.values()) - time.time()) + 0.05)
        sent = sum(server.stats.submissions.values())
        # day 2 has not landed: its invocation says so (exit 1), whatever day 1's batches do, and
        # neither collects them nor sends day 1's failed lines again
        proc = assay("run", str(run), "--ds", d2, "-q", cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        assert "not landed yet" in one_error_line(proc.stderr)
        assert sum(server.stats.submissions.values()) == sent and server.stats.polls == 0
        assert {b["state"] for b in ledger_rows(run, tmp_path, "--ds", d1)} == {"open"}
        assert assay("run", str(run), "--ds", d1, "-q", "--wait", cwd=tmp_path).returncode == 0
        write_corpus(tmp_path / "in" / d2 / "corpus.jsonl", 10, "b")
        assert assay("run", str(run), "--ds", d2, "-q", "--wait", cwd=tmp_path).returncode == 0
        assert assay("run", str(run), "--ds", d2, "-q", cwd=tmp_path).returncode == 0  # a rerun spends nothing
    first, second = day_summary(tmp_path, d1)["totals"], day_summary(tmp_path, d2)["totals"]
    assert first["batch"]["lines"] == 40 and second["batch"]["lines"] == 10  # each night its own spending
    assert second["cost_usd"] < first["cost_usd"]
    con = duckdb.connect()
    con.register("t", DeltaTable(str(tmp_path / "lake/scores")).to_pyarrow_table())
    per_day = dict(con.sql("select ds, sum(coalesce(correctness.cost_usd, 0)) from t group by ds").fetchall())
    # the cost query of docs/lake.md: each row carries its own judge cost (batch lines at the batch price)
    assert per_day[d1] == pytest.approx(first["cost_usd"]) and per_day[d2] == pytest.approx(second["cost_usd"])


def test_the_tables_ledger_of_an_earlier_assay_is_collected_not_paid_again(tmp_path: Path) -> None:
    from assay.pipeline.batch_run import ledger_path, legacy_ledger_path

    d1 = "2026-11-21"
    write_corpus(tmp_path / "in" / d1 / "corpus.jsonl", 40, "a")
    with BatchServerThread(delay=3600.0, seed=8) as server:
        run = delta_run(tmp_path, server.url)
        assert assay("run", str(run), "--ds", d1, "-q", cwd=tmp_path).returncode == 75
        config = load_run_file(run, ds=d1)
        day, legacy = ledger_path(config), legacy_ledger_path(config)
        assert legacy is not None and legacy != day
        day.rename(legacy)  # as an assay with one ledger per table left it, its batches open
        proc = assay("run", str(run), "--ds", d1, "-q", cwd=tmp_path)
        assert proc.returncode == 75, proc.stderr  # they are waited for, not submitted again
        assert "batches an earlier assay submitted for the whole table" in proc.stderr
        for b in list(server.server._batches.values()):
            b.done_at = time.time()  # they end now
        proc = assay("run", str(run), "--ds", d1, "-q", "--wait", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert set(server.stats.submissions.values()) == {1} and len(server.stats.submissions) == 40
        assert not legacy.exists() and legacy.with_name(legacy.name + ".drained").exists()
    assert day_summary(tmp_path, d1)["counts"]["scored"] == 40
