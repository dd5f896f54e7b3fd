"""``assay backfill`` and reruns of ``assay run`` as a user runs them (issue 29): days scored night
by night against the stand-in judge servers, then an evaluator added, one evaluator's prompt
changed, late traces added to two days, traces removed from one, the judge cache deleted, a
kill -9 during the backfill and the same command again — with a real-time judge and with a
batch judge. The judge is called exactly for the missing and stale pairs, every other result
stays byte-identical, each day holds one row per trace with every key, and the preview's counts
are what was then done."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.testing.batch_server import BatchServerThread
from assay.testing.judge_server import JudgeServerThread

DAYS = ["2026-05-01", "2026-05-02", "2026-05-03", "2026-05-04"]
N = 12


def trace(day: str, i: int) -> dict[str, Any]:
    return {
        "id": f"{day}-t{i}",
        "inputs": f"question {i} of {day}",
        "outputs": f"answer {i}",
        "reference_outputs": f"answer {i}" if i % 3 else "another",
    }


def write_day(root: Path, day: str, ids: range | list[int]) -> None:
    (root / "in").mkdir(exist_ok=True)
    (root / "in" / f"{day}.jsonl").write_text("".join(json.dumps(trace(day, i)) + "\n" for i in ids))


def run_file(root: Path, url: str, *, batch: bool = False, sink: dict[str, Any] | None = None) -> Path:
    judge: dict[str, Any] = {
        "provider": "openai",
        "base_url": f"{url}/v1",
        "model": "judge-1",
        "rpm": 60000,
        "max_concurrency": 4,
        "input_price_per_mtok": 1.0,
        "output_price_per_mtok": 2.0,
    }
    if batch:
        judge.update(mode="batch", batch={"max_requests": 50, "poll_interval_s": 0.2})
    cfg = {
        "source": {"path": "in/{{ ds }}.jsonl"},
        "judges": {"gpt": judge},
        "evaluators": [
            {"name": "exact_match"},
            {"name": "llm_judge", "params": {"prompt": "correctness", "judge": "gpt"}},
        ],
        "sink": sink or {"path": "out/dt={{ ds }}/"},
        "limits": {"batch_size": 4, "commit_interval_s": 0.1},
    }
    f = root / "run.yaml"
    f.write_text(json.dumps(cfg))
    return f


def edit(f: Path, change: Any) -> None:
    cfg = json.loads(f.read_text())
    change(cfg)
    f.write_text(json.dumps(cfg))


def assay(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True, timeout=300, cwd=root, env=env
    )


def day_rows(root: Path, day: str) -> list[dict[str, Any]]:
    out = root / "out" / f"dt={day}"
    return [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def results_bytes(root: Path) -> dict[tuple[str, str], bytes]:
    """Every result of every day as the bytes it is written with (trace, key) → bytes."""
    import orjson

    out: dict[tuple[str, str], bytes] = {}
    for day in DAYS:
        for row in day_rows(root, day):
            for key, res in row["results"].items():
                out[(row["trace_id"], key)] = orjson.dumps(res)
    return out


def files_bytes(root: Path) -> dict[str, bytes]:
    """Every file of every day's output (not the backfill's own ``_BACKFILL.json``)."""
    files = sorted(p for p in (root / "out").rglob("*") if p.is_file() and p.name != "_BACKFILL.json")
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def check_whole(root: Path, keys: set[str], ids: dict[str, list[int]]) -> None:
    """Each day: exactly one row per trace of its input, with every key."""
    for day in DAYS:
        rows = day_rows(root, day)
        got = [r["trace_id"] for r in rows]
        assert sorted(got) == sorted(f"{day}-t{i}" for i in ids[day]), day
        assert all(set(r["results"]) == keys for r in rows), day
        assert (root / "out" / f"dt={day}" / "_SUCCESS").exists()


def preview(root: Path, f: Path) -> dict[str, Any]:
    proc = assay(root, "backfill", str(f), "--from", DAYS[0], "--to", DAYS[-1], "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def backfill(root: Path, f: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return assay(root, "backfill", str(f), "--from", DAYS[0], "--to", DAYS[-1], "-q", *extra)


def backfill_json(root: Path) -> dict[str, Any]:
    return json.loads((root / "out" / "_BACKFILL.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture
def server() -> Iterator[JudgeServerThread]:
    with JudgeServerThread(latency=0.005, seed=3) as s:
        yield s


@pytest.fixture
def nights(tmp_path: Path, server: JudgeServerThread) -> Path:
    """Four days scored night by night (`assay run --ds D`), N traces each."""
    for day in DAYS:
        write_day(tmp_path, day, range(N))
    f = run_file(tmp_path, server.url)
    for day in DAYS:
        proc = assay(tmp_path, "run", str(f), "--ds", day, "-q")
        assert proc.returncode == 0, proc.stderr
    assert server.stats.requests == N * len(DAYS)
    return f


def test_real_time_judge_backfill_scores_exactly_what_is_missing(
    tmp_path: Path, nights: Path, server: JudgeServerThread
) -> None:
    f, root = nights, tmp_path
    ids = {day: list(range(N)) for day in DAYS}
    keys = {"exact_match", "correctness"}
    check_whole(root, keys, ids)

    # `assay run --dry-run` over a published day estimates only what is left (nothing), `--fresh` all
    dry = assay(root, "run", str(f), "--ds", DAYS[0], "--dry-run")
    assert dry.returncode == 0 and "12 judged results of the published output are current" in dry.stdout
    assert "total calls 0" in dry.stdout
    assert f"total calls {N}" in assay(root, "run", str(f), "--ds", DAYS[0], "--dry-run", "--fresh").stdout

    # nothing missing: no call, no file changes, every day done without running
    before_files = files_bytes(root)
    calls = server.stats.requests
    plan = preview(root, f)
    assert plan["total"]["to_score"] == 0 and plan["total"]["calls"] == 0 and plan["total"]["days_done"] == 4
    proc = backfill(root, f, "--parallel-days", "2")
    assert proc.returncode == 0, proc.stderr
    assert server.stats.requests == calls
    assert files_bytes(root) == before_files
    bf = backfill_json(root)
    assert bf["exit_code"] == 0 and [d["ran"] for d in bf["days"]] == [False] * 4

    # an evaluator added: only its pairs are called; every other result byte-identical
    before = results_bytes(root)
    added = {"name": "llm_judge", "params": {"prompt": "conciseness", "judge": "gpt"}}
    edit(f, lambda c: c["evaluators"].append(added))
    plan = preview(root, f)
    assert plan["total"]["per_key"]["conciseness"]["to_score"] == N * 4
    assert plan["total"]["per_key"]["correctness"]["to_score"] == 0
    assert plan["total"]["calls"] == N * 4
    proc = backfill(root, f, "--parallel-days", "2")
    assert proc.returncode == 0, proc.stderr
    assert server.stats.requests - calls == plan["total"]["calls"] == N * 4
    calls = server.stats.requests
    keys.add("conciseness")
    check_whole(root, keys, ids)
    after = results_bytes(root)
    assert all(after[k] == v for k, v in before.items())
    bf = backfill_json(root)
    assert sum(d["pairs"]["scored"] for d in bf["days"]) == N * 4
    assert sum(d["calls"] for d in bf["days"]) == N * 4

    # one evaluator's prompt changed: only its results are scored again
    before = results_bytes(root)
    prompt = "Is this answer concise? Question: {inputs} Answer: {outputs}"
    edit(f, lambda c: c["evaluators"][2]["params"].update(prompt=prompt, feedback_key="conciseness"))
    plan = preview(root, f)
    assert plan["total"]["per_key"]["conciseness"]["stale"] == N * 4 and plan["total"]["calls"] == N * 4
    assert backfill(root, f).returncode == 0
    assert server.stats.requests - calls == N * 4
    calls = server.stats.requests
    after = results_bytes(root)
    assert all(after[k] == v for k, v in before.items() if k[1] != "conciseness")

    # late traces for two days, three traces gone from another
    before = results_bytes(root)
    for day in DAYS[:2]:
        ids[day] = list(range(N + 3))
        write_day(root, day, ids[day])
    ids[DAYS[3]] = list(range(3, N))
    write_day(root, DAYS[3], ids[DAYS[3]])
    plan = preview(root, f)
    assert plan["total"]["calls"] == 6 * 2  # two judged keys for six late traces
    assert plan["total"]["dropped"] == 3 * 3  # three traces, three keys each
    by_day = {d["ds"]: d for d in plan["days"]}
    assert by_day[DAYS[2]]["nothing_to_do"] and not by_day[DAYS[3]]["nothing_to_do"]
    assert backfill(root, f).returncode == 0
    assert server.stats.requests - calls == 12
    calls = server.stats.requests
    check_whole(root, keys, ids)
    after = results_bytes(root)
    assert all(after[k] == v for k, v in before.items() if k in after)
    bf = {d["ds"]: d for d in backfill_json(root)["days"]}
    assert bf[DAYS[3]]["pairs"]["dropped"] == 9 and bf[DAYS[0]]["pairs"]["scored"] == 3 * 3

    # the judge cache deleted (a fresh machine): the table is the ledger, nothing is called
    shutil.rmtree(root / ".assay" / "cache", ignore_errors=True)
    assert not (root / ".assay" / "cache").exists()
    before_files = files_bytes(root)
    assert backfill(root, f).returncode == 0
    assert server.stats.requests == calls
    assert files_bytes(root) == before_files


def test_kill_9_during_the_backfill_then_the_same_command(tmp_path: Path) -> None:
    with JudgeServerThread(latency=0.15, seed=5) as server:
        for day in DAYS:
            write_day(tmp_path, day, range(N))
        f = run_file(tmp_path, server.url)
        edit(f, lambda c: c["judges"]["gpt"].update(max_concurrency=1))
        for day in DAYS:
            assert assay(tmp_path, "run", str(f), "--ds", day, "-q").returncode == 0
        calls = server.stats.requests
        prompt = "Is the answer right? Question: {inputs} Answer: {outputs} Reference: {reference_outputs}"
        edit(f, lambda c: c["evaluators"][1]["params"].update(prompt=prompt, feedback_key="correctness"))
        args = ["backfill", str(f), "--from", DAYS[0], "--to", DAYS[-1], "-q", "--parallel-days", "2"]
        started = time.time()
        proc = subprocess.Popen([sys.executable, "-m", "assay.cli", *args], cwd=tmp_path)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:  # once a day's checkpoint holds rows
            cps = list((tmp_path / ".assay" / "checkpoints").rglob("writer-*.json"))
            if any(p.stat().st_mtime > started and json.loads(p.read_text())["stats"]["counts"]["read"] for p in cps):
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        time.sleep(1.0)  # the days it started stop on their own (SIGTERM on the parent's death)
        assert server.stats.requests - calls < N * 4
        done = assay(tmp_path, *args)
        assert done.returncode == 0, done.stderr
        # every stale pair answered once: what the killed days had answered came back from the cache;
        # a call in flight at the kill (at most one per running day) was asked again, never answered twice
        assert server.stats.ok - calls == N * 4
        assert server.stats.requests - calls <= N * 4 + 2
        ids = {day: list(range(N)) for day in DAYS}
        check_whole(tmp_path, {"exact_match", "correctness"}, ids)
        versions = {r["identity"]["correctness"] for day in DAYS for r in day_rows(tmp_path, day)}
        assert len(versions) == 1


def test_batch_judge_backfill_exits_75_then_collects_only_the_missing_pairs(tmp_path: Path) -> None:
    with BatchServerThread(delay=0.2, seed=2) as server:
        for day in DAYS:
            write_day(tmp_path, day, range(N))
        f = run_file(tmp_path, server.url, batch=True)
        codes = []
        for _ in range(40):  # night by night, all through the backfill: exit 75 until the batches are in
            proc = backfill(tmp_path, f, "--parallel-days", "4")
            codes.append(proc.returncode)
            if proc.returncode == 0:
                break
            assert proc.returncode == 75, proc.stderr
            assert backfill_json(tmp_path)["status"] == "pending"
            time.sleep(0.3)
        assert codes[0] == 75 and codes[-1] == 0
        assert len(server.stats.submissions) == N * 4
        assert server.stats.batches == 1  # the four days' 48 lines in one provider batch (max_requests 50)
        ids = {day: list(range(N)) for day in DAYS}
        check_whole(tmp_path, {"exact_match", "correctness"}, ids)
        before = results_bytes(tmp_path)
        # late traces on two days, the judge cache gone: only the new pairs go into batches
        shutil.rmtree(tmp_path / ".assay" / "cache", ignore_errors=True)
        for day in DAYS[1:3]:
            ids[day] = list(range(N + 2))
            write_day(tmp_path, day, ids[day])
        plan = preview(tmp_path, f)
        assert plan["total"]["calls"] == 4 and plan["total"]["batch_cost_usd"] < plan["total"]["realtime_cost_usd"]
        for _ in range(40):
            proc = backfill(tmp_path, f, "--parallel-days", "4")
            if proc.returncode == 0:
                break
            assert proc.returncode == 75, proc.stderr
            time.sleep(0.3)
        assert proc.returncode == 0, proc.stderr
        assert len(server.stats.submissions) == N * 4 + 4
        assert server.stats.batches == 2  # the two days' late pairs together
        check_whole(tmp_path, {"exact_match", "correctness"}, ids)
        after = results_bytes(tmp_path)
        assert all(after[k] == v for k, v in before.items())


def test_a_failed_gate_stays_exit_3_when_nothing_is_left(tmp_path: Path, nights: Path) -> None:
    f = nights
    edit(f, lambda c: c.update(gates={"exact_match": {"min_mean": 0.99}}))
    before = files_bytes(tmp_path)
    proc = assay(tmp_path, "run", str(f), "--ds", DAYS[0], "-q")
    assert proc.returncode == 3, proc.stderr
    assert "nothing to score" in proc.stderr
    assert files_bytes(tmp_path) == before  # the verdict is recomputed; nothing is written
    proc = assay(tmp_path, "backfill", str(f), "--from", DAYS[0], "--to", DAYS[-1])  # not quiet
    assert proc.returncode == 3, proc.stderr
    assert "total" in proc.stdout and "4 of 4 days done" in proc.stdout  # the preview table
    assert "backfill: 4 done · 0 running · 0 pending" in proc.stderr  # the progress line
    assert f"assay: {DAYS[0]}: gate_failed (exit 3)" in proc.stderr
    bf = backfill_json(tmp_path)
    assert bf["status"] == "gate_failed" and bf["exit_code"] == 3
    assert {d["status"] for d in bf["days"]} == {"gate_failed"}


def test_fresh_rescores_everything_and_max_cost_refuses(
    tmp_path: Path, nights: Path, server: JudgeServerThread
) -> None:
    f = nights
    calls = server.stats.requests
    edit(f, lambda c: c["evaluators"][1].update(version=7))
    proc = backfill(tmp_path, f, "--max-cost-usd", "0.0000001")
    assert proc.returncode == 5 and "above --max-cost-usd" in proc.stderr
    assert server.stats.requests == calls
    proc = assay(tmp_path, "run", str(f), "--ds", DAYS[0], "-q", "--fresh", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert server.stats.requests - calls == N
    summary = json.loads((tmp_path / "out" / f"dt={DAYS[0]}" / "_SUMMARY.json").read_text())
    assert summary["pairs"] == {"kept": 0, "scored": 2 * N, "dropped": 0}


def test_s3_and_delta_days_backfill_with_their_ledger_beside(
    tmp_path: Path, s3_server: Any, client: Any, bucket: str
) -> None:
    """The days of an ``s3://`` prefix and of a Delta table: ``_BACKFILL.json`` beside the days'
    summaries, and a second backfill with nothing missing writes nothing (no new Delta version)."""
    for day in DAYS[:2]:
        write_day(tmp_path, day, range(N))
    sinks = {
        "s3": {"path": f"s3://{bucket}/scores/dt={{{{ ds }}}}/"},
        "delta": {"type": "delta", "path": "lake"},
    }
    for name, sink in sinks.items():
        cfg = {
            "source": {"path": "in/{{ ds }}.jsonl"},
            "evaluators": [{"name": "exact_match"}],
            "sink": sink,
            "s3": {"endpoint_url": s3_server.endpoint_url},
        }
        f = tmp_path / f"{name}.yaml"
        f.write_text(json.dumps(cfg))
        args = ["backfill", str(f), "--from", DAYS[0], "--to", DAYS[1], "-q"]
        first = assay(tmp_path, *args)
        assert first.returncode == 0, first.stderr
        if name == "s3":
            listing = client.list_objects_v2(Bucket=bucket, Prefix="scores/")["Contents"]
            keys = {o["Key"] for o in listing}
            assert "scores/_BACKFILL.json" in keys and f"scores/dt={DAYS[1]}/_SUCCESS" in keys
            data = json.loads(client.get_object(Bucket=bucket, Key="scores/_BACKFILL.json")["Body"].read())
            before = {o["Key"]: o["ETag"] for o in listing if not o["Key"].endswith("_BACKFILL.json")}
        else:
            data = json.loads((tmp_path / "lake" / "_summaries" / "_BACKFILL.json").read_text())
            versions = sorted((tmp_path / "lake" / "_delta_log").glob("*.json"))
            assert len(versions) == 2  # one commit per day
        assert [d["pairs"]["scored"] for d in data["days"]] == [N, N] and data["exit_code"] == 0
        again = assay(tmp_path, *args)
        assert again.returncode == 0, again.stderr
        if name == "s3":
            listing = client.list_objects_v2(Bucket=bucket, Prefix="scores/")["Contents"]
            assert {o["Key"]: o["ETag"] for o in listing if not o["Key"].endswith("_BACKFILL.json")} == before
        else:
            assert sorted((tmp_path / "lake" / "_delta_log").glob("*.json")) == versions
            data = json.loads((tmp_path / "lake" / "_summaries" / "_BACKFILL.json").read_text())
            assert [d["ran"] for d in data["days"]] == [False, False]
