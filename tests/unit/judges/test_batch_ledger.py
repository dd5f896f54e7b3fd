"""The batch ledger's line states and the provider result lines, without a network."""

from __future__ import annotations

from pathlib import Path

from assay.judges.batch.api import AnthropicBatches, OpenAIBatches
from assay.judges.batch.ledger import Ledger
from assay.judges.config import JudgeConfig


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
    openai = OpenAIBatches("j", JudgeConfig(model="m", mode="batch"), None)
    ok = openai._line({"custom_id": "a", "response": {"status_code": 200, "body": {"choices": []}}, "error": None})
    assert (ok.outcome, ok.body) == ("done", {"choices": []})
    bad = openai._line(
        {"custom_id": "b", "response": {"status_code": 400, "body": {"error": {"message": "no", "type": "x"}}}}
    )
    assert bad.outcome == "invalid" and "no" in str(bad.error)
    assert openai._line({"custom_id": "c", "response": {"status_code": 500, "body": {}}}).outcome == "retry"
    assert openai._line({"custom_id": "d", "response": None, "error": {"code": "batch_expired"}}).outcome == "retry"
    anthropic = AnthropicBatches("j", JudgeConfig(provider="anthropic", model="m", mode="batch"), None)
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
