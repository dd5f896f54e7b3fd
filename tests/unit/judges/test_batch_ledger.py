"""The batch ledger's line states and the provider result lines, without a network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from assay.judges.batch.api import AnthropicBatches, OpenAIBatches
from assay.judges.batch.ledger import Ledger
from assay.judges.config import JudgeConfig
from assay.judges.providers import provider_for
from assay.judges.state_file import CorruptStateFile


def test_a_line_goes_queued_submitted_then_done_retry_or_exhausted(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    assert led.queue("j", [("a", b"{}", 10), ("b", b"{}", 20), ("c", b"{}", 30)]) == 3
    assert led.queue("j", [("a", b"{}", 10)]) == 0  # already known: not queued twice
    assert led.waiting("j", 3) == 3
    batch = led.new_batch_id()
    led.begin_batch(batch, "j", ["a", "b", "c"], 60, "in.jsonl")
    assert led.open_tokens("j") == 60 and led.waiting("j", 3) == 0
    assert led.batches(states=["creating"])[0]["id"] == batch
    led.created(batch, "batch_x", "validating")
    led.mark(batch, [("a", "done", None, 5, 2, 0.1), ("b", "retry", "expired", 0, 0, 0.0)])
    led.mark(batch, [("a", "retry", "twice", 0, 0, 0.0)])  # collected again after a crash: no change
    led.collected(batch, max_attempts=1)
    assert led.counts() == {"done": 1, "exhausted": 2}  # one attempt allowed: b and the missing c
    assert led.batch_usage()["j"] == {"lines": 1, "input_tokens": 5, "output_tokens": 2, "cost_usd": 0.1}
    assert led.open_tokens("j") == 0
    led.close()


def test_unsend_puts_lines_back_without_spending_an_attempt(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    led.queue("j", [("a", b"{}", 1)])
    batch = led.new_batch_id()
    led.begin_batch(batch, "j", ["a"], 1, "in.jsonl")
    led.unsend(batch, "token_limit_exceeded")
    assert led.line("a") == {
        "custom_id": "a",
        "judge": "j",
        "state": "queued",
        "attempts": 0,
        "batch": None,
        "error": None,
    }
    assert led.batches()[0]["state"] == "refused"
    led.close()


def test_a_done_line_whose_answer_left_the_cache_is_queued_again(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    led.queue("j", [("a", b"{}", 1)])
    batch = led.new_batch_id()
    led.begin_batch(batch, "j", ["a"], 1, "in.jsonl")
    led.mark(batch, [("a", "done", None, 1, 1, 0.0)])
    assert led.queue("j", [("a", b'{"x": 1}', 1)]) == 1
    assert led.line("a")["state"] == "queued"  # type: ignore[index]
    led.close()


def test_result_lines_are_classified_as_the_providers_mean_them() -> None:
    openai = OpenAIBatches("j", provider_for(JudgeConfig(model="m", mode="batch")), None)
    ok = openai._line({"custom_id": "a", "response": {"status_code": 200, "body": {"choices": []}}, "error": None})
    assert (ok.outcome, ok.body) == ("done", {"choices": []})
    bad = openai._line(
        {"custom_id": "b", "response": {"status_code": 400, "body": {"error": {"message": "no", "type": "x"}}}}
    )
    assert bad.outcome == "invalid" and "no" in str(bad.error)
    assert openai._line({"custom_id": "c", "response": {"status_code": 500, "body": {}}}).outcome == "retry"
    assert openai._line({"custom_id": "d", "response": None, "error": {"code": "batch_expired"}}).outcome == "retry"
    anthropic = AnthropicBatches("j", provider_for(JudgeConfig(provider="anthropic", model="m", mode="batch")), None)
    assert anthropic._line({"custom_id": "a", "result": {"type": "succeeded", "message": {}}}).outcome == "done"
    invalid = {
        "type": "errored",
        "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "m"}},
    }
    assert anthropic._line({"custom_id": "b", "result": invalid}).outcome == "invalid"
    overloaded = {"type": "errored", "error": {"type": "error", "error": {"type": "overloaded_error"}}}
    assert anthropic._line({"custom_id": "c", "result": overloaded}).outcome == "retry"
    assert anthropic._line({"custom_id": "d", "result": {"type": "expired"}}).outcome == "retry"
    assert anthropic._line({"custom_id": "e", "result": {"type": "canceled"}}).outcome == "retry"


def test_a_lost_batch_puts_its_unanswered_lines_back_and_counts_the_attempt(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.sqlite")
    led.queue("j", [("a", b"{}", 1), ("b", b"{}", 1), ("c", b"{}", 1)])
    batch = led.new_batch_id()
    led.begin_batch(batch, "j", ["a", "b", "c"], 3, "in.jsonl")
    led.created(batch, "batch_x", "in_progress")
    led.mark(batch, [("a", "done", None, 5, 2, 0.1)])  # read before its result file went away
    assert (led.find_batch("batch_x") or {})["id"] == batch
    assert (led.find_batch(batch) or {})["provider_id"] == "batch_x"
    assert led.lose(batch, 2, "gone") == 2
    assert led.counts() == {"done": 1, "retry": 2}
    assert led.waiting("j", 2) == 2 and [cid for cid, _, _ in led.next_lines("j", 2, 10)] == ["b", "c"]
    assert led.batches(states=["lost"])[0]["error"] == "gone" and led.open_tokens("j") == 0
    again = led.new_batch_id()
    led.begin_batch(again, "j", ["b", "c"], 2, "in2.jsonl")
    assert led.lose(again, 2, "gone again") == 2
    assert led.counts() == {"done": 1, "exhausted": 2}  # two attempts spent: the fallback's turn
    led.close()


def test_a_damaged_ledger_is_one_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(CorruptStateFile, match=r"batch ledger .*l\.sqlite is damaged .*move it aside"):
        Ledger(path)
    path.unlink()
    led = Ledger(path)
    led.queue("j", [("a", b"{}", 1)])
    led._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    led.close()
    size = path.stat().st_size
    with path.open("r+b") as f:  # every page after the header overwritten
        f.seek(100)
        f.write(os.urandom(size - 100))
    with pytest.raises(CorruptStateFile, match=str(path)):
        led = Ledger(path)
        try:
            list(led.next_lines("j", 3, 10))
        finally:
            led.close()


def test_a_collect_pass_sees_a_stand_in_for_each_real_time_judge_and_the_run_pool_stays_as_it_is(
    tmp_path: Path,
) -> None:
    import anyio

    from assay.exceptions import JudgeError
    from assay.judges.base import JudgeRequest
    from assay.judges.batch import rounds
    from assay.judges.pool import JudgePool

    judges = {
        "live": {"provider": "openai", "model": "m"},
        "cheap": {"provider": "openai", "model": "m", "mode": "batch"},
    }
    pool = JudgePool.from_config(judges, state_dir=tmp_path)
    before = dict(pool.endpoints)
    state = rounds.BatchState(Ledger(tmp_path / "l.sqlite"), {"cheap": JudgeConfig.model_validate(judges["cheap"])})
    view, batch = rounds.begin_collect(state, pool)
    assert pool.endpoints == before  # the run's pool still opens and closes its own endpoints
    assert batch == [pool.get("cheap")] and view.get("cheap") is pool.get("cheap")
    assert view.get("live") is not pool.get("live")
    assert view.cache is pool.cache and view.budget is pool.budget and view.secrets is pool.secrets
    with pytest.raises(JudgeError, match="not called in the collect pass"):
        anyio.run(view.get("live").complete, JudgeRequest(messages=[{"role": "user", "content": "q"}]))
    assert state.ledger.get_meta("collect") == "running"
    state.ledger.close()
