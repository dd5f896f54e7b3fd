"""A batch GET (poll, listing, download) that fails is retried after a backoff that grows from
``GET_BACKOFF_S``, or from the judge's ``poll_interval_s`` when that is shorter (the suite's runs
poll every 0.2 s and so retry as briskly, instead of waiting 1 + 2 + 4 + 8 s)."""

from __future__ import annotations

from assay.judges.batch.api import GET_BACKOFF_S, GET_RETRIES, get_backoff
from assay.judges.config import JudgeConfig


def test_the_default_poll_interval_keeps_the_one_second_backoff() -> None:
    cfg = JudgeConfig(model="m", mode="batch")
    assert cfg.batch.poll_interval_s > GET_BACKOFF_S
    assert [get_backoff(cfg, a) for a in range(GET_RETRIES)] == [1.0, 2.0, 4.0, 8.0]


def test_a_shorter_poll_interval_starts_the_backoff() -> None:
    cfg = JudgeConfig(model="m", mode="batch", batch={"poll_interval_s": 0.25})
    assert [get_backoff(cfg, a) for a in range(GET_RETRIES)] == [0.25, 0.5, 1.0, 2.0]
