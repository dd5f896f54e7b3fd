"""``limits.budget_usd`` as a user meets it: `assay run` against the stand-in judge server, whose
answers vary in length (a verdict of 10 to 1,500 words, as a judge's reasoning does), with prices
set. A run stops within one request's cost of the budget whatever the concurrency, and whatever
the number of processes spending it (``--workers N``); a rerun under the same budget says the
budget was spent and to raise it; a raised budget resumes the run to the end, with one row per
trace and no request paid twice."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from assay.testing.judge_server import JudgeServerThread
from tests.conftest import agent_messages

IN_PRICE, OUT_PRICE = 3.0, 15.0  # $ per million tokens


class Verbose:
    """A rule whose verdict's length (10 to 1,500 words) depends on the prompt; it records what
    each request costs as the server counts tokens, and each prompt it was asked."""

    def __init__(self, cheap_from: int | None = None) -> None:
        self.costs: list[float] = []
        self.prompts: list[str] = []
        self.cheap_from = cheap_from  # the questions from this index on get a 10-word verdict

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = orjson.dumps(body["messages"])
        words = 10 + int(hashlib.sha256(prompt).hexdigest(), 16) % 1491
        question = re.search(rb"question \d+-(\d+) ", prompt)
        if self.cheap_from is not None and question is not None and int(question[1]) >= self.cheap_from:
            words = 10
        verdict = {"reasoning": "word " * words, "score": 1, "passed": True}
        tokens_in = len(prompt) // 4 + 1  # as the server counts them
        tokens_out = len(orjson.dumps(verdict)) // 4 + 1
        self.costs.append((tokens_in * IN_PRICE + tokens_out * OUT_PRICE) / 1e6)
        self.prompts.append(prompt.decode())
        return verdict


def corpus(path: Path, n: int, seed: int, words: int = 1500) -> None:
    recs = [
        {
            "id": f"t{i}",
            "inputs": f"question {seed}-{i} " + "detail " * (50 + (i * 7919 + seed) % words),
            "messages": agent_messages(("search", {"q": i}), final=f"answer {i}"),
            "reference_outputs": f"answer {i}",
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def run_file(tmp_path: Path, url: str, budget: float, concurrency: int) -> Path:
    f = tmp_path / "run.yaml"
    cfg = {
        "source": {"path": str(tmp_path / "corpus.jsonl")},
        "judges": {
            "standin": {
                "provider": "openai",
                "base_url": f"{url}/v1",
                "model": "judge-1",
                "timeout": 20,
                "max_retries": 2,
                "hedge": False,  # a hedged copy is a second request for one call: none here
                "rpm": 60000,
                "max_concurrency": concurrency,
                "input_price_per_mtok": IN_PRICE,
                "output_price_per_mtok": OUT_PRICE,
            },
        },
        "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "standin"}}],
        "sink": {"path": str(tmp_path / "out")},
        "state_dir": str(tmp_path / "state"),
        "limits": {"batch_size": 64, "budget_usd": budget},
    }
    f.write_text(json.dumps(cfg))
    return f


def assay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True, timeout=300)


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def summary(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize(("seed", "concurrency"), [(1, 64), (2, 16), (3, 4)])
def test_a_run_stops_within_one_request_of_the_budget(tmp_path: Path, seed: int, concurrency: int) -> None:
    corpus(tmp_path / "corpus.jsonl", 200, seed)
    rule = Verbose()
    with JudgeServerThread(latency=(0.02, 0.2), seed=seed, rule=rule) as server:
        f = run_file(tmp_path, server.url, 0.5, concurrency)
        proc = assay("run", str(f), "-q")
        assert proc.returncode == 5, proc.stderr
        requests = server.stats.requests
    spent = summary(tmp_path)["totals"]["cost_usd"]
    assert spent == pytest.approx(sum(rule.costs), abs=1e-6)  # the run counts what the server billed
    one = max(rule.costs)
    assert 0.5 - one < spent <= 0.5 + one, (spent, one, requests)
    assert "$0.50" in proc.stderr and "raise limits.budget_usd" in proc.stderr


def test_same_budget_says_raise_it_and_a_raised_budget_resumes_paying_nothing_twice(tmp_path: Path) -> None:
    n = 60
    corpus(tmp_path / "corpus.jsonl", n, 7)
    rule = Verbose()
    with JudgeServerThread(latency=(0.02, 0.1), seed=7, rule=rule) as server:
        f = run_file(tmp_path, server.url, 0.3, 16)
        first = assay("run", str(f), "-q")
        assert first.returncode == 5, first.stderr
        paid = server.stats.requests
        assert 0 < paid < n
        assert "raise limits.budget_usd (e.g. --set limits.budget_usd=0.6" in first.stderr

        again = assay("run", str(f), "-q")  # the same command, the same budget
        assert again.returncode == 5, again.stderr
        assert server.stats.requests == paid  # nothing sent
        line = next(x for x in again.stderr.splitlines() if "budget reached" in x)
        assert "limits.budget_usd of $0.30 was already spent" in line and "--set limits.budget_usd=" in line
        assert "Traceback" not in again.stderr

        raised = assay("run", str(f), "-q", "--set", "limits.budget_usd=0.6")
        assert raised.returncode == 5, raised.stderr  # further, not yet to the end
        assert paid < server.stats.requests

        done = assay("run", str(f), "-q", "--set", "limits.budget_usd=100")
        assert done.returncode == 0, done.stderr
    got = rows(tmp_path / "out")
    assert sorted(r["trace_id"] for r in got) == sorted(f"t{i}" for i in range(n))  # one row per trace
    assert len(rule.prompts) == len(set(rule.prompts)) == n  # every judge call paid once
    assert summary(tmp_path)["totals"]["cost_usd"] == pytest.approx(sum(rule.costs), abs=1e-6)
    assert (tmp_path / "out" / "_SUCCESS").exists()


@pytest.mark.parametrize(("seed", "workers", "store"), [(11, 2, "sqlite"), (12, 3, "sqlite"), (13, 2, "redis")])
def test_workers_share_one_budget(tmp_path: Path, seed: int, workers: int, store: str, request: Any) -> None:
    """N processes reserve against one budget (``<state_dir>/budget.sqlite``): together they stop
    within one request's cost of it, as one process does, and the same command again sends
    nothing. The last shard's traces are cheap: its writer finishes early, and what it did not
    spend goes to the others (with a share each, the run stopped at about (N-1)/N of the cap;
    each share could also be overshot by a request, N in all). With ``rate_store: redis://…`` the
    budget is kept in that Redis."""
    n = 240
    corpus(tmp_path / "corpus.jsonl", n, seed, words=50)
    rule = Verbose(cheap_from=n * (workers - 1) // workers)
    with JudgeServerThread(latency=(0.02, 0.2), seed=seed, rule=rule) as server:
        f = run_file(tmp_path, server.url, 0.5, 32)
        if store == "redis":
            pytest.importorskip("redis")
            redis_url = request.getfixturevalue("redis_server").url.rsplit("/", 1)[0] + "/8"
            f.write_text(json.dumps({**json.loads(f.read_text()), "rate_store": redis_url}))
        proc = assay("run", str(f), "-q", "--workers", str(workers))
        assert proc.returncode == 5, proc.stderr
        paid = server.stats.requests
        again = assay("run", str(f), "-q", "--workers", str(workers))
        assert again.returncode == 5, again.stderr
        assert server.stats.requests == paid  # nothing sent under the same cap
        assert "Traceback" not in proc.stderr + again.stderr
        spent = summary(tmp_path)["totals"]["cost_usd"]
        assert spent == pytest.approx(sum(rule.costs), abs=1e-6)
        one = max(rule.costs)
        assert 0.5 - one < spent <= 0.5 + one, (spent, one, paid)
        assert "$0.50" in proc.stderr and "raise limits.budget_usd" in proc.stderr
        # one process resumes under a raised cap: what every writer spent counts
        alone = assay("run", str(f), "-q", "--set", "limits.budget_usd=0.7")
        assert alone.returncode == 5, alone.stderr
    spent = summary(tmp_path)["totals"]["cost_usd"]
    assert spent == pytest.approx(sum(rule.costs), abs=1e-6)
    assert 0.7 - max(rule.costs) < spent <= 0.7 + max(rule.costs), spent
    assert len(rule.prompts) == len(set(rule.prompts))  # no call paid twice
    if store == "redis":  # the reservations were in Redis, not in the state directory
        import redis

        assert redis.Redis.from_url(redis_url).keys("assay:budget:*")
        assert not (tmp_path / "state" / "budget.sqlite").exists()
    else:
        assert (tmp_path / "state" / "budget.sqlite").exists()
